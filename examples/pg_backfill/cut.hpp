// Cutting a lane's id range under way (dynamic splitting, Lane::split), and the progress state
// that carries the cut to the lane's next owner. Pure, no database.
//
// A lane's progress state is the last id written and, once a cut shrank the range, its new last
// id `hi` (inclusive, like a descriptor's), so that a lane resumed from it stops at the cut:
//
//   ""                 nothing written, range as planned
//   "<last>"           the last id written, range as planned (the only form before splitting)
//   "<last> hi=<hi>"   the last id written, range cut to end at hi
//   "hi=<hi>"          nothing written, range cut to end at hi
//
// The residual is an ordinary descriptor "lo hi" (plan.hpp) over [cut, old hi].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pgb {

struct LaneState {
  std::optional<std::int64_t> last;  // the last id written
  std::optional<std::int64_t> hi;    // the range's last id, once cut
  friend bool operator==(const LaneState&, const LaneState&) = default;
};

std::string encode_state(const LaneState& state);
// nullopt for anything but the four forms above.
std::optional<LaneState> decode_state(std::string_view state);

// The residual's first id when the ids first..last (the lowest and highest left to read) are cut
// so that at least `keep` of them, counted by key, stay before the cut: the earliest such cut that
// still leaves the residual an id. nullopt when there is none (fewer than 2 ids, `keep` too near
// 1 for the span) or `keep` is not in (0, 1).
std::optional<std::int64_t> cut_point(std::int64_t first, std::int64_t last, double keep);

// The residual's estimated rows: `remaining` rows spread evenly over the keys first..last, the
// share at or after `cut` (first < cut <= last). At least 1 (the residual holds the row at `last`)
// and, when there are 2 or more, less than `remaining` (the parent holds the row at `first`).
std::uint64_t residual_rows(std::uint64_t remaining, std::int64_t first, std::int64_t last,
                            std::int64_t cut);

}  // namespace pgb
