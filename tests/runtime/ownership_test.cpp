// Fencing, revocation, quarantine, completion, leader changes, outages and garbage.
#include <gtest/gtest.h>

#include "runtime/fleet.hpp"
#include "runtime/scripted_store.hpp"

namespace etlc::testing {
namespace {

std::set<std::string> union_held(Fleet& fleet) {
  std::set<std::string> all;
  for (Node* n : fleet.live()) {
    auto h = n->held();
    all.insert(h.begin(), h.end());
  }
  return all;
}

// Members a and z over 4 splits (no rebalance delay), run until converged; returns z. Each test
// checks that z does not lead and holds a split, the one it pauses z over.
Node& converge_a_and_z(Fleet& fleet) {
  fleet.add("a", [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; });
  Node& z = fleet.add("z", [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; });
  EXPECT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  return z;
}

TEST(Ownership, a_zombie_paused_past_its_lease_is_fenced_and_its_late_commit_writes_nothing) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(4, 10)));
  Node& z = converge_a_and_z(fleet);
  ASSERT_NE(fleet.leader_id(), "z");
  auto held = z.held();
  ASSERT_FALSE(held.empty());
  const std::string split = *held.begin();
  ASSERT_TRUE(z.coord->commit(split, SplitProgress{5, "z-state"}).durable());

  z.running = false;  // paused: no steps, no renewals
  ASSERT_TRUE(fleet.run_until([&] { return fleet.node("a").held().count(split) > 0; }, 20s));
  const auto taken = fleet.split_record(split);
  EXPECT_EQ(taken.owner, "a");
  EXPECT_EQ(taken.progress.watermark, 5u);  // resumed from z's durable commit
  EXPECT_EQ(taken.attempts, 1u);            // z's tenancy ended non-gracefully

  // The zombie wakes up and commits before its own loop notices anything.
  CommitResult late = z.coord->commit(split, SplitProgress{9, "zombie"});
  EXPECT_EQ(late.status, CommitStatus::fenced);
  EXPECT_EQ(fleet.split_record(split), taken);  // nothing written
  // Its loop then self-fences the rest and it rejoins.
  z.running = true;
  fleet.run_for(1s);
  EXPECT_GE(z.count<SplitLost>(), 1u);
}

// A split record carrying progress.done (written by a later release, decision 0011) is taken over
// and committed by this one without losing the field or counting the record as damage.
TEST(Ownership, a_takeover_and_its_commits_keep_progress_done) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(4, 10)));
  Node& z = converge_a_and_z(fleet);
  ASSERT_NE(fleet.leader_id(), "z");
  ASSERT_FALSE(z.held().empty());
  const std::string split = *z.held().begin();
  z.running = false;  // z stops: nobody writes the record until a takes it over
  const std::string key = core::split_key(split);
  const auto cur = fleet.mem->get(key);
  ASSERT_TRUE(cur);
  core::SplitRecord rec = core::decode_split(key, cur->value);
  rec.progress.done = 6;
  ASSERT_TRUE(fleet.mem->update(key, core::encode(rec), cur->revision).ok);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.node("a").held().count(split) > 0; }, 20s));
  EXPECT_EQ(fleet.split_record(split).owner, "a");
  EXPECT_EQ(fleet.split_record(split).progress.done, std::optional<std::uint64_t>{6});
  ASSERT_TRUE(fleet.node("a").coord->commit(split, SplitProgress{7, "a-state"}).durable());
  const core::SplitRecord after = fleet.split_record(split);
  EXPECT_EQ(after.progress.watermark, 7u);
  EXPECT_EQ(after.progress.done, std::optional<std::uint64_t>{6});
}

TEST(Ownership, a_call_for_an_ended_tenancy_is_fenced_writes_nothing_and_keeps_the_new_one) {
  auto planner = std::make_shared<TestPlanner>(make_splits(2, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 2; }));
  const std::string split = *a.held().begin();
  auto grant_epochs = [&] {
    std::vector<std::uint64_t> out;
    for (const auto& g : a.all<SplitGranted>()) {
      if (g.spec.id == split) out.push_back(g.epoch);
    }
    return out;
  };
  ASSERT_EQ(grant_epochs().size(), 1u);
  const std::uint64_t old_epoch = grant_epochs()[0];
  ASSERT_TRUE(a.coord->commit(split, SplitProgress{3, "first"}, old_epoch).durable());

  // The split is released and granted to the same member again, in a newer epoch; a lane of the
  // first tenancy is still running (its user did not stop it).
  const std::string ids[] = {split};
  a.coord->release(ids);
  ASSERT_TRUE(fleet.run_until([&] { return grant_epochs().size() == 2; }));
  const std::uint64_t new_epoch = grant_epochs()[1];
  ASSERT_GT(new_epoch, old_epoch);
  const auto before = fleet.split_record(split);

  for (CommitResult r : {a.coord->commit(split, SplitProgress{8, "stale lane"}, old_epoch),
                         a.coord->complete(split, SplitProgress{9, "stale lane"}, old_epoch),
                         a.coord->fail(split, "stale lane", old_epoch),
                         a.coord->release_drained(split, old_epoch)}) {
    EXPECT_EQ(r.status, CommitStatus::fenced) << r.detail;
    EXPECT_NE(r.detail.find("not in epoch"), std::string::npos) << r.detail;
  }
  EXPECT_EQ(fleet.split_record(split), before);  // nothing written
  EXPECT_EQ(a.held().count(split), 1u);          // and the new tenancy goes on
  EXPECT_EQ(a.count<SplitLost>(), 0u);
  EXPECT_TRUE(a.coord->commit(split, SplitProgress{4, "second"}, new_epoch).durable());
  // kAnyEpoch acts on whatever tenancy is current.
  EXPECT_TRUE(a.coord->commit(split, SplitProgress{5, "any"}, kAnyEpoch).durable());
  EXPECT_EQ(fleet.split_record(split).progress.watermark, 5u);
}

TEST(Ownership, a_late_decline_for_an_ended_tenancy_does_not_force_out_the_new_one) {
  auto planner = std::make_shared<TestPlanner>(make_splits(2, 10));
  Fleet fleet(planner);
  // A drain deadline far beyond the test's waits: only a decline can force the release.
  Node& a = fleet.add("a", [](CoordinatorConfig& c) {
    c.rebalance_delay = 0ms;
    c.drain_deadline = 60s;
  });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 2; }));
  auto grant_epochs = [&](const std::string& id) {
    std::vector<std::uint64_t> out;
    for (const auto& g : a.all<SplitGranted>()) {
      if (g.spec.id == id) out.push_back(g.epoch);
    }
    return out;
  };
  // Both splits end their first tenancy and are granted to `a` again, in newer epochs.
  const auto held = a.held();
  const std::vector<std::string> ids(held.begin(), held.end());
  a.coord->release(ids);
  ASSERT_TRUE(fleet.run_until(
      [&] { return grant_epochs(ids[0]).size() == 2 && grant_epochs(ids[1]).size() == 2; }));

  // A second member joins; `a` is asked to give one split up and leaves the drain hanging.
  a.policy.wedge = true;
  fleet.add("b", [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; });
  ASSERT_TRUE(fleet.run_until([&] { return a.count<RevokeRequested>() > 0; }));
  const RevokeRequested revoke = a.all<RevokeRequested>().front();
  const auto epochs = grant_epochs(revoke.split_id);
  ASSERT_EQ(revoke.epoch, epochs[1]);

  // A lane of the first tenancy answers late: nothing is forced.
  a.coord->decline_revoke(revoke.split_id, epochs[0]);
  fleet.run_for(5s);
  EXPECT_EQ(a.held().count(revoke.split_id), 1u);
  EXPECT_EQ(a.count<SplitLost>(), 0u);
  // The current tenancy's decline forces the release at once.
  a.coord->decline_revoke(revoke.split_id, revoke.epoch);
  ASSERT_TRUE(fleet.run_until([&] { return a.count<SplitLost>() == 1; }, 100ms));
  EXPECT_NE(a.coord->metrics().render_prometheus().find("outcome=\"declined\"} 1"),
            std::string::npos);
  EXPECT_EQ(a.all<SplitLost>().front().split_id, revoke.split_id);
  EXPECT_EQ(a.all<SplitLost>().front().reason, LossReason::revoked);
}

TEST(Ownership, a_cooperative_drain_replays_nothing) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 4; }));
  for (const auto& s : a.held()) {
    a.lanes[s] = SplitProgress{42, "tail-" + s};  // the lane's final progress at drain time
  }
  Node& b = fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && !b.held().empty(); }));
  for (const auto& g : b.all<SplitGranted>()) {
    EXPECT_EQ(g.progress.watermark, 42u) << g.spec.id;  // resumes exactly where a stopped
    EXPECT_EQ(g.progress.state, "tail-" + g.spec.id);
    EXPECT_EQ(fleet.split_record(g.spec.id).attempts, 0u);  // graceful: no attempt consumed
  }
  EXPECT_EQ(a.count<SplitLost>(), 0u);
}

void forced_revocation_case(LanePolicy policy, std::chrono::milliseconds max_wait) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 4; }));
  for (const auto& s : a.held()) {
    ASSERT_TRUE(a.coord->commit(s, SplitProgress{7, "committed"}).durable());
    a.lanes[s] = SplitProgress{9, "uncommitted-tail"};  // emitted but never committed
  }
  a.policy = policy;
  Node& b = fleet.add("b");
  const auto started = fleet.clock.now();
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && !b.held().empty(); }, 30s));
  EXPECT_LE(fleet.clock.now() - started, max_wait);
  auto lost = a.all<SplitLost>();
  ASSERT_FALSE(lost.empty());
  for (const auto& l : lost) EXPECT_EQ(l.reason, LossReason::revoked);
  for (const auto& g : b.all<SplitGranted>()) {
    // The uncommitted tail (7..9) replays under b: at most one commit interval.
    EXPECT_EQ(g.progress.watermark, 7u);
    EXPECT_EQ(fleet.split_record(g.spec.id).attempts, 0u);  // forced, but the owner was alive
  }
}

TEST(Ownership, a_declined_drain_is_forced_at_once_and_replays_at_most_one_commit_interval) {
  LanePolicy p;
  p.decline = true;
  forced_revocation_case(p, 500ms);
}

TEST(Ownership, a_timed_out_drain_is_forced_after_the_deadline_and_never_strands_the_split) {
  LanePolicy p;
  p.wedge = true;  // never answers the revocation
  forced_revocation_case(p, 1000ms + 500ms);
}

TEST(Ownership, a_revocation_once_begun_finishes_even_if_the_split_is_reassigned_back) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 4; }));
  a.policy.wedge = true;  // a drains slowly: it will not answer before the deadline
  Node& b = fleet.add("b");
  // Let the revocation start, then make b leave again before the drain ends.
  ASSERT_TRUE(fleet.run_until([&] { return a.count<RevokeRequested>() > 0; }, 5s));
  b.coord->shutdown();
  b.running = false;
  ASSERT_TRUE(
      fleet.run_until([&] { return a.held().size() == 4 && a.count<SplitLost>() > 0; }, 20s));
  // The drain finished (forced at its deadline) and a reclaimed the split afterwards.
  EXPECT_EQ(a.count<SplitLost>(), a.count<RevokeRequested>());
  EXPECT_EQ(union_held(fleet).size(), 4u);
}

TEST(Ownership, a_poison_split_is_quarantined_after_max_attempts_and_the_job_stalls) {
  auto planner = std::make_shared<TestPlanner>(make_splits(3, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a");
  Node& standby = fleet.add("s", [](CoordinatorConfig& c) { c.max_in_flight = 1; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  // Complete two splits; keep failing the third wherever it goes.
  bool stalled = fleet.run_until(
      [&] {
        for (Node* n : fleet.live()) {
          for (const auto& s : n->held()) {
            if (s == "s002") {
              n->coord->fail(s, "cannot parse\xff\xfe");  // not UTF-8: stored sanitised
            } else {
              n->coord->complete(s, SplitProgress{100, "done"});
            }
          }
        }
        return a.count<Stalled>() > 0 && standby.count<Stalled>() > 0;
      },
      60s);
  ASSERT_TRUE(stalled);
  auto rec = fleet.split_record("s002");
  EXPECT_EQ(rec.status, core::SplitStatus::quarantined);
  EXPECT_EQ(rec.attempts, 3u);  // max_attempts
  EXPECT_EQ(rec.last_error, "cannot parse??");
  auto st = a.all<Stalled>().front();
  EXPECT_EQ(st.completed, 2u);
  EXPECT_EQ(st.quarantined, 1u);
  for (Node* n : fleet.live()) EXPECT_EQ(n->count<AllComplete>(), 0u);
  std::size_t quarantined_events = 0;
  for (Node* n : fleet.live()) quarantined_events += n->count<SplitQuarantined>();
  EXPECT_EQ(quarantined_events, 1u);
}

TEST(Ownership, a_standby_that_never_owned_a_split_observes_completion) {
  auto planner = std::make_shared<TestPlanner>(make_splits(2, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.max_in_flight = 2; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 2; }));
  // The standby joins while the last splits finish: there is nothing left for it to own.
  Node& standby = fleet.add("standby");
  for (const auto& s : a.held()) ASSERT_TRUE(a.coord->complete(s, SplitProgress{1, ""}).durable());
  ASSERT_TRUE(fleet.run_until(
      [&] { return standby.count<AllComplete>() > 0 && a.count<AllComplete>() > 0; }, 20s));
  EXPECT_TRUE(standby.ever_granted.empty());
  EXPECT_EQ(fleet.plan_record()->verdict, core::Verdict::complete);
}

TEST(Ownership, no_assignment_record_means_nothing_is_claimed_and_nothing_given_up) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.max_in_flight = 2; });
  Node& w = fleet.add("w", [](CoordinatorConfig& c) { c.max_in_flight = 2; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  ASSERT_EQ(fleet.leader_id(), "a");
  ASSERT_EQ(w.held().size(), 2u);  // 2 splits stay queued: the fleet's lanes are full
  const auto w_before = w.held();

  // The leader stops publishing (paused, well inside its lease), and w's record is withdrawn.
  a.running = false;
  auto rec = fleet.mem->get(core::assign_key("w"));
  ASSERT_TRUE(fleet.mem->erase(core::assign_key("w"), rec->revision).ok);
  // A newcomer that has never seen a record joins while splits sit unleased in the store.
  Node& n = fleet.add("n");
  fleet.run_for(2s);
  EXPECT_TRUE(n.held().empty()) << "claimed without an assignment record";
  EXPECT_EQ(w.held(), w_before) << "gave work up without an assignment record";
  EXPECT_EQ(w.count<RevokeRequested>(), 0u);
  EXPECT_FALSE(n.member().assignment().has_value());
}

TEST(Ownership, a_leader_gap_leaves_every_member_holding_its_work) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  fleet.add("a");
  fleet.add("b");
  fleet.add("c");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  std::map<std::string, std::set<std::string>> before;
  for (Node* n : fleet.live()) before[n->id] = n->held();
  const std::string old_leader = fleet.leader_id();
  fleet.crash(old_leader);
  // During the gap (until the leader's session expires) the others keep everything.
  fleet.run_for(2500ms);
  for (Node* n : fleet.live()) {
    EXPECT_EQ(n->held(), before[n->id]) << n->id;
    EXPECT_EQ(n->count<RevokeRequested>(), 0u);
  }
  // A new leader is elected after one lease, with a higher term, and the fleet converges.
  ASSERT_TRUE(
      fleet.run_until([&] { return !fleet.leader_id().empty() && fleet.converged(); }, 30s));
  EXPECT_NE(fleet.leader_id(), old_leader);
  EXPECT_GE(fleet.plan_record()->term, 2u);
}

TEST(Ownership, a_store_outage_longer_than_a_lease_self_fences_owners_and_the_fleet_recovers) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a");
  Node& b = fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  std::map<std::string, std::uint64_t> committed;
  for (Node* n : fleet.live()) {
    for (const auto& s : n->held()) {
      ASSERT_TRUE(n->coord->commit(s, SplitProgress{11, "before-outage"}).durable());
      committed[s] = 11;
    }
  }
  // Every operation of both members fails for longer than a lease.
  a.store->fail_next(1'000'000);
  b.store->fail_next(1'000'000);
  fleet.run_for(4s);
  for (Node* n : fleet.live()) {
    EXPECT_TRUE(n->held().empty()) << n->id << " kept lanes without a session";
    for (const auto& l : n->all<SplitLost>()) EXPECT_EQ(l.reason, LossReason::starved);
  }
  a.store->clear_faults();
  b.store->clear_faults();
  ASSERT_TRUE(
      fleet.run_until([&] { return fleet.converged() && union_held(fleet).size() == 4; }, 30s));
  for (const auto& [s, w] : committed) {
    EXPECT_EQ(fleet.split_record(s).progress.watermark, w) << s << ": progress lost";
    // Nobody crashed: a self-fenced member reclaiming its own splits is not poison evidence.
    // (A split that moved to the other member while its owner was starved counts one attempt.)
    EXPECT_LE(fleet.split_record(s).attempts, 1u) << s;
  }
}

TEST(Ownership, garbage_in_any_key_is_reported_and_does_not_crash_a_member) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  fleet.add("a");
  fleet.add("b");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  // Garbage under every prefix the members read, plus corrupt records of real keys.
  fleet.mem->create("member.junk", "{not json");
  fleet.mem->create("lease.junk", "\x01\x02\x03");
  fleet.mem->create("assign.junk", "[]");
  fleet.mem->create("split.junk", R"({"v":99})");
  fleet.mem->create("cordon.junk", "null");
  fleet.mem->create("spec.junk", "");
  fleet.mem->create("job.unknown", "garbage");
  auto spec = fleet.mem->get(core::spec_key("s000"));
  fleet.mem->update(core::spec_key("s000"), "corrupted", spec->revision);
  fleet.run_for(10s);
  for (Node* n : fleet.live()) {
    EXPECT_FALSE(n->member().stopped()) << n->id;
    EXPECT_EQ(n->count<Fatal>(), 0u);
  }
  // Only the leader watches member.*, lease.*, assign.*, split.* and cordon.* (a worker follows
  // its own keys), so it is the one that reads and counts the garbage.
  const std::string leader = fleet.leader_id();
  ASSERT_FALSE(leader.empty());
  EXPECT_GE(fleet.metrics->snapshot()
                .counter("etl_coordination_unreadable_records_total", {{"instance", leader}})
                .value_or(0),
            3u)
      << leader << " did not count the garbage it read";
  EXPECT_TRUE(fleet.converged());
}

TEST(Ownership, the_leader_dies_mid_plan_and_the_successor_term_fences_the_old_publish) {
  auto planner = std::make_shared<TestPlanner>(make_splits(40, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.bulk_ops_per_step = 10; });
  Node& b = fleet.add("b");
  // Let a win the election and seed a few splits, then freeze it mid-plan.
  ASSERT_TRUE(fleet.run_until([&] { return a.coord->is_leader() && fleet.mem->size() > 12; }, 5s));
  ASSERT_FALSE(fleet.plan_record()->planned);
  a.running = false;  // a is paused mid-plan (a zombie leader)
  ASSERT_TRUE(fleet.run_until([&] { return b.coord->is_leader(); }, 20s));
  const std::uint64_t old_term = 1;
  EXPECT_GT(fleet.plan_record()->term, old_term);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.plan_record()->planned; }, 20s));
  // The deposed leader's late writes: a plan header CAS and an assignment record at its old term.
  auto plan = fleet.mem->get(core::kPlanKey);
  core::PlanRecord stale = core::decode_plan(core::kPlanKey, plan->value);
  stale.term = old_term;
  stale.split_count = 1;
  auto res = a.store->update(core::kPlanKey, core::encode(stale), 1 /* what a saw */);
  EXPECT_FALSE(res.ok);  // the plan CAS is the leader fence
  core::AssignmentRecord bogus{"b", old_term, {"s000", "s001"}};
  auto cur = fleet.mem->get(core::assign_key("b"));
  ASSERT_TRUE(cur.has_value());
  ASSERT_TRUE(fleet.mem->update(core::assign_key("b"), core::encode(bogus), cur->revision).ok);
  // b ignores a record below the plan's term and the leader republishes at its term.
  ASSERT_TRUE(fleet.run_until(
      [&] {
        auto e = fleet.mem->get(core::assign_key("b"));
        return e && core::decode_assignment(core::assign_key("b"), e->value).term > old_term &&
               fleet.converged();
      },
      10s));
  EXPECT_EQ(b.count<Fatal>(), 0u);
}

// A write of the leader's own term that it did not publish (its own unknown-outcome write
// landing late, after it had decided otherwise; sim bug 13) puts a split on a second member's
// list. Nothing else changes, so only the record itself can tell the leader to republish.
TEST(Ownership, an_assignment_record_the_leader_did_not_publish_is_republished) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  // Free lanes would draw split requests, which are publishes too (dynamic_split_test.cpp).
  for (const char* id : {"a", "b", "c"}) {
    fleet.add(id, [](CoordinatorConfig& c) { c.dynamic_splitting = false; });
  }
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  fleet.run_for(5s);  // quiet: the leader has nothing left to publish
  ASSERT_TRUE(fleet.converged());
  const std::string leader = fleet.leader_id();
  const std::uint64_t quiet_publishes = fleet.node(leader).member().publishes();
  fleet.run_for(5s);
  ASSERT_EQ(fleet.node(leader).member().publishes(), quiet_publishes);
  std::string m;
  std::string other;
  for (const char* id : {"a", "b", "c"}) {
    if (id == leader || fleet.node(id).held().empty()) continue;
    if (m.empty()) {
      m = id;
    } else {
      other = id;
    }
  }
  if (other.empty()) other = leader;
  ASSERT_FALSE(m.empty());
  ASSERT_FALSE(fleet.node(other).held().empty());
  const std::string key = core::assign_key(m);
  auto cur = fleet.mem->get(key);
  ASSERT_TRUE(cur.has_value());
  core::AssignmentRecord late = core::decode_assignment(key, cur->value);
  // Same term, one split of `other` added.
  late.splits.push_back(*fleet.node(other).held().begin());
  std::sort(late.splits.begin(), late.splits.end());
  ASSERT_TRUE(fleet.mem->update(key, core::encode(late), cur->revision).ok);

  // The leader republishes (it may keep the split where the stray record put it: that record is
  // now the split's previous assignee), and no split stays on two lists.
  auto on_one_list_each = [&] {
    std::map<std::string, int> lists;
    for (const Entry& e : fleet.mem->list(core::kAssignPrefix)) {
      for (const auto& split : core::decode_assignment(e.key, e.value).splits) ++lists[split];
    }
    return std::all_of(lists.begin(), lists.end(), [](const auto& kv) { return kv.second == 1; });
  };
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && on_one_list_each(); }, 10s));
  EXPECT_EQ(fleet.node(m).count<Fatal>(), 0u);
}

}  // namespace
}  // namespace etlc::testing

namespace etlc::testing {
namespace {

TEST(Ownership, an_unreadable_spec_blocks_only_its_own_split) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.max_in_flight = 1; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 1; }));
  // Corrupt the spec of every split a does not hold, then let a newcomer claim them.
  std::string broken;
  for (const auto& s : {"s000", "s001", "s002", "s003"}) {
    if (!a.held().count(s)) {
      broken = s;
      break;
    }
  }
  auto spec = fleet.mem->get(core::spec_key(broken));
  ASSERT_TRUE(fleet.mem->update(core::spec_key(broken), "{garbage", spec->revision).ok);
  Node& b = fleet.add("b", [](CoordinatorConfig& c) { c.max_in_flight = 8; });
  ASSERT_TRUE(fleet.run_until([&] { return b.held().size() == 2; }, 10s));
  fleet.run_for(5s);
  EXPECT_EQ(b.held().size(), 2u);
  EXPECT_FALSE(b.held().count(broken));
  EXPECT_EQ(b.count<Fatal>(), 0u);
}

TEST(Ownership, a_deleted_split_record_is_retryable_until_seen_absent_three_times_then_fenced) {
  auto planner = std::make_shared<TestPlanner>(make_splits(2, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a");
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 2; }));
  const std::string split = *a.held().begin();
  // An operator deletes the record under the owner. One absent read may be a stale replica
  // (a write of ours may have landed), so the first calls are retryable and write nothing.
  auto rec = fleet.mem->get(core::split_key(split));
  ASSERT_TRUE(rec);
  ASSERT_TRUE(fleet.mem->erase(core::split_key(split), rec->revision).ok);
  EXPECT_EQ(a.coord->commit(split, SplitProgress{3, "x"}).status, CommitStatus::retryable);
  EXPECT_EQ(a.coord->commit(split, SplitProgress{3, "x"}).status, CommitStatus::retryable);
  EXPECT_FALSE(fleet.mem->get(core::split_key(split)));
  EXPECT_EQ(a.coord->commit(split, SplitProgress{3, "x"}).status, CommitStatus::fenced);
  EXPECT_FALSE(fleet.mem->get(core::split_key(split)));  // nothing recreated it
  EXPECT_EQ(a.count<Fatal>(), 0u);
}

// Issue 39: the orphan decision rested on one record read. A claimer waiting on a live holder's
// lease reads the record after a lease; a read that does not name the holder (stale, or taken
// while the holder's claim CAS was in flight) removed the holder's lease under it. The read must
// be the record's present: a no-op CAS at its revision proves it, and this read fails it.
TEST(Ownership, a_live_holders_lease_survives_a_record_read_that_does_not_name_it) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(2, 10)));
  Scripts scripts;
  script_members(fleet, scripts);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) {
    c.rebalance_delay = 0ms;
    c.drain_deadline = 60s;  // its drain outlasts the test: the lease stays live and unchanged
  });
  // The record each claim CAS of a's was sent on: what a read taken while it was in flight saw.
  std::map<std::string, Entry> before_claim;
  for (const std::string id : {"s000", "s001"}) {
    const std::string k = core::split_key(id);
    ScriptedStore::Rule r = ScriptedStore::on(OpKind::update, k, ScriptedStore::Fault::before);
    r.before = [&before_claim, &fleet, k] { before_claim.emplace(k, *fleet.mem->get(k)); };
    scripts.at("a")->arm(r);
  }
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 2; }));
  ASSERT_EQ(before_claim.size(), 2u);
  a.policy.wedge = true;
  fleet.add("b", [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; });
  ASSERT_TRUE(fleet.run_until([&] { return a.count<RevokeRequested>() > 0; }));
  const std::string split = a.all<RevokeRequested>().front().split_id;
  const std::string key = core::split_key(split);
  const auto lease_before = fleet.mem->get(core::lease_key(split));
  ASSERT_TRUE(lease_before.has_value());

  // b's next read of the record answers what it was while a's claim CAS was in flight.
  ASSERT_FALSE(core::decode_split(key, before_claim.at(key).value).owner.has_value());
  ScriptedStore::Rule stale = ScriptedStore::on(OpKind::get, key, ScriptedStore::Fault::stale);
  stale.entry = before_claim.at(key);
  const int fired_before = scripts.at("b")->fired();
  scripts.at("b")->arm(stale);

  fleet.run_for(3 * Fleet::default_config("b").lease_duration);
  ASSERT_EQ(scripts.at("b")->fired(), fired_before + 1) << "b never judged the lease";
  const auto lease_after = fleet.mem->get(core::lease_key(split));
  ASSERT_TRUE(lease_after.has_value()) << "the live holder's lease was removed as an orphan";
  EXPECT_EQ(lease_after->revision, lease_before->revision);
  EXPECT_EQ(a.held().count(split), 1u);
  EXPECT_EQ(a.count<SplitLost>(), 0u);
  EXPECT_EQ(fleet.split_record(split).owner, "a");
}

}  // namespace
}  // namespace etlc::testing
