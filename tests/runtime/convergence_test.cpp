// A fleet converges to the leader's assignment and then goes quiet; newcomers and leader gaps.
#include <gtest/gtest.h>

#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

TEST(Convergence, fleet_converges_to_the_desired_assignment_then_publishes_nothing) {
  auto planner = std::make_shared<TestPlanner>(make_splits(12, 100));
  Fleet fleet(planner);
  // Lanes stay free here, so the leader would ask for splits (dynamic_split_test.cpp covers what
  // an unanswered request costs): this test is about the assignment alone.
  auto no_splitting = [](CoordinatorConfig& c) { c.dynamic_splitting = false; };
  fleet.add("a", no_splitting);
  fleet.add("b", no_splitting);
  fleet.add("c", no_splitting);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }, 30s));

  std::size_t total = 0;
  for (Node* n : fleet.live()) {
    EXPECT_EQ(n->held().size(), 4u) << n->id;  // 12 equal splits over 3 members
    total += n->held().size();
  }
  EXPECT_EQ(total, 12u);

  // Steady state: more time passes, nothing is published, nothing moves.
  Node& leader = fleet.node(fleet.leader_id());
  const auto publishes = leader.member().publishes();
  const auto granted_before = fleet.node("a").count<SplitGranted>() +
                              fleet.node("b").count<SplitGranted>() +
                              fleet.node("c").count<SplitGranted>();
  fleet.run_for(20s);
  EXPECT_EQ(leader.member().publishes(), publishes);
  EXPECT_EQ(fleet.node("a").count<SplitGranted>() + fleet.node("b").count<SplitGranted>() +
                fleet.node("c").count<SplitGranted>(),
            granted_before);
  EXPECT_EQ(fleet.node("a").count<RevokeRequested>(), 0u);
  EXPECT_TRUE(fleet.converged());
}

}  // namespace
}  // namespace etlc::testing

namespace etlc::testing {
namespace {

TEST(Convergence, members_report_ownership_and_store_metrics) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 100));
  Fleet fleet(planner);
  fleet.add("a");
  fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }, 30s));
  auto snap = fleet.metrics->snapshot();
  double owned = 0;
  std::uint64_t acquired = 0;
  for (const char* m : {"a", "b"}) {
    owned += snap.gauge("etl_coordination_splits_owned", {{"instance", m}}).value_or(-100);
    acquired +=
        snap.counter("etl_coordination_acquisitions_total", {{"instance", m}, {"kind", "fresh"}})
            .value_or(0);
  }
  EXPECT_EQ(owned, 6.0);
  EXPECT_EQ(acquired, 6u);
  const std::string leader = fleet.leader_id();
  EXPECT_EQ(snap.gauge("etl_coordination_leader", {{"instance", leader}}), 1.0);
  EXPECT_EQ(snap.gauge("etl_coordination_splits_planned", {{"instance", leader}}), 6.0);
  auto creates = snap.counter("etl_coordination_store_ops_total",
                              {{"instance", leader}, {"op", "create"}, {"result", "ok"}});
  ASSERT_TRUE(creates.has_value());
  EXPECT_GE(*creates, 12u);  // 6 specs + 6 split records, at least
  const std::string text = fleet.metrics->render_prometheus();
  EXPECT_NE(text.find("# TYPE etl_coordination_store_op_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("etl_coordination_assignment_seconds_count"), std::string::npos);
}

}  // namespace
}  // namespace etlc::testing
