// Coordinator::session_live: the cheap call that tells a lane, by the member's own clock, whether
// the session its grant belongs to is still provably live (last acknowledged renewal's send time
// + lease - op_timeout), without the control loop having to run. Deterministic: manual mode on a
// ManualClock (lease 3 s, op_timeout 0.5 s, renewals every second).
#include <gtest/gtest.h>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

std::vector<SplitGranted> grants(const Node& n) {
  return n.all<SplitGranted>();
}

TEST(SessionLive, a_grant_names_a_live_session_that_lapses_by_the_clock_alone_when_the_loop_stops) {
  auto planner = std::make_shared<TestPlanner>(make_splits(3, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  ASSERT_EQ(grants(a).size(), 3u);
  const std::uint64_t session = grants(a)[0].session;
  EXPECT_NE(session, 0u);
  for (const auto& g : grants(a)) EXPECT_EQ(g.session, session) << "one session, one serial";
  EXPECT_TRUE(a.coord->session_live(session));
  EXPECT_FALSE(a.coord->session_live(session + 1)) << "an unknown session is never live";
  EXPECT_FALSE(a.coord->session_live(0));
  const auto until = a.coord->session_live_until(session);
  EXPECT_GT(until, fleet.clock.now());
  EXPECT_LE(until, fleet.clock.now() + 2500ms) << "at most lease - op_timeout ahead";

  // The process stops (a pause): no step runs, nothing renews. The answer changes with the clock
  // alone, at the deadline, before the control loop could notice anything.
  a.running = false;
  fleet.clock.advance_to(until - 1ms);
  EXPECT_TRUE(a.coord->session_live(session));
  fleet.clock.advance_to(until);
  EXPECT_FALSE(a.coord->session_live(session));
  EXPECT_EQ(a.count<SplitLost>(), 0u) << "the loop has not run: no loss event yet";
  EXPECT_EQ(a.held().size(), 3u);
}

TEST(SessionLive, renewals_move_the_deadline_and_a_rejoin_opens_a_new_session_the_old_stays_dead) {
  auto planner = std::make_shared<TestPlanner>(make_splits(2, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::uint64_t first = grants(a).at(0).session;
  const auto until0 = a.coord->session_live_until(first);
  fleet.run_for(5s);  // renewals keep landing
  EXPECT_TRUE(a.coord->session_live(first));
  EXPECT_GE(a.coord->session_live_until(first), until0 + 4s) << "renewed every second";

  // Cut off from the store: renewals fail, the session lapses at its deadline, and the loop stops
  // the lanes itself (starved) at that same deadline, not before the answer turned false.
  const auto deadline = a.coord->session_live_until(first);
  a.store->fail_next(1'000'000);
  fleet.run_until([&] { return a.count<SplitLost>() > 0; }, 10s);
  ASSERT_GT(a.count<SplitLost>(), 0u);
  EXPECT_EQ(a.all<SplitLost>()[0].reason, LossReason::starved);
  EXPECT_GE(fleet.clock.now(), deadline);
  EXPECT_FALSE(a.coord->session_live(first));

  // The store comes back: a new session, new grants naming it; the old session stays dead.
  a.store->clear_faults();
  const std::size_t before = grants(a).size();
  ASSERT_TRUE(fleet.run_until([&] { return grants(a).size() >= before + 2; }, 20s));
  const std::uint64_t second = grants(a).back().session;
  EXPECT_GT(second, first);
  EXPECT_TRUE(a.coord->session_live(second));
  EXPECT_FALSE(a.coord->session_live(first));
}

TEST(SessionLive, putting_the_session_record_back_over_garbage_counts_as_a_renewal_for_lanes) {
  auto planner = std::make_shared<TestPlanner>(make_splits(2, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::uint64_t session = grants(a).at(0).session;
  const auto key = core::member_key("a");
  const auto cur = fleet.mem->get(key);
  ASSERT_TRUE(cur.has_value());
  ASSERT_TRUE(fleet.mem->update(key, "{not a record", cur->revision).ok);
  // The member puts its record back at its next renewal (a CAS sent now: a renewal)...
  auto readable = [&] {
    auto e = fleet.mem->get(key);
    try {
      return e && core::decode_member(key, e->value).instance == "a";
    } catch (const core::RecordError&) {
      return false;
    }
  };
  ASSERT_TRUE(fleet.run_until(readable, 10s));
  const auto put_back_at = fleet.clock.now();
  // ... and then the store goes away. The lanes' deadline runs from the put-back, as the loop's
  // own starvation check does: live until lease - op_timeout (2.5 s) after it.
  a.store->fail_next(1'000'000);
  fleet.run_until([&] { return fleet.clock.now() >= put_back_at + 2400ms; }, 3s);
  EXPECT_TRUE(a.coord->session_live(session));
  EXPECT_EQ(a.count<SplitLost>(), 0u);
  fleet.run_until([&] { return a.count<SplitLost>() > 0; }, 5s);
  EXPECT_FALSE(a.coord->session_live(session));
  EXPECT_GE(fleet.clock.now(), put_back_at + 2500ms);
}

TEST(SessionLive, a_twin_ends_the_older_processs_session_and_a_shutdown_ends_the_newer) {
  auto planner = std::make_shared<TestPlanner>(make_splits(2, 10));
  Fleet fleet(planner);
  Node& first = fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::uint64_t old_session = grants(first).at(0).session;
  Node& second = fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return first.count<Fatal>() > 0; }, 10s));
  EXPECT_FALSE(first.coord->session_live(old_session));
  ASSERT_TRUE(fleet.run_until([&] { return !grants(second).empty(); }, 10s));
  const std::uint64_t s = grants(second).back().session;
  EXPECT_TRUE(second.coord->session_live(s));
  second.coord->shutdown();
  EXPECT_FALSE(second.coord->session_live(s));
}

}  // namespace
}  // namespace etlc::testing
