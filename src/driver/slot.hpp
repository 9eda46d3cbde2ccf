// driver::Slot: one granted tenancy of a split and the lane that processes it.
//
// Two kinds of state with two owners:
//  * control flags (lost, drain, shutdown, abort, forced, ended, where, not_before) are guarded by
//    Driver::Impl::mu_, which the slot names as `mu`; the control thread sets the requests, the
//    worker reads them at each turn. Code holding the driver's lock touches them through a
//    FlagsHeld (below), so the analysis checks both names;
//  * lane state (lane, work, committed, ...) belongs to the one thread running the slot's turn
//    (a slot is in the ready queue, running, delayed, waiting or closed, never two at once).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "core/protocol_assert.hpp"
#include "etlc/clock.hpp"
#include "etlc/detail/mutex.hpp"
#include "etlc/events.hpp"
#include "etlc/split.hpp"
#include "etlc/split_source.hpp"

namespace etlc::driver {

struct Slot {
  enum class Where : std::uint8_t {
    created,  // granted, not yet placed
    waiting,  // an older slot of the same split is still closing
    ready,    // queued for a worker
    running,  // a worker is running its turn
    delayed,  // waiting for not_before (a retry)
    closed,
  };
  // What the lane does next (lane_turn.cpp has one function per state).
  enum class Work : std::uint8_t {
    run,              // steps, commits on the interval
    complete,         // end of split reached: commit final_progress as the completion
    fail,             // poison: fail(reason)
    drain_commit,     // revoked and drained: commit final_progress
    drain_release,    // ... then release_drained
    shutdown_commit,  // stopping and drained: commit final_progress, then close
  };

  // `driver_mu`: the driver's mutex (Driver::Impl::mu_), which guards the control flags.
  explicit Slot(Mutex& driver_mu) : mu(driver_mu) {}

  std::uint64_t serial = 0;
  SplitGranted grant;
  std::stop_source stop;

  Mutex& mu;  // the driver's
  Where where ETLC_GUARDED_BY(mu) = Where::created;
  bool lost ETLC_GUARDED_BY(mu) = false;      // SplitLost: stop now, never commit again
  bool drain ETLC_GUARDED_BY(mu) = false;     // RevokeRequested
  bool shutdown ETLC_GUARDED_BY(mu) = false;  // graceful stop of the driver
  bool abort ETLC_GUARDED_BY(mu) = false;     // abort(): stop now, nothing more
  bool forced ETLC_GUARDED_BY(mu) = false;  // the shutdown deadline passed: close, no final commit
  bool ended ETLC_GUARDED_BY(mu) = false;   // the worker reached a terminal outcome
  std::optional<double> split_keep ETLC_GUARDED_BY(mu);  // SplitRequested, not yet taken
  Clock::time_point not_before ETLC_GUARDED_BY(mu){};

  // Owned by the thread running the turn.
  std::unique_ptr<Lane> lane;
  bool opened = false;
  Work work = Work::run;
  SplitProgress committed;       // the last progress known durable for this tenancy
  SplitProgress final_progress;  // for complete / drain_commit / shutdown_commit
  std::string reason;            // for fail
  bool sink_refused = false;     // the fail is the answer to a sink fence refusal
  Clock::time_point next_commit_at{};
  // A cut the lane made (Lane::split) that is not durable yet: every commit carries it
  // (MemberApi::split) until one lands, so no commit records the lane's new end without it.
  std::optional<SplitResidual> pending_cut;

  const std::string& id() const { return grant.spec.id; }

  // The slot's life: created -> ready | waiting; waiting -> ready; ready -> running;
  // running -> ready | delayed | closed; delayed -> ready. Any other move is a driver bug.
  static bool allowed(Where from, Where to) {
    switch (from) {
      case Where::created:
        return to == Where::ready || to == Where::waiting;
      case Where::waiting:
        return to == Where::ready;
      case Where::ready:
        return to == Where::running;
      case Where::running:
        return to == Where::ready || to == Where::delayed || to == Where::closed;
      case Where::delayed:
        return to == Where::ready;
      case Where::closed:
        return false;
    }
    return false;
  }
  void move_to(Where to) ETLC_REQUIRES(mu) {
    ETLC_ASSERT(allowed(where, to), "driver slot of split '{}' moved from {} to {}", id(),
                static_cast<int>(where), static_cast<int>(to));
    where = to;
  }
};

// For its scope, lets the holder of the driver's mutex touch `slot`'s control flags: the analysis
// sees Impl::mu_ and slot.mu as two locks, though they are one Mutex. Construct it as
// `FlagsHeld flags(slot, held(mu_))`: held() makes the analysis check that mu_ is held, the
// constructor checks (always, it is one compare) that slot.mu is that very mutex, and the flags
// count as locked until the scope ends. It locks nothing itself; declare it after the MutexLock
// it relies on, in the same or an inner scope.
class ETLC_SCOPED_CAPABILITY FlagsHeld {
 public:
  FlagsHeld(const Slot& slot, const Mutex& driver_mu) ETLC_ACQUIRE(slot.mu) {
    if (&slot.mu != &driver_mu) std::abort();  // a slot of another driver: a bug, not an input
  }
  ~FlagsHeld() ETLC_RELEASE() {}
  FlagsHeld(const FlagsHeld&) = delete;
  FlagsHeld& operator=(const FlagsHeld&) = delete;
};

}  // namespace etlc::driver
