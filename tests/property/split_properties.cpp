// Properties of the split decision (core/split_rules.hpp) over generated candidates: none while
// anything is queued or no lane is free, never more than the free lanes and the caps allow, never
// a residual below the minimum, the latest finishers first, and the same answer in any order.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/split_rules.hpp"

namespace etlc::core {
namespace {

struct Case {
  std::vector<SplitCandidate> candidates;
  std::uint64_t free_lanes = 0;
  std::uint64_t queued = 0;
  SplitLimits limits;
};

rc::Gen<Case> gen_case() {
  return rc::gen::exec([] {
    Case k;
    const auto n = *rc::gen::inRange<std::size_t>(0, 20);
    for (std::size_t i = 0; i < n; ++i) {
      SplitCandidate c;
      c.id = "s" + std::to_string(i);
      c.remaining = *rc::gen::element<std::uint64_t>(0, 19, 20, 21, 100, 1000, 1000, 5000, ~0ull);
      if (*rc::gen::arbitrary<bool>()) c.pace = *rc::gen::element<std::uint64_t>(0, 1, 7, 1000);
      c.children = *rc::gen::inRange<std::uint32_t>(0, 5);
      c.requested = *rc::gen::inRange(0, 12) == 0;
      k.candidates.push_back(std::move(c));
    }
    k.free_lanes = *rc::gen::inRange<std::uint64_t>(0, 12);
    k.queued = *rc::gen::element<std::uint64_t>(0, 0, 0, 0, 3);
    k.limits.min_residual_weight = *rc::gen::element<std::uint64_t>(1, 10, 500);
    k.limits.max_children_per_split = *rc::gen::element<std::uint32_t>(0, 1, 3, 5, 5);
    k.limits.max_dynamic_splits = *rc::gen::inRange<std::uint64_t>(0, 40);
    k.limits.dynamic_splits_so_far = *rc::gen::inRange<std::uint64_t>(0, 12);
    return k;
  });
}

// remaining / pace as an exact comparison key: +inf for a stalled split, none for unknown.
bool later_or_equal(const SplitCandidate& a, const SplitCandidate& b) {
  __extension__ typedef unsigned __int128 Wide;
  if (a.pace.has_value() != b.pace.has_value()) return a.pace.has_value();
  if (!a.pace) return a.remaining >= b.remaining;
  return Wide{a.remaining} * *b.pace >= Wide{b.remaining} * *a.pace;
}

RC_GTEST_PROP(SplitRules, requests_respect_the_lanes_the_caps_and_the_minimum, ()) {
  const Case k = *gen_case();
  const auto out = split_requests(k.candidates, k.free_lanes, k.queued, k.limits);
  std::map<std::string, const SplitCandidate*> by_id;
  std::uint64_t outstanding = 0;
  for (const auto& c : k.candidates) {
    by_id[c.id] = &c;
    outstanding += c.requested ? 1 : 0;
  }
  if (k.queued > 0 || k.free_lanes == 0) RC_ASSERT(out.empty());
  RC_ASSERT(out.size() + outstanding <= std::max(k.free_lanes, outstanding));
  RC_ASSERT(k.limits.dynamic_splits_so_far + outstanding + out.size() <=
            std::max(k.limits.max_dynamic_splits, k.limits.dynamic_splits_so_far + outstanding));
  std::map<std::string, int> seen;
  for (const auto& r : out) {
    RC_ASSERT(++seen[r.id] == 1);
    const SplitCandidate& c = *by_id.at(r.id);
    RC_ASSERT(!c.requested);
    RC_ASSERT(c.children < k.limits.max_children_per_split);
    RC_ASSERT(c.remaining / 2 >= k.limits.min_residual_weight);  // both halves meet the minimum
    RC_ASSERT(r.fraction_ppm > 0u && r.fraction_ppm < 1'000'000u);
  }
  RC_TAG(out.empty() ? "no request" : out.size() == 1 ? "one request" : "several requests");
}

// Maximal and ordered: if a lane and the caps are left, every splittable candidate was asked;
// and no splittable candidate left out finishes later than one asked.
RC_GTEST_PROP(SplitRules, the_latest_finishers_are_asked_and_as_many_as_fit, ()) {
  const Case k = *gen_case();
  RC_PRE(k.queued == 0u);
  const auto out = split_requests(k.candidates, k.free_lanes, k.queued, k.limits);
  std::map<std::string, bool> asked;
  for (const auto& r : out) asked[r.id] = true;
  std::size_t eligible = 0;
  for (const auto& c : k.candidates) eligible += splittable(c, k.limits) ? 1 : 0;
  std::uint64_t outstanding = 0;
  for (const auto& c : k.candidates) outstanding += c.requested ? 1 : 0;
  const std::uint64_t lanes = k.free_lanes > outstanding ? k.free_lanes - outstanding : 0;
  const std::uint64_t used = k.limits.dynamic_splits_so_far + outstanding;
  const std::uint64_t cap =
      k.limits.max_dynamic_splits > used ? k.limits.max_dynamic_splits - used : 0;
  RC_ASSERT(out.size() == std::min<std::uint64_t>({lanes, cap, eligible}));
  for (const auto& left : k.candidates) {
    if (!splittable(left, k.limits) || asked.count(left.id)) continue;
    for (const auto& r : out) {
      const auto it = std::find_if(k.candidates.begin(), k.candidates.end(),
                                   [&](const SplitCandidate& c) { return c.id == r.id; });
      RC_ASSERT(later_or_equal(*it, left));
    }
  }
}

RC_GTEST_PROP(SplitRules, the_answer_does_not_depend_on_the_order, ()) {
  Case k = *gen_case();
  const auto a = split_requests(k.candidates, k.free_lanes, k.queued, k.limits);
  std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
  std::shuffle(k.candidates.begin(), k.candidates.end(), rng);
  RC_ASSERT(split_requests(k.candidates, k.free_lanes, k.queued, k.limits) == a);
}

}  // namespace
}  // namespace etlc::core
