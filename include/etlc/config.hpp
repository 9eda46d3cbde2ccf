// Configuration of one member (one Coordinator). Validated at construction: every rule that is
// broken is named in the ConfigError message.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace etlc {

inline constexpr std::uint32_t kMaxLanes = 1024;

struct CoordinatorConfig {
  // Stable identity of this member. Give each replica a stable id (a pod name) so a restart
  // reclaims its own splits at once; empty = a random id per process. At most 256 bytes UTF-8.
  std::string instance_id;

  // A member that has not renewed its session for this long is expired by its peers; its
  // splits then move (after rebalance_delay). Renewals run every lease_duration / 3.
  std::chrono::milliseconds lease_duration{15'000};

  // Lane budget: the most splits this member holds at once. Advertised to the leader, which
  // balances against each member's own budget. 1..kMaxLanes.
  std::uint32_t max_in_flight = 8;

  // How long a departed member's splits are withheld so that a quick restart reclaims them and
  // nothing moves. 0 = reassign immediately (a supported setting, its own code path).
  std::chrono::milliseconds rebalance_delay{20'000};

  // How long a revoked split may drain cooperatively before the release is forced. May exceed
  // lease_duration; must be at least op_timeout.
  std::chrono::milliseconds drain_deadline{10'000};

  // The longest one store operation is expected to take. lease_duration >= 3 * op_timeout. It is
  // also the safety margin: a member that could not renew within lease_duration - op_timeout of
  // its last successful renewal stops its lanes itself.
  std::chrono::milliseconds op_timeout{2'000};

  // Non-graceful ends (crash, takeover, fail()) a split may suffer before it is quarantined.
  std::uint32_t max_attempts = 4;

  // How often the leader re-runs the planner of an open plan. Ignored for final plans.
  std::chrono::milliseconds replan_interval{60'000};

  // The leader recomputes the assignment at most this often while events keep arriving
  // (bursts are coalesced). 0 = after every burst.
  std::chrono::milliseconds assignment_interval{50};

  // Balancing on the work that remains (docs/work-assignment.md). When a split's commits report
  // SplitProgress::done, the leader weighs it by what remains (weight - done) instead of its
  // planned weight, and never moves a split for balance once what remains is at most
  // pin_remaining_ppm / 10^6 of its weight (it still moves if its holder leaves or is cordoned).
  // Off: planned weights, nothing pinned (the rule before this option existed).
  bool balance_on_remaining_work = true;
  std::uint32_t pin_remaining_ppm = 100'000;  // 0..10^6; 10 %: splits 90 % done stay put

  // The pace rule (with balance_on_remaining_work; docs/work-assignment.md, "Pace"). A split
  // under way is read by one lane, so moving it for balance helps only if its new lane reads
  // faster. The leader measures each split's pace (its done per 1000 s) and what each member's
  // lanes read at each load it had (the median of its splits' paces), and moves a split under way
  // only to a member whose lanes read, at the load the move would give it, at least (10^6 +
  // pace_gain_ppm) / 10^6 times its pace, or one not measured yet (a newcomer). A fleet whose lanes
  // read at one pace moves nothing under way for balance; one whose members slow down with load
  // still does. 0 .. 10^7.
  bool balance_by_pace = true;
  std::uint32_t pace_gain_ppm = 500'000;  // 50 %: see docs/performance.md ("The tail of a job")

  // Dynamic splitting (docs/work-assignment.md, "Splitting a split under way"). When lanes in the
  // fleet are free and nothing is queued, the leader asks the owners of the splits that would end
  // last to cut them (Lane::split), and the residuals go to the free lanes. A source whose lanes
  // cannot split declines and nothing changes. A request not answered within
  // split_request_timeout is taken as declined, and not repeated in that tenancy. Bounds: no
  // residual (nor what its parent keeps) below min_residual_weight (0: 1/8 of the job's mean
  // planned split weight, at least 1), at most max_children_per_split residuals cut from one
  // split (1..64) and max_dynamic_splits in the job. Off by default: members of an older release
  // cannot read residuals' records nor assignment records carrying requests, so turn it on once
  // every member of the job runs this release or later.
  bool dynamic_splitting = false;
  std::uint64_t min_residual_weight = 0;
  std::uint32_t max_children_per_split = 16;
  std::uint64_t max_dynamic_splits = 1024;
  std::chrono::milliseconds split_request_timeout{10'000};

  // A split moved for balance is not moved for balance again within this of its new holder
  // claiming it (it still moves if its holder leaves or is cordoned): loads that shift with
  // progress cannot make a split chase them from member to member. Until the claim it may be sent
  // elsewhere (in transit, nobody reads it). 0 = no cooldown. 0 .. 1 h.
  std::chrono::milliseconds rebalance_cooldown{30'000};

  // Damping of balance moves: a split moves for balance only when that lowers the heavier
  // member's load by more than max(damping_weight, damping_ppm_of_mean / 10^6 x the mean load),
  // in the weight's units. Keeps a fleet whose loads shift with every commit from chasing each
  // shift. damping_ppm_of_mean 0..10^6.
  std::uint64_t damping_weight = 0;
  std::uint32_t damping_ppm_of_mean = 0;  // off: see docs/performance.md ("The tail of a job")

  // How often, at most, progress alone (commits reporting `done`) makes the leader recompute
  // the assignment and publish the job's progress (job.progress: the weight planned, done and
  // remaining, and the recent rate, that `etlc status` shows). Membership and status changes
  // still recompute within assignment_interval. 10 ms .. 1 h; below assignment_interval it acts as
  // assignment_interval.
  std::chrono::milliseconds progress_interval{1'000};

  // Bulk store writes (seeding a plan) the leader issues per control-loop step, so session
  // renewal is never queued behind bulk work. 1..100000.
  std::uint32_t bulk_ops_per_step = 512;

  // Consecutive planner failures (plan() threw, or returned an invalid plan) after which the
  // leader gives up: the job ends `failed` in its plan record with the planner's last message,
  // and every member reports Stalled{message}. Retries back off from 200 ms to 30 s, so the
  // default gives up after about 80 s of failures. `etlc resume` clears the verdict and the
  // leader plans again. 1..1000.
  std::uint32_t max_planner_failures = 10;

  // Coordinator::start() retries joining while the store is unreachable (StoreError
  // unavailable), with capped backoff and one warning per attempt, for at most this long: a
  // member started before its store (Kubernetes, systemd) joins when the store comes up instead
  // of failing at once. 0 = one attempt. 0 .. 1 h.
  std::chrono::milliseconds startup_wait{60'000};

  // Throws ConfigError naming the broken rule.
  void validate() const;
};

}  // namespace etlc
