// Projection by simulation (issue 14, target 6): a fleet of the real runtime (runtime::Member) on
// virtual time over the simulator's store stack with NO faults, driven through five phases while
// every member's store calls and watch deliveries are counted.
//
//   cold start  every member joins at once; the leader plans and seeds the job; every lane fills
//   steady      `steady_leases` leases with nothing happening but renewals
//   join        one new member joins
//   leave       one worker (neither leader nor standby) crashes: nothing released
//   failover    the leader crashes: nothing released
//
// Each phase after the cold start lasts `phase_leases` leases, then longer (a lease at a time, up
// to `bound_leases`) until it has settled: one leader that the leader record names, every live
// member following and holding exactly its assignment record of the plan's term, the assignment
// total (min(splits, lanes)), the crashed member's session expired, and no assignment record
// written for `quiet_ms`. A phase that does not settle within its bound is an error, as is any
// violation of the simulator's safety invariants (History checks every write).
//
// The fleet: `members` processes of `lanes` lanes each (max_in_flight) over `splits` splits of
// equal weight; lanes hold their splits and emit nothing (the source is frozen), and give a split
// back at once when the leader revokes it. Scheduling, watch delivery delays (20 us to 2 ms,
// reordered across keys) and clock origins come from the seed; clocks do not drift.
//
// Cost: everything runs on one thread. With fleet-wide watches (targeted = false) every member
// mirrors every lease, session and assignment record, so memory and time grow with
// members x (members + held splits); `max_view_entries` refuses a run whose estimate is above it
// (ProjectionTooLarge) rather than exhausting the machine.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "op_counter.hpp"

namespace etlc::sim {

struct ProjectionParams {
  int members = 100;             // 2 .. kMaxProjectedMembers
  std::size_t splits = 100'000;  // 1 .. kMaxProjectedSplits
  std::uint32_t lanes = 8;       // max_in_flight of every member (1 .. 64)
  bool targeted = false;         // Member::Options::targeted_watches
  std::uint64_t seed = 1;
  std::int64_t lease_ms = 15'000;
  std::int64_t rebalance_delay_ms = 20'000;
  int steady_leases = 3;
  int phase_leases = 6;
  int bound_leases = 40;
  std::int64_t quiet_ms = 10'000;
  // Refuse a run whose fleet-wide views would exceed this many entries (sum over members).
  std::uint64_t max_view_entries = 60'000'000;
  std::uint64_t max_events = 2'000'000'000;  // scheduler events over the whole run
};

inline constexpr int kMaxProjectedMembers = 100'000;
inline constexpr std::size_t kMaxProjectedSplits = 10'000'000;

// Throws std::invalid_argument naming the bad field.
void validate(const ProjectionParams& p);

// Entries the members' views would mirror at the end of the cold start (an estimate, for the
// max_view_entries guard): every held split's lease, every session and assignment record, plus
// the leader's split records.
std::uint64_t estimated_view_entries(const ProjectionParams& p);

// A run refused because its estimated views exceed ProjectionParams::max_view_entries.
class ProjectionTooLarge : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Role : std::uint8_t { leader, standby, worker, crashed };
std::string_view to_string(Role r);

struct MemberPhase {
  std::string id;
  Role role = Role::worker;  // at the end of the phase
  OpCounts ops;              // during the phase
  // At the end of the phase: entries (and key + value bytes) in the scopes of the watches it
  // holds open, and what those watches would take on NATS (docs/nats.md): a prefix watch is one
  // ordered consumer, a key watch one core subscription per key.
  std::uint64_t view_entries = 0, view_bytes = 0;
  std::uint64_t consumers = 0, key_subscriptions = 0;
};

struct PhaseResult {
  std::string name;
  double virtual_s = 0;  // how long the phase ran
  double real_s = 0;
  std::vector<MemberPhase> members;  // every process that existed during the phase
  OpCounts total;
  std::uint64_t assignment_writes = 0;  // assign.* records written (History)
  // The member leading at the end of the phase: its control loop's thread CPU time during the
  // phase, the assignments it computed (etl_coordination_assignment_seconds observations), and
  // the CPU of the steps that computed one (an upper bound per computation: the step's other
  // work is included), with the largest such step.
  double leader_cpu_s = 0;
  std::uint64_t assignments = 0;
  double assign_step_cpu_s = 0;
  double assign_step_cpu_max_s = 0;
  long rss_kb = 0;  // the simulating process's resident set at the end of the phase
};

struct ProjectionResult {
  ProjectionParams params;
  std::vector<PhaseResult> phases;
  double real_s = 0;
  long peak_rss_kb = 0;
};

// Runs the projection. Throws ProjectionTooLarge (refused before anything ran),
// std::invalid_argument (bad parameters), or std::runtime_error naming the phase and why (a
// safety violation, a phase that did not settle in its bound, a member that stopped, the event
// bound).
ProjectionResult run_projection(const ProjectionParams& params);

// Per-phase statistics of one number over the workers alive at the phase's end.
struct Spread {
  std::uint64_t min = 0, median = 0, max = 0;
  std::size_t n = 0;
};
Spread worker_spread(const PhaseResult& phase,
                     const std::function<std::uint64_t(const MemberPhase&)>& get);
// The member with this role at the end of the phase (null if none).
const MemberPhase* member_with(const PhaseResult& phase, Role role);

}  // namespace etlc::sim
