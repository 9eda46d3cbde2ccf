#include "core/split_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "etlc/errors.hpp"

namespace etlc::core {

namespace {

__extension__ typedef unsigned __int128 Wide;

// Orders candidates by expected finish, latest first. remaining / pace compared exactly as
// a.remaining * b.pace vs b.remaining * a.pace.
bool finishes_later(const SplitCandidate& a, const SplitCandidate& b) {
  if (a.pace.has_value() != b.pace.has_value()) return a.pace.has_value();
  if (a.pace) {
    const Wide left = Wide{a.remaining} * *b.pace;
    const Wide right = Wide{b.remaining} * *a.pace;
    if (left != right) return left > right;
    if (*a.pace != *b.pace) return *a.pace < *b.pace;  // the same finish: the slower first
  } else if (a.remaining != b.remaining) {
    return a.remaining > b.remaining;
  }
  return a.id < b.id;
}

std::uint64_t saturating_sub(std::uint64_t a, std::uint64_t b) {
  return a > b ? a - b : 0;
}

}  // namespace

bool splittable(const SplitCandidate& c, const SplitLimits& limits) noexcept {
  return !c.requested && c.children < limits.max_children_per_split &&
         Wide{c.remaining} >= Wide{limits.min_residual_weight} * 2;
}

std::vector<SplitRequest> split_requests(std::span<const SplitCandidate> candidates,
                                         std::uint64_t free_lanes, std::uint64_t queued,
                                         const SplitLimits& limits) {
  if (limits.min_residual_weight == 0) {
    throw ConfigError("split_requests: min_residual_weight must be at least 1");
  }
  std::set<std::string_view> ids;
  std::uint64_t outstanding = 0;
  for (const SplitCandidate& c : candidates) {
    if (!ids.insert(c.id).second) {
      throw ConfigError(fmt::format("split_requests: candidate '{}' appears twice", c.id));
    }
    outstanding += c.requested ? 1 : 0;
  }
  if (queued > 0 || free_lanes == 0) return {};
  // Each outstanding request's residual will take a free lane, and counts against the job's cap.
  const std::uint64_t budget = std::min(
      saturating_sub(free_lanes, outstanding),
      saturating_sub(limits.max_dynamic_splits, limits.dynamic_splits_so_far + outstanding));
  if (budget == 0) return {};
  std::vector<const SplitCandidate*> eligible;
  for (const SplitCandidate& c : candidates) {
    if (splittable(c, limits)) eligible.push_back(&c);
  }
  const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(budget, eligible.size()));
  std::partial_sort(
      eligible.begin(), eligible.begin() + static_cast<std::ptrdiff_t>(n), eligible.end(),
      [](const SplitCandidate* a, const SplitCandidate* b) { return finishes_later(*a, *b); });
  std::vector<SplitRequest> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(SplitRequest{eligible[i]->id});
  return out;
}

}  // namespace etlc::core
