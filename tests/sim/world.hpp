// The simulator: N members of the real runtime (etlc::runtime::Member) on one thread, on virtual
// time, over one shared MemoryStore behind per-member fault decorators, with a simulated source
// and a checker. One seed reproduces a run event for event.
//
// A run has three phases:
//   faults    members crash and restart, pause past their lease, get cut off from the store; the
//             store fails, answers stale, delays, reorders and drops watch events; the leader
//             dies mid-plan or mid-publish; the planner fails; clocks drift.
//   converge  faults stop and the source freezes (lanes hold their splits but emit nothing):
//             within converge_bound the fleet must reach a fixpoint where every member holds
//             exactly what its assignment names and the leader stops publishing (invariant 5).
//   complete  the source resumes: within complete_bound every split completes or is
//             quarantined, every member observes the verdict, and the fleet is quiet again.
// Safety invariants (1-4, 6) are checked by History on every write throughout.
//
// Scheduling: every member step, lane action, watch delivery, late write and fault is an event
// at a virtual time drawn from the seeded PRNG; ties are broken by a fixed order. Member calls
// (steps and user API calls) are atomic with respect to virtual time.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "history.hpp"
#include "scenario.hpp"
#include "sim_sink.hpp"
#include "trace.hpp"

namespace etlc::sim {

struct RunOptions {
  bool keep_full_trace = false;  // keep every trace record (determinism test, --trace)
  std::size_t tail = 400;        // trace records kept for a violation report
  // The machinery's own test: the planner fails an ETLC_ASSERT on its first call, which must
  // become a finding (invariant 0) with the seed.
  bool assert_in_planner = false;
};

struct RunStats {
  std::uint64_t steps = 0, calls = 0, events = 0;
  std::uint64_t crashes = 0, restarts_same_id = 0, restarts_new_id = 0;
  std::uint64_t pauses = 0, zombie_commits = 0;
  std::uint64_t leader_crashes_armed = 0, leader_crashes = 0, mid_plan = 0, mid_publish = 0;
  std::uint64_t partitions = 0, watch_drops = 0, slow_watches = 0, stale_episodes = 0;
  std::uint64_t late_writes = 0, planner_calls = 0, planner_failures = 0;
  std::uint64_t fenced = 0, fatal = 0, quarantined_events = 0, revokes = 0;
  std::uint64_t stale_grants = 0;         // grants resuming below the durable record (stale read)
  std::uint64_t revokes_late = 0;         // revocations once 80 % of the job's records were durable
  std::uint64_t revokes_nearly_done = 0;  // revocations of a split 90 % done (durable)
  std::uint64_t revokes_late_to_faster = 0;  // of revokes_late: next granted to a faster member
  std::uint64_t stale_anomalies = 0;         // UsageErrors the runtime raised after stale reads
  // Dynamic splitting: requests the lanes got, cuts they refused (at random, or unable) and made.
  std::uint64_t split_requests = 0, cuts_refused = 0, cuts_made = 0;
  std::uint64_t cut_crashes = 0;   // processes that died at a crash point a cut armed
  VirtualNs converged_after = -1;  // from the end of the fault phase
  VirtualNs completed_after = -1;  // from the start of the completion phase
};

struct RunResult {
  RunParams params;
  std::optional<Violation> violation;
  std::uint64_t violations = 0;
  std::uint64_t trace_hash = 0;
  std::uint64_t trace_events = 0;
  VirtualNs virtual_ns = 0;
  double real_s = 0;
  RunStats stats;
  HistoryStats history;
  SinkStats sink;
  std::deque<TraceRecord> tail;
  std::vector<TraceRecord> full;    // with keep_full_trace
  std::vector<std::string> actors;  // incarnation number -> "m03#7"
  std::string final_state;          // a dump of the fleet, for liveness reports

  bool ok() const { return !violation.has_value(); }
  // The violation, the replay command and the last trace records.
  std::string report(std::size_t last = 80) const;
};

RunResult run_simulation(const RunParams& params, const RunOptions& options = {});

}  // namespace etlc::sim
