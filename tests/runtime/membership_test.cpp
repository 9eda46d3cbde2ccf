// Membership changes: newcomers, crashes, the rebalance delay, restarts, twins.
#include <gtest/gtest.h>

#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

std::map<std::string, std::set<std::string>> holdings(Fleet& fleet) {
  std::map<std::string, std::set<std::string>> out;
  for (Node* n : fleet.live()) out[n->id] = n->held();
  return out;
}

TEST(Membership, a_newcomer_gets_work_from_the_heaviest_member_without_unrelated_moves) {
  auto planner = std::make_shared<TestPlanner>(make_splits(8, 10));
  Fleet fleet(planner);
  fleet.add("a");                                                     // 8 lanes
  fleet.add("b", [](CoordinatorConfig& c) { c.max_in_flight = 2; });  // 2 lanes
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  auto before = holdings(fleet);
  ASSERT_EQ(before["a"].size(), 6u);  // a is the heaviest member (60 vs 20)
  ASSERT_EQ(before["b"].size(), 2u);

  fleet.add("c");
  ASSERT_TRUE(
      fleet.run_until([&] { return fleet.converged() && !fleet.node("c").held().empty(); }));
  auto after = holdings(fleet);
  EXPECT_EQ(after["b"], before["b"]);  // the unrelated member keeps exactly what it had
  EXPECT_EQ(after["a"].size(), 3u);    // 30 / 20 / 30: no single move improves it
  EXPECT_EQ(after["c"].size(), 3u);
  for (const std::string& s : after["c"]) EXPECT_TRUE(before["a"].count(s)) << s;
  for (const std::string& s : after["a"]) EXPECT_TRUE(before["a"].count(s)) << s;
  // Handoffs were cooperative: nobody lost a split, every revocation drained.
  for (Node* n : fleet.live()) EXPECT_EQ(n->count<SplitLost>(), 0u) << n->id;
  EXPECT_EQ(fleet.node("a").count<RevokeRequested>(), 3u);  // exactly the three that moved
}

TEST(Membership, a_crashed_members_splits_are_withheld_for_the_delay_then_reassigned) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  fleet.add("a");
  fleet.add("b");
  fleet.add("c");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  // Crash a non-leader.
  std::string victim = fleet.leader_id() == "c" ? "b" : "c";
  auto lost = fleet.node(victim).held();
  ASSERT_FALSE(lost.empty());
  fleet.crash(victim);
  const auto crashed_at = fleet.clock.now();

  // Until lease + delay has passed, nobody else holds the victim's splits.
  fleet.run_until([&] { return false; }, 3000ms + 1500ms);
  for (Node* n : fleet.live()) {
    for (const auto& s : lost) EXPECT_FALSE(n->held().count(s)) << s << " moved early to " << n->id;
  }
  // After the window they are claimed elsewhere, and each takeover consumed an attempt.
  ASSERT_TRUE(fleet.run_until(
      [&] {
        std::size_t got = 0;
        for (Node* n : fleet.live()) {
          for (const auto& s : lost) got += n->held().count(s);
        }
        return got == lost.size();
      },
      20s));
  // Expiry counts from the last renewal the leader saw (at most lease/3 before the crash).
  EXPECT_GE(fleet.clock.now() - crashed_at, 2000ms + 2000ms);
  for (const auto& s : lost) EXPECT_EQ(fleet.split_record(s).attempts, 1u) << s;
}

TEST(Membership,
     a_member_that_returns_inside_the_window_reclaims_its_own_splits_and_nothing_moves) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  fleet.add("a");
  fleet.add("b", [](CoordinatorConfig& c) { c.rebalance_delay = 10s; });
  fleet.add("c", [](CoordinatorConfig& c) { c.rebalance_delay = 10s; });
  // a is the first member and becomes leader: give it the long delay too.
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  ASSERT_EQ(fleet.leader_id(), "a");
  auto before = holdings(fleet);
  fleet.crash("b");
  fleet.run_for(4s);  // b's session expires (lease 3 s); its splits are withheld
  EXPECT_EQ(fleet.mem->get(core::member_key("b")), std::nullopt);

  fleet.add("b");  // the same instance id comes back (new process, new nonce)
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }, 10s));
  auto after = holdings(fleet);
  EXPECT_EQ(after, before);  // it reclaimed exactly its own, and nothing else moved
  for (const auto& s : before["b"]) EXPECT_EQ(fleet.split_record(s).attempts, 1u) << s;
}

TEST(Membership, a_zero_rebalance_delay_reassigns_immediately) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  auto zero = [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; };
  fleet.add("a", zero);
  fleet.add("b", zero);
  fleet.add("c", zero);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  std::string victim = fleet.leader_id() == "c" ? "b" : "c";
  auto lost = fleet.node(victim).held();
  fleet.crash(victim);
  const auto crashed_at = fleet.clock.now();
  ASSERT_TRUE(fleet.run_until(
      [&] {
        std::size_t got = 0;
        for (Node* n : fleet.live()) {
          for (const auto& s : lost) got += n->held().count(s);
        }
        return got == lost.size();
      },
      20s));
  // Lease expiry (3 s) is the only wait: no delay window on top.
  EXPECT_LT(fleet.clock.now() - crashed_at, 3000ms + 500ms);
}

TEST(Membership, a_restarted_member_with_the_same_id_reclaims_fast) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  fleet.add("a");
  fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  auto mine = fleet.node("b").held();
  fleet.crash("b");
  const auto restarted_at = fleet.clock.now();
  fleet.add("b");  // restarts at once: adopts its session, reclaims its leases
  ASSERT_TRUE(fleet.run_until([&] { return fleet.node("b").held() == mine; }, 10s));
  EXPECT_LT(fleet.clock.now() - restarted_at, 500ms);  // far less than a lease
  EXPECT_EQ(fleet.node("a").count<RevokeRequested>(), 0u);
}

TEST(Membership, twin_instance_ids_are_detected_and_the_older_process_stops) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  fleet.add("a");
  Node& first = fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  Node& second = fleet.add("b");  // a second live process with the same id
  ASSERT_TRUE(fleet.run_until([&] { return first.count<Fatal>() > 0; }, 10s));
  auto fatal = first.all<Fatal>();
  EXPECT_NE(fatal[0].message.find("another live process uses instance id 'b'"), std::string::npos);
  EXPECT_EQ(second.count<Fatal>(), 0u);
  EXPECT_TRUE(first.held().empty());
  EXPECT_TRUE(first.member().stopped());
}

TEST(Membership, a_member_with_another_fingerprint_is_refused_at_start) {
  auto planner = std::make_shared<TestPlanner>(make_splits(2, 10));
  Fleet fleet(planner);
  fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  auto other = std::make_shared<TestPlanner>(make_splits(2, 10), "another-input");
  CoordinatorConfig c = Fleet::default_config("z");
  Coordinator z(c, fleet.mem, other, fleet.clock);
  try {
    z.start();
    FAIL() << "start() accepted a member with another fingerprint";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fingerprint mismatch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace etlc::testing
