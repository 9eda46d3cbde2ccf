// desired_assignment: the leader's pure, deterministic, sticky, weight-balanced decision of which
// live member should hold which split. Normative description: docs/work-assignment.md.
//
// The function is pure: no I/O, no clock, no threads, no global state. It is safe to call from
// any thread on distinct inputs. Given the same SET of (members, budgets, splits, weights,
// ownership, reserved flags, seed) it returns the same assignment, whatever the order of the
// input vectors: everything order-sensitive is keyed by ids and by stable_hash64(seed, id).
//
// The three passes (see docs/work-assignment.md for the invariants and their tests):
//   1. sticky  — a split stays with its holder (previous assignee, else lease owner, else record
//                owner) if that member has a lane left; a move costs a drain.
//   2. fill    — unplaced splits, heaviest first, go to the least-loaded member with a free lane.
//   3. improve — while a split of positive weight, not pinned, can move from `from` to a member
//                `to` with a free lane such that load(from) > load(to) + weight + threshold and
//                weight > threshold (undamped, threshold 0: exactly the moves that lower the sum
//                of squared loads), move one; stop at a (damped) local optimum. A split under
//                way (one with a pace) is admitted only to a member whose lanes read faster by
//                pace_gain_ppm, or whose pace is unknown (the pace rule, core/lane_pace.hpp).
// Splits beyond the fleet's lane budget stay unassigned: they are the queue.
//
// Cost: O((S + moves) · log M) time and O(S + M) memory for S splits and M members (plus the
// per-member sort of the output by split id, O(S log(S/M)) string comparisons). With U splits
// under way, pass 3 runs in rounds of O(S + U log U + M log M), each but the last moving at least
// one split (docs/work-assignment.md, "Complexity").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/stable_hash.hpp"
#include "etlc/errors.hpp"

namespace etlc::core {

inline constexpr std::int32_t kNoMember = -1;
inline constexpr std::uint32_t kMaxPaceGainPpm = 10'000'000;  // AssignmentInput::pace_gain_ppm

// A live member and its lane budget (its advertised max_in_flight). 0 lanes = cordoned: it is
// given nothing, and its current splits move elsewhere.
struct AssignMember {
  std::string id;  // unique among members
  std::uint32_t lanes = 0;
  // How fast its lanes read, in weight per 1000 s (the pace rule); nullopt = unknown (a newcomer:
  // it admits any split).
  std::optional<std::uint64_t> lane_pace = std::nullopt;
};

// One split the leader may assign. The ownership fields are indices into AssignmentInput::members
// (kNoMember if that member is not live or there is none). Reserved (withheld by the rebalance
// delay) splits are assigned to nobody, whatever their ownership.
struct AssignSplit {
  std::string id;                         // unique among splits
  std::uint64_t weight = 0;               // planner weight (bytes); any value up to 2^64-1
  std::int32_t previous = kNoMember;      // the previously published assignee, if live
  std::int32_t lease_owner = kNoMember;   // the live member holding the split's lease, if any
  std::int32_t record_owner = kNoMember;  // the live member the durable record names owner, if any
  bool reserved = false;                  // withheld by the rebalance delay: assign to nobody
  // Statistics only (never changes the decision): the split's previous holder departed, so if it
  // is placed now it counts as reassigned_after_departure rather than placed_from_queue.
  bool holder_departed = false;
  // Pass 3 never moves a pinned split (the caller pins splits nearly done: a move would cost a
  // drain to move little work). Passes 1 and 2 treat it as any other: it stays with a live holder
  // that has a lane for it, and is placed afresh when its holder is gone.
  bool pinned = false;
  // A split under way and how fast its lane reads it (weight per 1000 s). Pass 3 moves it only to
  // a member whose lane_pace is unknown or at least (10^6 + pace_gain_ppm) / 10^6 times this:
  // elsewhere it would read no faster, and the move would cost a drain for nothing. nullopt = no
  // pace rule for it (not started, or its pace not known yet).
  std::optional<std::uint64_t> pace = std::nullopt;
};

// The default termination backstop of pass 3 (see AssignmentInput::max_improving_moves):
// kImproveMovesPerSplit moves per split plus kImproveMovesFloor. Pass 3 provably terminates
// without it (each move strictly lowers a potential); the backstop only bounds the leader's CPU
// on a pathological input. When it binds, AssignmentStats::backstop_bound says so.
inline constexpr std::uint64_t kImproveMovesPerSplit = 64;
inline constexpr std::uint64_t kImproveMovesFloor = 4096;
std::uint64_t default_max_improving_moves(std::size_t split_count) noexcept;

struct AssignmentInput {
  std::vector<AssignMember> members;
  std::vector<AssignSplit> splits;
  std::uint64_t seed = 0;  // the job's fingerprint hash — never the leader's identity
  // Backstop on pass 3's moves; nullopt = default_max_improving_moves(splits.size()). Tests set
  // small values to watch it bind.
  std::optional<std::uint64_t> max_improving_moves;
  // Damping of pass 3 (docs/work-assignment.md): a move must lower the heavier member's load by
  // more than the threshold, max(damping_weight, damping_ppm_of_mean * mean load / 10^6), where
  // the mean is the placed weight over the members with lanes. 0 and 0: undamped (every move
  // that lowers the sum of squared loads). damping_ppm_of_mean above 10^6 is a ConfigError.
  std::uint64_t damping_weight = 0;
  std::uint32_t damping_ppm_of_mean = 0;
  // The pace rule's margin (AssignSplit::pace): 0..10^7, above is a ConfigError.
  std::uint32_t pace_gain_ppm = 0;
};

// Why the result differs from the current placement. "Holder" is the member a split is with now
// (previous assignee, else lease owner, else record owner). Every non-reserved split is counted in
// exactly one of: kept, moved_to_newcomer, moved_for_improvement, moved_over_budget,
// queued_over_budget, reassigned_after_departure, placed_from_queue, still_queued.
struct AssignmentStats {
  std::uint64_t assigned = 0;  // splits named in some member's assignment
  std::uint64_t queued = 0;    // claimable splits left unassigned: every lane in the fleet is full
  std::uint64_t reserved = 0;  // splits withheld by the rebalance delay (assigned to nobody)

  std::uint64_t kept = 0;                   // stayed with their live holder
  std::uint64_t moved_to_newcomer = 0;      // pass 3 moved it to a member that held nothing
  std::uint64_t moved_for_improvement = 0;  // pass 3 moved it to another member for balance
  std::uint64_t moved_over_budget = 0;   // its holder has no lane left for it (budget cut, cordon)
  std::uint64_t queued_over_budget = 0;  // same, and no lane anywhere: back to the queue
  std::uint64_t reassigned_after_departure = 0;  // no live holder; its holder departed
  std::uint64_t placed_from_queue = 0;           // no live holder: new split or queue drained
  std::uint64_t still_queued = 0;                // no live holder, and still no lane for it

  std::uint64_t damping_threshold = 0;    // the threshold pass 3 applied (saturated at 2^64-1)
  std::uint64_t improving_moves = 0;      // moves pass 3 made (one split may move more than once)
  std::uint64_t max_improving_moves = 0;  // the backstop that was in force
  bool backstop_bound = false;  // pass 3 stopped at the backstop with an improving move left:
                                // the result is NOT locally optimal (invariant 4 broken)

  // Splits taken away from a live holder: each costs that holder a drain.
  std::uint64_t drains() const noexcept {
    return moved_to_newcomer + moved_for_improvement + moved_over_budget + queued_over_budget;
  }
  // Splits whose published assignee changes (drains plus placements of unheld splits).
  std::uint64_t changed() const noexcept {
    return drains() + reassigned_after_departure + placed_from_queue;
  }
  friend bool operator==(const AssignmentStats&, const AssignmentStats&) = default;
};

struct Assignment {
  // by_member[i] = indices into input.splits assigned to input.members[i], sorted by split id.
  std::vector<std::vector<std::uint32_t>> by_member;
  // load_by_member[i] = sum of the weights of by_member[i], saturated at 2^64-1 (for metrics; the
  // decision itself uses exact 128-bit loads).
  std::vector<std::uint64_t> load_by_member;
  AssignmentStats stats;
};

// The desired assignment. Throws ConfigError if member ids or split ids are not unique, or an
// ownership index is neither kNoMember nor a valid member index. Never throws on weights (every
// value up to 2^64-1 is handled exactly) or on empty fleets/plans.
Assignment desired_assignment(const AssignmentInput& in);

}  // namespace etlc::core
