// The start-up wait of thread mode (CoordinatorConfig::startup_wait): Coordinator::start()'s
// join, retried while the store cannot be reached, so that a member started before its store
// (Kubernetes, systemd) joins once the store is up instead of failing at once.
#pragma once

#include <chrono>

#include "runtime/member.hpp"

namespace etlc::runtime {

// Calls member.join_now() until it succeeds or `wait` has passed, sleeping between attempts
// (250 ms doubling to 5 s) and logging one warning per failed attempt. Only StoreError
// unavailable / unknown_outcome is retried; anything else, and the last failure, propagates
// (the last one names the attempts and the wait). Blocks the caller's thread; reads the steady
// clock, not the member's Clock (thread mode only).
void join_with_startup_wait(Member& member, std::chrono::milliseconds wait);

}  // namespace etlc::runtime
