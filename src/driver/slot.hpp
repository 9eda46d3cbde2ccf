// driver::Slot: one granted tenancy of a split and the lane that processes it.
//
// Two kinds of state with two owners:
//  * control flags (lost, drain, shutdown, abort, forced, ended, where, not_before) are guarded by
//    Driver::Impl::mu_; the control thread sets the requests, the worker reads them at each turn;
//  * lane state (lane, work, committed, ...) belongs to the one thread running the slot's turn
//    (a slot is in the ready queue, running, delayed, waiting or closed, never two at once).
#pragma once

#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include "etlc/clock.hpp"
#include "etlc/events.hpp"
#include "etlc/split.hpp"
#include "etlc/split_source.hpp"

namespace etlc::driver {

struct Slot {
  enum class Where : std::uint8_t {
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

  std::uint64_t serial = 0;
  SplitGranted grant;
  std::stop_source stop;

  // Guarded by Driver::Impl::mu_.
  Where where = Where::ready;
  bool lost = false;      // SplitLost: stop now, never commit again
  bool drain = false;     // RevokeRequested
  bool shutdown = false;  // graceful stop of the driver
  bool abort = false;     // abort(): stop now, nothing more
  bool forced = false;    // the shutdown deadline passed: close without a final commit
  bool ended = false;     // the worker reached a terminal outcome; events no longer apply
  Clock::time_point not_before{};

  // Owned by the thread running the turn.
  std::unique_ptr<Lane> lane;
  bool opened = false;
  Work work = Work::run;
  SplitProgress committed;       // the last progress known durable for this tenancy
  SplitProgress final_progress;  // for complete / drain_commit / shutdown_commit
  std::string reason;            // for fail
  bool sink_refused = false;     // the fail is the answer to a sink fence refusal
  Clock::time_point next_commit_at{};

  const std::string& id() const { return grant.spec.id; }
};

}  // namespace etlc::driver
