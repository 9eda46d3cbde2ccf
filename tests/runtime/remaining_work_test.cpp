// Balancing on the work that remains (issue 16): the leader weighs splits by what their commits
// report left, never moves a nearly done split for balance, recomputes on progress alone at most
// once per progress_interval, and reports the job's progress in job.progress.
#include <gtest/gtest.h>

#include "core/keys.hpp"
#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

using std::chrono::milliseconds;

SplitProgress done_at(std::uint64_t done) {
  return SplitProgress{done, {}, done};
}

// Commits `done` for each split, and keeps it as the lane's progress (a drain commits that).
void commit_done(Node& n, const std::set<std::string>& splits, std::uint64_t done) {
  for (const std::string& s : splits) {
    ASSERT_TRUE(n.coord->commit(s, done_at(done)).durable());
    n.lanes[s] = done_at(done);
  }
}

std::uint64_t computations(Fleet& fleet, const std::string& instance) {
  const MetricsSnapshot snap = fleet.metrics->snapshot();  // h points into it
  const auto* h = snap.histogram("etl_coordination_assignment_seconds", {{"instance", instance}});
  return h == nullptr ? 0 : h->count;
}

std::optional<core::ProgressRecord> progress_record(Fleet& fleet) {
  auto e = fleet.mem->get(core::kProgressKey);
  if (!e) return std::nullopt;
  return core::decode_progress(core::kProgressKey, e->value);
}

// a holds four splits of weight 100, each 95 % done; then b joins.
Node& join_after_nearly_done(Fleet& fleet, bool remaining) {
  auto tweak = [remaining](CoordinatorConfig& c) { c.balance_on_remaining_work = remaining; };
  Node& a = fleet.add("a", tweak);
  EXPECT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 4; }));
  commit_done(a, a.held(), 95);
  fleet.run_for(2s);
  Node& b = fleet.add("b", tweak);
  EXPECT_TRUE(fleet.run_until([&] { return fleet.converged() && b.member().assignment(); }));
  fleet.run_for(3s);
  return b;
}

TEST(RemainingWork, a_nearly_done_split_is_not_moved_to_a_newcomer) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(4, 100)));
  Node& b = join_after_nearly_done(fleet, true);
  EXPECT_TRUE(b.held().empty());
  EXPECT_EQ(fleet.node("a").held().size(), 4u);
  EXPECT_EQ(fleet.node("a").count<RevokeRequested>(), 0u);
}

// The control: balanced on planned weights, the same fleet moves half the nearly done work.
TEST(RemainingWork, on_planned_weights_the_newcomer_takes_half) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(4, 100)));
  Node& b = join_after_nearly_done(fleet, false);
  EXPECT_EQ(b.held().size(), 2u);
  EXPECT_EQ(fleet.node("a").count<RevokeRequested>(), 2u);
}

// Loads are what remains: a holds 100 + 100 + 20 + 20; b joining takes 100 + 20, not any two.
TEST(RemainingWork, a_newcomer_takes_half_of_what_remains) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(4, 100)));
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 4; }));
  const std::set<std::string> two = {"s000", "s001"};
  commit_done(a, two, 80);
  Node& b = fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && b.held().size() == 2; }));
  std::uint64_t left = 0;
  for (const std::string& s : b.held())
    left += 100 - fleet.split_record(s).progress.done.value_or(0);
  EXPECT_EQ(left, 120u);
}

// Pinning stops only balance moves: when the holder goes, the split goes to a live member.
TEST(RemainingWork, a_pinned_split_moves_when_its_holder_leaves) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(4, 100)));
  auto no_delay = [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; };
  fleet.add("a", no_delay);
  Node& b = fleet.add("b", no_delay);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && b.held().size() == 2; }));
  const std::set<std::string> held = b.held();
  commit_done(b, held, 99);
  fleet.run_for(2s);
  const std::string leader = fleet.leader_id();
  fleet.crash("b");
  Node& a = fleet.node("a");
  ASSERT_TRUE(fleet.run_until([&] { return a.held().size() == 4; }, 30s)) << "leader " << leader;
  for (const std::string& s : held) EXPECT_EQ(fleet.split_record(s).progress.done, 99u);
}

// Commits that move only remaining work recompute at most once per progress_interval.
TEST(RemainingWork, progress_alone_recomputes_at_most_once_per_interval) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(4, 1000)));
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.progress_interval = 1000ms; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 4; }));
  fleet.run_for(2s);
  const std::uint64_t before = computations(fleet, "a");
  for (std::uint64_t i = 1; i <= 50; ++i) {  // 5 s of commits, one every 100 ms
    commit_done(a, a.held(), i * 10);
    fleet.run_for(100ms);
  }
  const std::uint64_t during = computations(fleet, "a") - before;
  EXPECT_GE(during, 3u);
  EXPECT_LE(during, 6u);
  fleet.run_for(5s);  // quiet: nothing more
  EXPECT_LE(computations(fleet, "a") - before, during + 1);
}

TEST(RemainingWork, the_leader_reports_the_jobs_progress_and_rate) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(4, 1000)));
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 4; }));
  const std::string one = *a.held().begin();
  for (std::uint64_t i = 1; i <= 50; ++i) {  // 100 weight per second on one split
    commit_done(a, {one}, i * 10);
    fleet.run_for(100ms);
  }
  fleet.run_for(1500ms);
  auto rec = progress_record(fleet);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->planned, 4000u);
  EXPECT_EQ(rec->done, 500u);
  EXPECT_EQ(rec->remaining, 3500u);
  ASSERT_TRUE(rec->rate_per_s);
  EXPECT_GE(*rec->rate_per_s, 40u);
  EXPECT_LE(*rec->rate_per_s, 120u);
  const auto snap = fleet.metrics->snapshot();
  EXPECT_EQ(snap.gauge("etl_coordination_job_weight_done", {{"instance", "a"}}), 500.0);
  ASSERT_TRUE(a.coord->complete(one, done_at(1000)).durable());
  fleet.run_for(2s);
  rec = progress_record(fleet);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->done, 1000u);
  EXPECT_EQ(rec->remaining, 3000u);
}

// An outsider's garbage in job.progress costs nothing: the leader overwrites it.
TEST(RemainingWork, garbage_in_job_progress_is_overwritten) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(2, 10)));
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 2; }));
  fleet.run_for(2s);
  auto e = fleet.mem->get(core::kProgressKey);
  ASSERT_TRUE(e);
  ASSERT_TRUE(fleet.mem->update(core::kProgressKey, "garbage", e->revision).ok);
  commit_done(a, a.held(), 5);
  fleet.run_for(3s);
  auto rec = progress_record(fleet);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->done, 10u);
}

}  // namespace
}  // namespace etlc::testing

namespace etlc::testing {
namespace {

// a holds six splits; b joins and takes three (moved: cooling); c joins at once. c may take only
// from a while b's splits cool down, and gets its full share when the cooldown ends.
TEST(RemainingWork, a_moved_split_is_not_moved_again_within_the_cooldown) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(6, 100)));
  auto cooldown = [](CoordinatorConfig& c) { c.rebalance_cooldown = 30'000ms; };
  Node& a = fleet.add("a", cooldown);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 6; }));
  Node& b = fleet.add("b", cooldown);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && b.held().size() == 3; }));
  const std::set<std::string> cooling = b.held();
  Node& c = fleet.add("c", cooldown);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && c.held().size() == 1; }));
  fleet.run_for(5s);
  EXPECT_EQ(c.held().size(), 1u);
  EXPECT_EQ(b.held(), cooling);
  ASSERT_TRUE(fleet.run_until([&] { return c.held().size() == 2; }, 40s));
  EXPECT_EQ(b.held().size(), 2u);
}

// Joiners seen one computation at a time (a burst on a real store): b's share is published while
// a still drains it (a's lanes are wedged until the forced release), then c joins. The splits in
// transit to b are not cooling yet, so the leader sends part of them to c instead: nothing moves
// twice, and no joiner gives back what it got.
TEST(RemainingWork, splits_in_transit_to_a_joiner_can_go_to_a_later_joiner_instead) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(12, 100)));
  auto twelve = [](CoordinatorConfig& c) {
    c.max_in_flight = 12;
    c.rebalance_cooldown = 30'000ms;
  };
  Node& a = fleet.add("a", twelve);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 12; }));
  a.policy.wedge = true;
  Node& b = fleet.add("b", twelve);
  ASSERT_TRUE(fleet.run_until([&] { return a.count<RevokeRequested>() >= 6; }));
  EXPECT_TRUE(b.held().empty());  // a drains until drain_deadline forces the releases
  Node& c = fleet.add("c", twelve);
  ASSERT_TRUE(fleet.run_until([&] {
    return fleet.converged() && a.held().size() == 4 && b.held().size() == 4 &&
           c.held().size() == 4;
  }));
  EXPECT_EQ(b.count<RevokeRequested>(), 0u);
  EXPECT_EQ(b.ever_granted.size(), 4u);
  EXPECT_EQ(c.ever_granted.size(), 4u);
}

// A cooling split still moves when its holder is cordoned (passes 1 and 2 are not held back).
TEST(RemainingWork, a_cooling_split_leaves_a_cordoned_holder) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(4, 100)));
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 4; }));
  Node& b = fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && b.held().size() == 2; }));
  ASSERT_TRUE(
      fleet.mem->create(core::cordon_key("b"), core::encode(core::CordonRecord{"b", "test"})).ok);
  ASSERT_TRUE(fleet.run_until([&] { return b.held().empty() && a.held().size() == 4; }, 20s));
}

// The pace rule (core/lane_pace.hpp). a (2 lanes) reads two splits at 10 per second; b (1 lane)
// reads the third at `b_pace` per second for 6 s and completes it. Then b is idle and a's two
// splits weigh more than a single move's worth: pass 3 would move one to b, and does only where
// b's lanes read it faster (by pace_gain_ppm, 50 %).
std::size_t moves_to_an_idle_member(std::uint64_t b_pace, bool by_pace) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(3, 10'000)));
  auto two = [by_pace](CoordinatorConfig& c) {
    c.max_in_flight = 2;
    c.balance_by_pace = by_pace;
  };
  Node& a = fleet.add("a", two);
  EXPECT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 2; }));
  Node& b = fleet.add("b", [by_pace](CoordinatorConfig& c) {
    c.max_in_flight = 1;
    c.balance_by_pace = by_pace;
  });
  EXPECT_TRUE(fleet.run_until([&] { return fleet.converged() && b.held().size() == 1; }));
  const std::set<std::string> on_a = a.held(), on_b = b.held();
  for (std::uint64_t second = 1; second <= 6; ++second) {
    commit_done(a, on_a, 10 * second);
    commit_done(b, on_b, b_pace * second);
    fleet.run_for(1s);
  }
  EXPECT_TRUE(b.coord->complete(*on_b.begin(), done_at(10'000)).durable());
  b.lanes.clear();
  for (std::uint64_t second = 7; second <= 12; ++second) {
    commit_done(a, a.held(), 10 * second);
    fleet.run_for(1s);
  }
  return a.count<RevokeRequested>();
}

TEST(RemainingWork, a_split_under_way_stays_where_lanes_elsewhere_read_no_faster) {
  EXPECT_EQ(moves_to_an_idle_member(10, true), 0u);
  EXPECT_EQ(moves_to_an_idle_member(14, true), 0u);  // 40 % faster: inside the 50 % margin
}

// The controls: b's lanes read 3x faster, so a split moves to it; and without the pace rule one
// moves however fast b reads.
TEST(RemainingWork, a_split_under_way_moves_to_a_faster_lane) {
  EXPECT_EQ(moves_to_an_idle_member(30, true), 1u);
  EXPECT_EQ(moves_to_an_idle_member(10, false), 1u);
}

}  // namespace
}  // namespace etlc::testing
