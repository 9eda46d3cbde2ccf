// The straightforward reference of the spec's improve pass, for comparison only: each step scans
// every (member, member, split) triple for the globally best admitted move (the largest drop of
// the sum of squared loads), makes it, and repeats — at most 4,096 moves. O(S · M) per move.
#pragma once

#include <chrono>
#include <cstdint>

#include "core/assignment_passes.hpp"

namespace etlc::bench {

inline constexpr std::uint64_t kReferenceMaxMoves = 4096;

struct ReferenceOutcome {
  bool finished = true;    // false: the deadline passed mid-way (the state is partial)
  bool cap_bound = false;  // stopped at kReferenceMaxMoves with an admitted move left
  std::uint64_t moves = 0;
};

// Runs on a state fresh from core::detail::sticky_and_fill (and updates st.improving_moves and
// st.backstop_bound the way core::detail::improve does).
ReferenceOutcome reference_improve(core::detail::WorkState& st,
                                   std::chrono::steady_clock::time_point deadline);

}  // namespace etlc::bench
