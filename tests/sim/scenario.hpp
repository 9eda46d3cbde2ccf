// What one simulated run looks like: the fleet, the job, the source's pace and the faults, all
// derived from (seed, scenario, overrides). A scenario is a named mix of fault rates; `--faults`
// overrides single rates by name (see parse_overrides for the names).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sim_clock.hpp"

namespace etlc::sim {

// Fault rates. Rates named *_per_s are Poisson rates for the whole fleet per second of virtual
// time during the fault phase; probabilities are per operation (or per call). All zero = calm.
struct FaultRates {
  double crash_per_s = 0;         // a member dies (no release) and restarts after a while
  double restart_same_id = 0.6;   // probability a restart reuses the crashed member's id
  double pause_per_s = 0;         // a member stops (GC pause) for up to a few leases: a zombie
  double leader_crash_per_s = 0;  // the leader dies after its next k store operations
  double partition_per_s = 0;     // every store operation of one member fails for a while
  double watch_drop_per_s = 0;    // one member's watches break
  double watch_delay_per_s = 0;   // one member's watch events are delayed (and reordered)
  double stale_per_s = 0;         // one member's point reads are served stale for a while
  double operator_per_s = 0;      // an outsider overwrites or deletes a random record (garbage,
                                  // a foreign version, the wrong kind, a large value, a delete)
  double op_fail = 0;             // a store operation fails (unavailable), nothing applied
  double op_unknown = 0;          // a write's outcome is unknown: dropped, applied, or late
  double planner_fail = 0;        // a plan() call throws
  std::int64_t skew_ppm = 2'000;  // members' clock rates differ by up to this (parts/10^6)
  bool grow = false;              // the plan is open and grows on every re-plan
  bool poison = false;            // some splits always fail()
  bool unsafe_commit_without_fence = false;  // test-only: disables the epoch check on commits
  double sink_fail = 0;     // a sink transaction fails, nothing applied (sim_sink.hpp)
  double sink_unknown = 0;  // a sink transaction's outcome is unknown: dropped, applied, late
  bool unsafe_sink_without_fence = false;  // test-only: the sink checks no epoch
  bool unsafe_ignore_lapse = false;  // test-only: lanes that should check their session do not
  // Balancing on remaining work (issue 16): lanes report done (= their watermark) and the leader
  // balances on it; off, the planned-weight rule before it. The two figures override the
  // CoordinatorConfig defaults when >= 0.
  bool report_done = true;
  bool remaining_work = true;
  std::int64_t damping_ppm = -1;
  std::int64_t pin_ppm = -1;
  std::int64_t cooldown_ms = -1;  // rebalance_cooldown
  bool pace = true;               // balance_by_pace
  std::int64_t pace_gain_ppm = -1;
  bool tail = false;       // a skewed job on members of uneven speed, run to completion (`tail`)
  bool even_pace = false;  // tail, but every member's lanes at the same speed
  // Dynamic splitting (issue 17): whether lanes answer the leader's SplitRequested by cutting
  // their range (else they ignore it, as before). `random`: on for half of the seeds, drawn from
  // a stream of its own so the job's shape does not change. split_refuse: a lane's chance to
  // refuse a request it could answer. straggler: one split much larger than the rest.
  enum class Split : std::uint8_t { off, on, random } split = Split::off;
  double split_refuse = 0.3;
  bool straggler = false;
  bool unsafe_cut_below_emitted = false;  // test-only: lanes cut one record below their next
};

enum class PlanShape : std::uint8_t { final_plan, open_grows_then_final, open_grows_forever };

struct RunParams {
  std::uint64_t seed = 0;
  std::string scenario;
  std::string overrides;  // as given to --faults, for the replay command
  FaultRates faults;

  // Fleet.
  int members = 3;                           // initial member count (1..12; 1 only in `lone`)
  std::vector<std::uint32_t> max_in_flight;  // per initial member
  std::vector<std::uint32_t> pace_pct;       // per initial member: its lanes' pause, % (100)
  std::int64_t lease_ms = 3000;
  std::int64_t op_timeout_ms = 500;
  std::int64_t rebalance_delay_ms = 1000;
  std::int64_t drain_deadline_ms = 1000;
  std::uint32_t max_attempts = 3;
  std::int64_t assignment_interval_ms = 0;
  std::uint32_t bulk_ops_per_step = 16;
  std::int64_t replan_interval_ms = 2000;

  // Job and source.
  PlanShape shape = PlanShape::final_plan;
  std::vector<std::uint64_t> records;         // records per split (the split's weight)
  std::set<std::size_t> poison;               // indices of splits whose lanes always fail()
  std::size_t initial_splits = 0;             // open plans: splits listed by the first plan
  std::size_t growth = 0;                     // open plans: splits added per re-plan
  VirtualNs lane_min_pause = 100 * kNsPerMs;  // a lane's pace: pause between actions
  VirtualNs lane_max_pause = 600 * kNsPerMs;
  std::int64_t lane_max_batch = 3;  // records emitted per action (1..n)
  bool split = false;               // lanes cut their range when asked (FaultRates::split)

  // Phases: faults, then quiet with the source frozen (convergence), then quiet with the source
  // running (completion). Each quiet phase has a bound past which liveness is violated.
  VirtualNs fault_phase = 20 * kNsPerS;
  VirtualNs converge_bound = 60 * kNsPerS;
  VirtualNs complete_bound = 300 * kNsPerS;
  VirtualNs fixpoint_window = 3 * kNsPerS;
};

// The scenario names, in the order `all` cycles through them.
const std::vector<std::string>& scenario_names();
// The rates of a scenario; nullopt for an unknown name.
std::optional<FaultRates> scenario_rates(std::string_view name);

// Applies "name=value,name=value" overrides to rates (and to the fleet/job shape: members,
// splits, fault_s). Throws std::invalid_argument naming an unknown name or a bad value.
struct ShapeOverrides {
  std::optional<int> members;
  std::optional<std::size_t> splits;
  std::optional<double> fault_s;
};
ShapeOverrides parse_overrides(std::string_view text, FaultRates& rates);

// Everything about a run, from its seed. `scenario` may be "all" (picks one by seed).
// Throws std::invalid_argument for an unknown scenario or bad overrides.
RunParams make_params(std::uint64_t seed, std::string_view scenario, std::string_view overrides);

// "etlc-sim --seeds 1 --from <seed> --scenario <name> [--faults '<overrides>'] --trace"
std::string replay_command(const RunParams& p);

}  // namespace etlc::sim
