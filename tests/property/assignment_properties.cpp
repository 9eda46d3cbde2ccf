// The five invariants of docs/work-assignment.md, as RapidCheck properties, and the one the
// leader's publish rule relies on. The test names are normative: the page names them, so a
// deleted or renamed test is a visible divergence.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "core/assignment.hpp"
#include "core/lane_pace.hpp"
#include "property/assignment_checks.hpp"
#include "property/assignment_gen.hpp"

namespace etlc::core {
namespace {

using test::gen_assignment_input;

// Invariant 1: the same set of inputs yields the same assignment, whatever the input order.
RC_GTEST_PROP(Assignment, assignment_is_deterministic, ()) {
  const AssignmentInput in = *gen_assignment_input();
  const Assignment a = desired_assignment(in);
  const Assignment b = desired_assignment(in);
  RC_ASSERT(a.by_member == b.by_member);
  RC_ASSERT(a.stats == b.stats);

  const AssignmentInput reordered = test::shuffled(in, *rc::gen::arbitrary<std::uint64_t>());
  const Assignment c = desired_assignment(reordered);
  RC_ASSERT(test::published(in, a) == test::published(reordered, c));
  RC_ASSERT(a.stats == c.stats);
}

// Invariant 2: no split is named twice; nothing reserved is named; no member exceeds its lanes.
RC_GTEST_PROP(Assignment, no_split_is_assigned_twice, ()) {
  const AssignmentInput in = *gen_assignment_input();
  const Assignment out = desired_assignment(in);
  const auto violation = test::structural_violation(in, out);
  RC_ASSERT(!violation.has_value());
  std::uint64_t named = 0;
  for (const auto& list : out.by_member) named += list.size();
  RC_ASSERT(named == out.stats.assigned);
}

// Invariant 3: the output fed back as ownership and as the previous assignment is a fixpoint,
// and the second computation moves nothing.
RC_GTEST_PROP(Assignment, assignment_is_stable_under_unchanged_input, ()) {
  const AssignmentInput in = *gen_assignment_input();
  const Assignment first = desired_assignment(in);
  RC_PRE(!first.stats.backstop_bound);  // never under the default backstop (invariant 4)
  const AssignmentInput again = test::fed_back(in, first);
  const Assignment second = desired_assignment(again);
  RC_ASSERT(second.by_member == first.by_member);
  RC_ASSERT(second.stats.improving_moves == 0u);
  RC_ASSERT(second.stats.drains() == 0u);
  RC_ASSERT(second.stats.kept == first.stats.assigned);
}

// Invariant 4: no single split that is not pinned can move to a member with a free lane that the
// pace rule admits (a split under way only to a lane faster by the gain, or of unknown pace) and
// lower the heavier member's load by more than the damping threshold t (weight > t and load(from) >
// load(to) + weight + t; undamped, t = 0: no move lowers the sum of squared loads) — checked by
// brute force over every (split, target) pair. The default backstop must never bind; a small
// random backstop must be reported exactly when it leaves an improving move behind.
RC_GTEST_PROP(Assignment, assignment_admits_no_improving_move, ()) {
  AssignmentInput in = *gen_assignment_input();
  const Assignment out = desired_assignment(in);
  // Shows, in RapidCheck's report, that the generated inputs do exercise pass 3.
  RC_TAG(out.stats.improving_moves == 0   ? "no improving move needed"
         : out.stats.improving_moves < 10 ? "1-9 improving moves"
                                          : "10+ improving moves");
  RC_TAG(in.damping_weight == 0 && in.damping_ppm_of_mean == 0 ? "undamped" : "damped");
  RC_TAG(std::any_of(in.splits.begin(), in.splits.end(), [](const auto& s) { return s.pace; })
             ? "splits under way"
             : "no pace rule");
  RC_ASSERT(!out.stats.backstop_bound);
  const auto move = test::improving_move(in, out);
  RC_ASSERT(!move.has_value());
  const test::ExactLoad threshold = test::damping_threshold(in, out);
  RC_ASSERT(test::ExactLoad{out.stats.damping_threshold} ==
            std::min(threshold, test::ExactLoad{~std::uint64_t{0}}));

  in.max_improving_moves = *rc::gen::inRange<std::uint64_t>(0, 8);
  const Assignment capped = desired_assignment(in);
  RC_ASSERT(capped.stats.max_improving_moves == *in.max_improving_moves);
  RC_ASSERT(capped.stats.improving_moves <= *in.max_improving_moves);
  RC_ASSERT(capped.stats.backstop_bound == test::improving_move(in, capped).has_value());
  RC_ASSERT(!test::structural_violation(in, capped).has_value());
}

// Invariant 5: every claimable (non-reserved) split is assigned unless every lane is full.
RC_GTEST_PROP(Assignment, assignment_is_total_over_the_claimable_pool, ()) {
  const AssignmentInput in = *gen_assignment_input();
  const Assignment out = desired_assignment(in);
  const auto violation = test::totality_violation(in, out);
  RC_ASSERT(!violation.has_value());
  std::uint64_t reserved = 0;
  for (const auto& s : in.splits) reserved += s.reserved ? 1 : 0;
  RC_ASSERT(out.stats.reserved == reserved);
  RC_ASSERT(out.stats.assigned + out.stats.queued + reserved == in.splits.size());
  // Every non-reserved split is in exactly one stats category.
  const auto& st = out.stats;
  RC_ASSERT(st.kept + st.changed() + st.still_queued + reserved == in.splits.size());
}

// What the leader's publish rule relies on (publish.cpp, "When to recompute"): once a computation
// left splits queued (every lane full) and its result is published (the previous assignment),
// new splits that nobody holds, of any weight, change nothing, so the leader need not recompute
// for them while it seeds. The counter-check (a free lane takes a new split) is in
// assignment_test.cpp.
RC_GTEST_PROP(Assignment, new_unheld_splits_change_nothing_once_every_lane_is_full, ()) {
  const AssignmentInput in = *gen_assignment_input();
  const Assignment first = desired_assignment(in);
  RC_PRE(first.stats.queued > 0u && !first.stats.backstop_bound);
  AssignmentInput published = in;  // ownership as it was; the previous assignment is `first`
  for (auto& s : published.splits) s.previous = kNoMember;
  for (std::size_t m = 0; m < first.by_member.size(); ++m) {
    for (std::uint32_t j : first.by_member[m]) {
      published.splits[j].previous = static_cast<std::int32_t>(m);
    }
  }
  const Assignment base = desired_assignment(published);
  AssignmentInput grown = published;
  const auto added = *rc::gen::inRange<std::uint32_t>(1, 60);
  const int profile = *test::uniform(0, 5);
  for (std::uint32_t k = 0; k < added; ++k) {
    AssignSplit s;
    s.id = "new-" + std::to_string(k);  // generated ids are "s<number>": no clash
    s.weight = *test::gen_weight(profile);
    grown.splits.push_back(std::move(s));
  }
  const Assignment out = desired_assignment(grown);
  RC_ASSERT(test::published(published, base) == test::published(grown, out));
  RC_ASSERT(out.stats.queued == base.stats.queued + added);
}

// Pass 3 never moves a pinned split: wherever passes 1 and 2 put it (the same input with pass 3
// off), it stays.
RC_GTEST_PROP(Assignment, pass_3_never_moves_a_pinned_split, ()) {
  AssignmentInput in = *gen_assignment_input();
  const Assignment out = desired_assignment(in);
  RC_PRE(!out.stats.backstop_bound);
  in.max_improving_moves = 0;
  const Assignment placed = desired_assignment(in);
  const auto where = [&](const Assignment& a) {
    std::vector<std::int32_t> at(in.splits.size(), kNoMember);
    for (std::size_t m = 0; m < a.by_member.size(); ++m) {
      for (std::uint32_t j : a.by_member[m]) at[j] = static_cast<std::int32_t>(m);
    }
    return at;
  };
  const auto before = where(placed), after = where(out);
  std::size_t pinned = 0;
  for (std::size_t j = 0; j < in.splits.size(); ++j) {
    if (!in.splits[j].pinned) continue;
    ++pinned;
    RC_ASSERT(after[j] == before[j]);
  }
  RC_TAG(pinned == 0 ? "no pinned split" : "pinned splits");
  RC_TAG(out.stats.improving_moves == 0 ? "pass 3 idle" : "pass 3 moved");
}

// The pace rule: a split under way that pass 3 moved (it sits elsewhere than passes 1 and 2 put
// it) went to a member whose lanes read it faster by the gain, or whose pace is unknown.
RC_GTEST_PROP(Assignment, a_split_under_way_moves_only_to_a_faster_lane, ()) {
  AssignmentInput in = *gen_assignment_input();
  const Assignment out = desired_assignment(in);
  in.max_improving_moves = 0;
  const Assignment placed = desired_assignment(in);
  std::vector<std::int32_t> before(in.splits.size(), kNoMember);
  for (std::size_t m = 0; m < placed.by_member.size(); ++m) {
    for (std::uint32_t j : placed.by_member[m]) before[j] = static_cast<std::int32_t>(m);
  }
  std::size_t moved = 0;
  for (std::size_t m = 0; m < out.by_member.size(); ++m) {
    for (std::uint32_t j : out.by_member[m]) {
      if (!in.splits[j].pace || before[j] == static_cast<std::int32_t>(m)) continue;
      ++moved;
      RC_ASSERT(pace_admits(in.splits[j].pace, in.members[m].lane_pace, in.pace_gain_ppm));
    }
  }
  RC_TAG(moved == 0 ? "no split under way moved" : "splits under way moved");
}

// Progress alone (weights only going down, as remaining work does) on a settled fleet moves
// nothing unless some single move would then lower a load by more than the damping threshold.
RC_GTEST_PROP(Assignment, progress_that_no_move_gains_by_moves_nothing, ()) {
  const AssignmentInput in = *gen_assignment_input();
  const Assignment first = desired_assignment(in);
  RC_PRE(!first.stats.backstop_bound);
  AssignmentInput progressed = test::fed_back(in, first);
  for (auto& s : progressed.splits) {
    if (*test::uniform(0, 2) == 0) s.weight = *rc::gen::inRange<std::uint64_t>(0, s.weight / 2 + 1);
  }
  const auto admitted = test::improving_move(progressed, first);  // the placement as it stands
  RC_TAG(admitted ? "a move now gains more than the threshold" : "no move gains enough");
  const Assignment second = desired_assignment(progressed);
  if (!admitted) {
    RC_ASSERT(second.by_member == first.by_member);
    RC_ASSERT(second.stats.drains() == 0u);
  } else {
    RC_ASSERT(!test::improving_move(progressed, second).has_value());
  }
}

}  // namespace
}  // namespace etlc::core
