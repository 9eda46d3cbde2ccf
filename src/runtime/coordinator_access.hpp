// The runtime::Member behind a Coordinator, for the library's own tests and benchmarks (they read
// its assignment, nonce and leader tallies). Not public API: the installed headers only name
// CoordinatorAccess as a friend of Coordinator.
#pragma once

#include "etlc/coordinator.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

struct CoordinatorAccess {
  static Member& member(Coordinator& coordinator) { return *coordinator.member_; }
};

// The member `coordinator` owns; valid as long as the coordinator is.
inline Member& member_of(Coordinator& coordinator) {
  return CoordinatorAccess::member(coordinator);
}

}  // namespace etlc::runtime
