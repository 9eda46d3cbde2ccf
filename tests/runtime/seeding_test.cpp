// Seeding and the assignment (publish.cpp, "When to recompute"): new unheld splits recompute the
// assignment at once while a lane is free, then only when the split set doubled, so seeding a
// plan costs O(log n) computations once the fleet's lanes are full, not one per slice.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

// Assignment computations of `instance` so far (one observation of the existing histogram each).
std::uint64_t computations(Fleet& fleet, const std::string& instance) {
  const auto snap = fleet.metrics->snapshot();
  const HistogramSnapshot* h =
      snap.histogram("etl_coordination_assignment_seconds", {{"instance", instance}});
  return h == nullptr ? 0 : h->count;
}

std::size_t published_total(Node& leader) {
  std::size_t n = 0;
  for (const auto& [member, splits] : leader.member().published_assignment()) n += splits.size();
  return n;
}

bool plan_published(Fleet& fleet) {
  auto plan = fleet.plan_record();
  return plan && plan->planned;
}

TEST(SeedPublish, once_every_lane_is_full_seeding_computes_the_assignment_O_log_n_times) {
  constexpr std::size_t kSplits = 2048;
  constexpr std::uint32_t kOps = 16;  // 8 splits a slice: 256 slices
  auto planner = std::make_shared<TestPlanner>(make_splits(kSplits));
  Fleet fleet(planner);
  auto tweak = [](CoordinatorConfig& c) {
    c.bulk_ops_per_step = kOps;
    c.max_in_flight = 4;  // 8 lanes in the fleet: full after the first slice
  };
  fleet.add("a", tweak);
  fleet.add("b", tweak);
  // The first assignment that names a split is computed right after the first slice.
  std::optional<std::size_t> seeded_at_first_publish;
  ASSERT_TRUE(fleet.run_until(
      [&] {
        const std::string id = fleet.leader_id();
        if (!seeded_at_first_publish && !id.empty() && published_total(fleet.node(id)) > 0) {
          seeded_at_first_publish = fleet.mem->list(core::kSplitPrefix).size();
        }
        return plan_published(fleet) && fleet.converged();
      },
      120s));
  ASSERT_TRUE(seeded_at_first_publish.has_value());
  EXPECT_EQ(*seeded_at_first_publish, kOps / 2);

  Node& leader = fleet.node(fleet.leader_id());
  const std::size_t slices = kSplits / (kOps / 2);
  const std::uint64_t computed = computations(fleet, leader.id);
  // Every computation: the ones while lanes were free or members arrived (a few), one per
  // doubling of the split set (log2(256) = 8), the one at the end of seeding.
  const auto doublings = static_cast<std::uint64_t>(std::log2(static_cast<double>(slices)));
  EXPECT_LE(computed, doublings + 12) << "one computation per slice would be " << slices;
  EXPECT_GE(computed, 2u);  // at least the first slice's and the whole plan's
  EXPECT_EQ(published_total(leader), 8u);
  EXPECT_EQ(fleet.node("a").held().size() + fleet.node("b").held().size(), 8u);
  ASSERT_EQ(fleet.mem->list(core::kSplitPrefix).size(), kSplits);

  // The published assignment is the fixed point over the whole plan: more time, nothing moves.
  const auto published = leader.member().published_assignment();
  const auto publishes = leader.member().publishes();
  fleet.run_for(10s);
  EXPECT_EQ(leader.member().published_assignment(), published);
  EXPECT_EQ(leader.member().publishes(), publishes);
}

TEST(SeedPublish, while_lanes_are_free_every_slice_is_assigned_in_the_step_that_seeded_it) {
  constexpr std::size_t kSplits = 20;
  auto planner = std::make_shared<TestPlanner>(make_splits(kSplits));
  Fleet fleet(planner);
  fleet.add("solo", [](CoordinatorConfig& c) {
    c.bulk_ops_per_step = 4;  // 2 splits a slice
    c.max_in_flight = 32;     // more lanes than splits: every split is placed as it is seeded
  });
  std::size_t checks = 0;
  bool lagged = false;
  ASSERT_TRUE(fleet.run_until(
      [&] {
        if (fleet.leader_id().empty()) return false;
        const std::size_t seeded = fleet.mem->list(core::kSplitPrefix).size();
        if (seeded > 0) {
          ++checks;
          lagged |= published_total(fleet.node("solo")) != seeded;
        }
        return plan_published(fleet) && fleet.converged();
      },
      60s));
  EXPECT_GE(checks, kSplits / 2);  // looked after every slice
  EXPECT_FALSE(lagged) << "a seeded split waited for a later step to be assigned";
  EXPECT_EQ(fleet.node("solo").held().size(), kSplits);
}

TEST(SeedPublish, a_member_arriving_while_lanes_are_full_is_given_work_before_seeding_ends) {
  constexpr std::size_t kSplits = 4000;
  auto planner = std::make_shared<TestPlanner>(make_splits(kSplits));
  Fleet fleet(planner);
  auto tweak = [](CoordinatorConfig& c) {
    c.bulk_ops_per_step = 8;
    c.max_in_flight = 2;
  };
  fleet.add("a", tweak);
  // Lanes full (2), seeding far from done: a newcomer is a change that moves work at once.
  ASSERT_TRUE(fleet.run_until(
      [&] { return fleet.node("a").held().size() == 2 && fleet.leader_id() == "a"; }, 30s));
  ASSERT_FALSE(plan_published(fleet));
  fleet.add("b", tweak);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.node("b").held().size() == 2; }, 30s));
  EXPECT_FALSE(plan_published(fleet)) << "the newcomer waited for the end of seeding";
  ASSERT_TRUE(fleet.run_until([&] { return plan_published(fleet) && fleet.converged(); }, 120s));
}

}  // namespace
}  // namespace etlc::testing
