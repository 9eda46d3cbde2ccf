// A fleet converges to the leader's assignment and then goes quiet; newcomers and leader gaps.
#include <gtest/gtest.h>

#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

TEST(Convergence, fleet_converges_to_the_desired_assignment_then_publishes_nothing) {
  auto planner = std::make_shared<TestPlanner>(make_splits(12, 100));
  Fleet fleet(planner);
  fleet.add("a");
  fleet.add("b");
  fleet.add("c");
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
