// Internal: desired_assignment split into its passes, so the benchmark can run a reference
// improve pass on exactly the state pass 3 starts from, and tests can inspect exact loads.
// Not part of the public API; may change at any time.
#pragma once

#include <cstdint>
#include <vector>

#include "core/assignment.hpp"

namespace etlc::core::detail {

// Loads are exact: S weights of at most 2^64-1 sum to less than 2^128 for any S < 2^64, so no
// load ever saturates or wraps inside the decision, and every comparison is exact.
__extension__ typedef unsigned __int128 WideLoad;

inline std::uint64_t saturate64(WideLoad x) noexcept {
  constexpr std::uint64_t kMax = ~std::uint64_t{0};
  return x > WideLoad{kMax} ? kMax : static_cast<std::uint64_t>(x);
}

// The admission rule of pass 3: moving a split of `weight` from a member of load `from` to a
// member of load `to` is admitted iff it lowers the heavier member's load, min(weight, from - to -
// weight), by more than `threshold`: weight > threshold and from > to + weight + threshold. With
// threshold 0 that is weight > 0 and from > to + weight, exactly when the move lowers the sum of
// squared loads. Exact: loads and the threshold are below 2^96 (fewer than 2^32 splits of weight
// below 2^64), so the sum cannot wrap.
inline bool improves(WideLoad from, WideLoad to, std::uint64_t weight,
                     WideLoad threshold = 0) noexcept {
  return WideLoad{weight} > threshold && from > to + WideLoad{weight} + threshold;
}

// The working state between passes. Indices are input indices; order-sensitive choices use the
// ranks, which depend only on (seed, id).
struct WorkState {
  const AssignmentInput* in = nullptr;
  std::vector<std::uint32_t> member_rank;    // position of member i in (hash(seed,id), id) order
  std::vector<std::uint32_t> split_rank;     // position of split j in (hash(seed,id), id) order
  std::vector<std::uint32_t> by_split_rank;  // inverse of split_rank
  std::vector<std::uint64_t> weight;         // split -> weight (a dense copy, for locality)
  std::vector<std::int32_t> holder;          // split -> live holder (or kNoMember)
  std::vector<std::uint8_t> stuck;           // split stayed with its holder in pass 1
  std::vector<std::uint8_t> pinned;          // pass 3 never moves it (AssignSplit::pinned)
  std::vector<std::uint8_t> paced;           // has a pace: moved by improve_paced, not Improver
  std::vector<std::int32_t> at;              // split -> member it is placed on (or kNoMember)
  std::vector<WideLoad> load;                // member -> exact sum of placed weights
  std::vector<std::uint32_t> count;          // member -> number of placed splits
  std::uint64_t max_improving_moves = 0;
  WideLoad threshold = 0;  // pass 3's damping threshold (damping_threshold), set by improve()
  std::uint64_t improving_moves = 0;
  bool backstop_bound = false;

  bool has_free_lane(std::size_t m) const { return count[m] < in->members[m].lanes; }
  // Moves split j (placed) to member `to`; keeps load and count consistent.
  void move(std::uint32_t j, std::int32_t to) {
    const std::int32_t from = at[j];
    const std::uint64_t w = weight[j];
    if (from != kNoMember) {
      load[static_cast<std::size_t>(from)] -= w;
      --count[static_cast<std::size_t>(from)];
    }
    if (to != kNoMember) {
      load[static_cast<std::size_t>(to)] += w;
      ++count[static_cast<std::size_t>(to)];
    }
    at[j] = to;
  }
};

// Validation, ranks, pass 1 (sticky) and pass 2 (fill). Throws ConfigError on bad input.
WorkState sticky_and_fill(const AssignmentInput& in);
// Pass 3's damping threshold for the placement after passes 1 and 2 (AssignmentInput::damping_*).
WideLoad damping_threshold(const WorkState& st);
// Pass 3 as desired_assignment runs it: rounds of the free splits' improvement (heaps keyed by
// load, O(log M + log k) per move) and the paced splits' (improve_paced), until neither moves.
void improve(WorkState& st);
// The paced splits' part of pass 3 (assignment_pace.cpp): each admitted move of a split under way
// to the lightest member with a free lane whose pace admits it. Returns the moves made.
std::uint64_t improve_paced(WorkState& st);
// The output (by_member sorted by id, loads, stats) of a finished state.
Assignment finish(const WorkState& st);

}  // namespace etlc::core::detail
