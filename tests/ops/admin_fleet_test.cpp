// JobAdmin against a live job: members from the runtime in manual mode on one MemoryStore and a
// ManualClock (tests/runtime/fleet.hpp), so every step is deterministic.
#include <gtest/gtest.h>

#include "etlc/admin.hpp"
#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

const MemberStatus* find_member(const JobStatus& st, const std::string& id) {
  for (const auto& m : st.members) {
    if (m.instance == id) return &m;
  }
  return nullptr;
}

Node* holder_of(Fleet& fleet, const std::string& split) {
  for (Node* n : fleet.live()) {
    if (n->held().count(split)) return n;
  }
  return nullptr;
}

// A compact picture of the job for failure messages.
std::string describe(JobAdmin& admin, Fleet& fleet) {
  JobStatus st = admin.status();
  std::string out = "leader=" + (st.leader ? st.leader->instance : std::string("-")) + "\n";
  for (const MemberStatus& m : st.members) {
    out += m.instance + " lanes=" + std::to_string(m.lane_budget) +
           " held=" + std::to_string(m.held) +
           " assigned=" + (m.assigned ? std::to_string(*m.assigned) : std::string("-")) +
           " draining=" + std::to_string(m.draining) + " cordoned=" + std::to_string(m.cordoned) +
           " member_held=" + std::to_string(fleet.node(m.instance).held().size()) + "\n";
  }
  out += "moves=" + std::to_string(st.moves_total);
  return out;
}

class AdminFleet : public ::testing::Test {
 protected:
  void start(std::size_t splits, std::uint64_t weight = 1) {
    planner = std::make_shared<TestPlanner>(make_splits(splits, weight));
    fleet = std::make_unique<Fleet>(planner);
    for (const char* id : {"m1", "m2", "m3"}) fleet->add(id);
    ASSERT_TRUE(fleet->run_until([&] { return fleet->converged(); }));
    admin = std::make_unique<JobAdmin>(*fleet->mem, fleet->clock);
  }

  std::shared_ptr<TestPlanner> planner;
  std::unique_ptr<Fleet> fleet;
  std::unique_ptr<JobAdmin> admin;
};

TEST_F(AdminFleet, status_of_a_converged_job_matches_the_members_own_view) {
  start(12, 5);
  JobStatus st = admin->status();
  ASSERT_TRUE(st.found);
  ASSERT_TRUE(st.leader.has_value());
  EXPECT_EQ(st.leader->instance, fleet->leader_id());
  EXPECT_TRUE(st.leader->has_session);
  EXPECT_EQ(st.leader->term, fleet->plan_record()->term);
  // One member besides the leader stands by (decision 0009), with a live session.
  ASSERT_TRUE(st.standby.has_value());
  EXPECT_NE(st.standby->instance, st.leader->instance);
  EXPECT_TRUE(st.standby->has_session);
  ASSERT_TRUE(st.plan.has_value());
  EXPECT_TRUE(st.plan->planned);
  EXPECT_EQ(st.plan->planned_splits, 12u);
  EXPECT_EQ(st.plan->verdict, PlanVerdict::running);
  EXPECT_EQ(st.splits.total, 12u);
  EXPECT_EQ(st.splits.owned, 12u);
  EXPECT_EQ(st.splits.total_weight, 60u);

  ASSERT_EQ(st.members.size(), 3u);
  std::uint64_t held = 0;
  double share = 0;
  for (const MemberStatus& m : st.members) {
    Node& n = fleet->node(m.instance);
    EXPECT_TRUE(m.has_session);
    EXPECT_EQ(m.nonce, n.member().nonce());
    EXPECT_EQ(m.held, n.held().size()) << m.instance;
    EXPECT_EQ(m.assigned, std::optional<std::uint64_t>(n.held().size())) << m.instance;
    EXPECT_EQ(m.weight_held, 5 * n.held().size());
    EXPECT_EQ(m.draining, 0u);
    EXPECT_EQ(m.lane_budget, 8u);
    EXPECT_EQ(m.lease, std::chrono::milliseconds(3000));
    held += m.held;
    share += m.weight_share;
  }
  EXPECT_EQ(held, 12u);
  EXPECT_NEAR(share, 1.0, 1e-9);
  EXPECT_EQ(st.moves_total, 0u);
  EXPECT_EQ(st.balance.members, 3u);
  EXPECT_DOUBLE_EQ(st.balance.max_over_mean, 1.0);  // 4 splits of weight 5 each

  // Sessions renew as time passes: the renewal counter and the age estimate grow.
  const std::uint64_t renewals = st.members[0].renewals;
  fleet->run_for(std::chrono::seconds(10));
  JobStatus later = admin->status();
  EXPECT_GE(later.members[0].renewals, renewals + 9);
  EXPECT_EQ(later.members[0].session_age_estimate,
            std::chrono::milliseconds(later.members[0].renewals * 1000));
  EXPECT_EQ(later.members[0].observed_for, std::chrono::milliseconds(10'000));
  ASSERT_TRUE(later.members[0].unchanged_for.has_value());
  EXPECT_LT(*later.members[0].unchanged_for, std::chrono::milliseconds(10'000));
}

TEST_F(AdminFleet, requeue_returns_a_quarantined_split_to_the_pool_and_refuses_the_rest) {
  start(6);
  // Poison s000: its owners fail it until it reaches max_attempts (3) and is quarantined.
  for (int i = 0; i < 3; ++i) {
    Node* n = holder_of(*fleet, "s000");
    ASSERT_NE(n, nullptr) << "round " << i;
    ASSERT_TRUE(n->coord->fail("s000", "poison row").durable());
    n->lanes.erase("s000");
    ASSERT_TRUE(fleet->run_until([&] {
      auto r = fleet->split_record("s000");
      return r.status == core::SplitStatus::quarantined || holder_of(*fleet, "s000") != nullptr;
    }));
  }
  ASSERT_EQ(fleet->split_record("s000").status, core::SplitStatus::quarantined);
  ASSERT_TRUE(fleet->run_until([&] { return fleet->plan_record()->quarantined == 1; }));
  EXPECT_EQ(admin->status().splits.quarantined, 1u);

  const std::vector<std::string> ids{"s000", "s001", "s000", "no-such-split"};
  std::vector<RequeueResult> res = admin->requeue(ids);
  ASSERT_EQ(res.size(), 3u);  // duplicates collapse
  EXPECT_EQ(res[0].split, "s000");
  EXPECT_EQ(res[0].outcome, RequeueOutcome::requeued);
  EXPECT_EQ(res[0].attempts_before, 3u);
  EXPECT_EQ(res[1].outcome, RequeueOutcome::not_quarantined);
  EXPECT_EQ(res[1].status, std::optional(SplitState::runnable));
  EXPECT_EQ(res[2].outcome, RequeueOutcome::not_found);

  core::SplitRecord r = fleet->split_record("s000");
  EXPECT_EQ(r.status, core::SplitStatus::runnable);
  EXPECT_EQ(r.attempts, 0u);
  EXPECT_FALSE(r.owner.has_value());
  EXPECT_EQ(r.last_error, std::optional<std::string>("poison row"));

  // The leader assigns it again, a member claims it, and the plan's tallies drop the quarantine.
  ASSERT_TRUE(fleet->run_until([&] {
    return holder_of(*fleet, "s000") != nullptr && fleet->plan_record()->quarantined == 0;
  }));
  EXPECT_EQ(fleet->split_record("s000").attempts, 0u);  // a graceful pickup, no attempt consumed

  // A second requeue of the same split is refused: it is runnable now.
  EXPECT_EQ(admin->requeue(std::vector<std::string>{"s000"})[0].outcome,
            RequeueOutcome::not_quarantined);
}

TEST_F(AdminFleet, requeue_rejects_invalid_ids_before_writing_anything) {
  start(2);
  EXPECT_THROW(admin->requeue(std::vector<std::string>{"s000", ""}), ConfigError);
  EXPECT_THROW(admin->requeue(std::vector<std::string>{std::string("\xff", 1)}), ConfigError);
}

TEST_F(AdminFleet, requeue_resolves_an_unknown_outcome_and_reports_store_failures) {
  start(3);
  // Park two splits by hand (as a quarantine would) while the job runs.
  for (const char* id : {"s001", "s002"}) {
    Node* n = holder_of(*fleet, id);
    ASSERT_NE(n, nullptr);
    for (int i = 0; i < 3; ++i) {
      Node* h = holder_of(*fleet, id);
      ASSERT_NE(h, nullptr);
      ASSERT_TRUE(h->coord->fail(id, "bad").durable());
      h->lanes.erase(id);
      ASSERT_TRUE(fleet->run_until([&] {
        return fleet->split_record(id).status == core::SplitStatus::quarantined ||
               holder_of(*fleet, id) != nullptr;
      }));
    }
    ASSERT_EQ(fleet->split_record(id).status, core::SplitStatus::quarantined);
  }
  FaultInjectingStore faulty(fleet->mem);
  JobAdmin over_faults(faulty, fleet->clock);

  faulty.unknown_outcome_next(1, /*apply=*/true);
  auto r1 = over_faults.requeue(std::vector<std::string>{"s001"});
  EXPECT_EQ(r1[0].outcome, RequeueOutcome::requeued);  // read back: our write landed
  EXPECT_EQ(fleet->split_record("s001").status, core::SplitStatus::runnable);

  faulty.fail_next(1, StoreErrc::unavailable);
  auto r2 = over_faults.requeue(std::vector<std::string>{"s002", "s000"});
  ASSERT_EQ(r2.size(), 2u);
  EXPECT_EQ(r2[0].outcome, RequeueOutcome::failed);
  EXPECT_EQ(r2[1].outcome, RequeueOutcome::skipped);
  EXPECT_EQ(fleet->split_record("s002").status, core::SplitStatus::quarantined);
}

TEST_F(AdminFleet, cordon_drains_a_member_cooperatively_and_uncordon_gives_its_lanes_back) {
  start(12);
  // Every lane commits progress, so a move that replayed or lost anything would show.
  std::map<std::string, std::uint64_t> committed;
  for (Node* n : fleet->live()) {
    for (const std::string& id : n->held()) {
      ASSERT_TRUE(n->coord->commit(id, SplitProgress{100, "state-" + id}).durable());
      n->lanes[id] = SplitProgress{100, "state-" + id};
      committed[id] = 100;
    }
  }
  ASSERT_EQ(committed.size(), 12u);
  const std::set<std::string> before = fleet->node("m2").held();
  ASSERT_FALSE(before.empty());
  const std::size_t revokes_before = fleet->node("m2").count<RevokeRequested>();
  const auto cooperative_before = fleet->metrics->snapshot()
                                      .counter("etl_coordination_revocations_total",
                                               {{"instance", "m2"}, {"outcome", "cooperative"}})
                                      .value_or(0);

  CordonResult c = admin->cordon("m2", "kernel upgrade");
  EXPECT_EQ(c.outcome, CordonOutcome::cordoned);
  EXPECT_TRUE(c.has_session);
  EXPECT_EQ(admin->cordon("m2", "kernel upgrade").outcome, CordonOutcome::unchanged);
  EXPECT_EQ(admin->cordon("m2", "kernel upgrade, then reboot").outcome, CordonOutcome::updated);

  ASSERT_TRUE(fleet->run_until([&] {
    return fleet->converged() && fleet->node("m2").held().empty();
  })) << describe(*admin, *fleet);

  // The drain was cooperative: revocations requested, none forced, nothing lost.
  Node& m2 = fleet->node("m2");
  EXPECT_EQ(m2.count<RevokeRequested>() - revokes_before, before.size());
  for (Node* n : fleet->live()) EXPECT_EQ(n->count<SplitLost>(), 0u) << n->id;
  auto snap = fleet->metrics->snapshot();
  EXPECT_EQ(snap.counter("etl_coordination_revocations_total",
                         {{"instance", "m2"}, {"outcome", "cooperative"}}),
            std::optional<std::uint64_t>(cooperative_before + before.size()));
  // Each moved split resumed exactly where m2 committed it.
  for (const std::string& id : before) {
    Node* n = holder_of(*fleet, id);
    ASSERT_NE(n, nullptr) << id;
    bool resumed = false;
    for (const SplitGranted& g : n->all<SplitGranted>()) {
      if (g.spec.id == id)
        resumed = g.progress.watermark == 100 && g.progress.state == "state-" + id;
    }
    EXPECT_TRUE(resumed) << id;
  }

  JobStatus st = admin->status();
  const MemberStatus* s2 = find_member(st, "m2");
  ASSERT_NE(s2, nullptr);
  EXPECT_TRUE(s2->cordoned);
  EXPECT_EQ(s2->cordon_reason, "kernel upgrade, then reboot");
  EXPECT_EQ(s2->lane_budget, 0u);
  EXPECT_EQ(s2->held, 0u);
  EXPECT_EQ(s2->assigned, std::optional<std::uint64_t>(0));
  EXPECT_EQ(st.balance.members, 2u);
  EXPECT_DOUBLE_EQ(st.balance.max_over_mean, 1.0);
  EXPECT_EQ(st.splits.owned, 12u);

  // The member can now stop with nothing to take over.
  m2.coord->shutdown();
  m2.running = false;
  fleet->run_for(std::chrono::seconds(1));
  EXPECT_EQ(fleet->split_record(*before.begin()).progress.watermark, 100u);

  EXPECT_EQ(admin->uncordon("m2"), UncordonOutcome::uncordoned);
  EXPECT_EQ(admin->uncordon("m2"), UncordonOutcome::not_cordoned);
}

TEST_F(AdminFleet, uncordon_returns_lanes_to_a_running_member) {
  start(9);
  ASSERT_EQ(admin->cordon("m3", "").outcome, CordonOutcome::cordoned);
  ASSERT_TRUE(fleet->run_until([&] {
    return fleet->converged() && fleet->node("m3").held().empty();
  })) << describe(*admin, *fleet);
  EXPECT_EQ(admin->uncordon("m3"), UncordonOutcome::uncordoned);
  ASSERT_TRUE(fleet->run_until([&] {
    return fleet->converged() && fleet->node("m3").held().size() == 3;
  })) << describe(*admin, *fleet);
  EXPECT_FALSE(find_member(admin->status(), "m3")->cordoned);
}

TEST_F(AdminFleet, cordoning_an_absent_instance_is_allowed_and_says_so) {
  start(3);
  CordonResult c = admin->cordon("not-yet-started", "pre-cordon");
  EXPECT_EQ(c.outcome, CordonOutcome::cordoned);
  EXPECT_FALSE(c.has_session);
  EXPECT_THROW(admin->cordon("m1", std::string(kMaxCordonReasonBytes + 1, 'x')), ConfigError);
  EXPECT_THROW(admin->cordon("", "x"), ConfigError);
  EXPECT_THROW(admin->cordon("m1", std::string("\xc3", 1)), ConfigError);
}

TEST_F(AdminFleet, a_live_job_survives_garbage_and_the_admin_reports_it) {
  start(6);
  ASSERT_TRUE(fleet->mem->create("cordon.m1", "{\"v\":1,\"instance\":\"zz\",\"reason\":\"\"}").ok);
  ASSERT_TRUE(fleet->mem->create("assign.ghost", "junk").ok);
  ASSERT_TRUE(fleet->mem->create("lease.s999", "{}").ok);
  fleet->run_for(std::chrono::seconds(2));
  ASSERT_TRUE(fleet->converged());
  JobStatus st = admin->status();
  // The leader removed the unreadable assignment record of a member that has no session (it
  // heals what it owns); the other two are reported.
  EXPECT_FALSE(fleet->mem->get("assign.ghost").has_value());
  EXPECT_EQ(st.garbage_total, 2u);
  // The garbage cordon record (id mismatch) is ignored by the leader and by the admin alike.
  EXPECT_FALSE(find_member(st, "m1")->cordoned);
  EXPECT_EQ(find_member(st, "m1")->held, fleet->node("m1").held().size());
  // A cordon over garbage replaces it.
  EXPECT_EQ(admin->cordon("m1", "fix").outcome, CordonOutcome::updated);
  EXPECT_TRUE(find_member(admin->status(), "m1")->cordoned);
}

}  // namespace
}  // namespace etlc::testing
