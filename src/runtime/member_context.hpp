// MemberContext: what every collaborator of one member shares and nobody changes while it lives:
// its configuration, its store (already metered), its clock, its metrics, its identity. The
// Member owns the referenced objects and outlives its collaborators.
#pragma once

#include <functional>
#include <string>

#include "etlc/clock.hpp"
#include "etlc/config.hpp"
#include "etlc/store.hpp"
#include "runtime/member_metrics.hpp"

namespace etlc::runtime {

using TimePoint = Clock::time_point;
using Duration = Clock::duration;

// Hooks that exist only so the simulator can prove its checker can fail. Never set them in
// production: each one removes a safety mechanism.
struct UnsafeTestHooks {
  bool commit_without_fence = false;  // commits overwrite the record whatever its epoch
};

struct MemberContext {
  const CoordinatorConfig& config;
  KvStore& store;
  const Clock& clock;
  MemberMetrics& metrics;
  const std::string& instance;
  const std::string& fingerprint;
  // Asks for an early step (any thread; may be empty).
  const std::function<void()>& wake;
  const UnsafeTestHooks& unsafe;

  void wake_loop() const {
    if (wake) wake();
  }
};

}  // namespace etlc::runtime
