// JobAdmin over hand-written records in a MemoryStore: what status() and splits() derive from
// each record kind, and that garbage in any prefix is reported, never thrown.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <thread>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/admin.hpp"
#include "etlc/memory_store.hpp"

namespace etlc {
namespace {

using namespace std::chrono_literals;

class AdminRecords : public ::testing::Test {
 protected:
  template <typename Rec>
  void put(const std::string& key, const Rec& rec) {
    ASSERT_TRUE(store.create(key, core::encode(rec)).ok) << key;
  }
  void put_raw(const std::string& key, const std::string& bytes) {
    ASSERT_TRUE(store.create(key, bytes).ok) << key;
  }
  void member(const std::string& id, std::uint32_t lanes, std::uint64_t counter = 0,
              const std::string& fingerprint = "fp") {
    put(core::member_key(id),
        core::MemberRecord{id, "nonce-" + id, fingerprint, lanes, counter, 3000});
  }
  void split(const std::string& id, std::uint64_t weight,
             core::SplitStatus status = core::SplitStatus::runnable,
             std::optional<std::string> owner = std::nullopt,
             std::optional<std::uint64_t> done = std::nullopt) {
    core::SplitRecord r;
    r.id = id;
    r.epoch = owner ? 1 : 0;
    r.status = status;
    r.owner = owner;
    if (owner) r.owner_nonce = "nonce-" + *owner;
    r.weight = weight;
    r.progress.watermark = weight * 10;
    r.progress.done = done;
    put(core::split_key(id), r);
  }
  void lease(const std::string& split_id, const std::string& owner) {
    put(core::lease_key(split_id), core::LeaseRecord{split_id, owner, "nonce-" + owner, 1});
  }
  void plan(std::uint64_t term = 1) {
    core::PlanRecord p;
    p.fingerprint = "fp";
    p.term = term;
    p.finality = core::Finality::final;
    p.planned = true;
    p.split_count = 4;
    p.completed = 1;
    put(std::string(core::kPlanKey), p);
  }

  MemoryStore store;
  ManualClock clock;
};

const MemberStatus* find_member(const JobStatus& st, const std::string& id) {
  for (const auto& m : st.members) {
    if (m.instance == id) return &m;
  }
  return nullptr;
}

TEST_F(AdminRecords, an_empty_store_holds_no_job) {
  JobAdmin admin(store, clock);
  EXPECT_FALSE(admin.job_exists());
  JobStatus st = admin.status();
  EXPECT_FALSE(st.found);
  EXPECT_FALSE(st.leader.has_value());
  EXPECT_FALSE(st.plan.has_value());
  EXPECT_TRUE(st.members.empty());
  EXPECT_EQ(st.splits.total, 0u);
  EXPECT_EQ(st.balance.max_over_mean, 0.0);
}

TEST_F(AdminRecords, a_session_record_alone_makes_a_job_exist) {
  member("a", 4);
  JobAdmin admin(store, clock);
  EXPECT_TRUE(admin.job_exists());
  EXPECT_TRUE(admin.status().found);
}

TEST_F(AdminRecords, status_derives_holdings_drains_moves_and_balance_from_the_records) {
  plan(1);
  put(std::string(core::kLeaderKey), core::LeaderRecord{"a", "nonce-a", 1});
  member("a", 4, 30);
  member("b", 4, 3);
  split("s1", 30, core::SplitStatus::runnable, "a");
  split("s2", 10, core::SplitStatus::runnable, "b");
  split("s3", 10, core::SplitStatus::runnable, "a");
  split("s4", 5, core::SplitStatus::completed);
  lease("s1", "a");
  lease("s2", "b");
  lease("s3", "a");
  // The leader moved s3 from a to b: a still holds it (draining), b waits for the lease.
  put(core::assign_key("a"), core::AssignmentRecord{"a", 1, {"s1"}});
  put(core::assign_key("b"), core::AssignmentRecord{"b", 1, {"s2", "s3"}});

  JobAdmin admin(store, clock);
  JobStatus st = admin.status();
  ASSERT_TRUE(st.found);
  ASSERT_TRUE(st.leader.has_value());
  EXPECT_EQ(st.leader->instance, "a");
  EXPECT_EQ(st.leader->term, 1u);
  EXPECT_TRUE(st.leader->has_session);
  ASSERT_TRUE(st.plan.has_value());
  EXPECT_EQ(st.plan->finality, PlanFinality::final);
  EXPECT_EQ(st.plan->planned_splits, 4u);
  EXPECT_EQ(st.plan->completed, 1u);
  EXPECT_EQ(st.plan->verdict, PlanVerdict::running);

  EXPECT_EQ(st.splits.total, 4u);
  EXPECT_EQ(st.splits.runnable, 3u);
  EXPECT_EQ(st.splits.owned, 3u);
  EXPECT_EQ(st.splits.completed, 1u);
  EXPECT_EQ(st.splits.total_weight, 55u);

  ASSERT_EQ(st.members.size(), 2u);
  const MemberStatus* a = find_member(st, "a");
  const MemberStatus* b = find_member(st, "b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->held, 2u);
  EXPECT_EQ(a->assigned, std::optional<std::uint64_t>(1));
  EXPECT_EQ(a->draining, 1u);
  EXPECT_EQ(a->weight_held, 40u);
  EXPECT_DOUBLE_EQ(a->weight_share, 0.8);
  EXPECT_EQ(b->held, 1u);
  EXPECT_EQ(b->assigned, std::optional<std::uint64_t>(2));
  EXPECT_EQ(b->draining, 0u);
  EXPECT_DOUBLE_EQ(b->weight_share, 0.2);
  EXPECT_EQ(a->lane_budget, 4u);
  EXPECT_EQ(a->renewals, 30u);
  EXPECT_EQ(a->session_age_estimate, 30'000ms);  // 30 renewals, one per lease/3 = 1 s

  ASSERT_EQ(st.moves_total, 1u);
  ASSERT_EQ(st.moves.size(), 1u);
  EXPECT_EQ(st.moves[0].split, "s3");
  EXPECT_EQ(st.moves[0].from, "a");
  EXPECT_EQ(st.moves[0].to, "b");

  EXPECT_EQ(st.balance.members, 2u);
  EXPECT_EQ(st.balance.max_load, 40u);
  EXPECT_DOUBLE_EQ(st.balance.mean_load, 25.0);
  EXPECT_DOUBLE_EQ(st.balance.max_over_mean, 1.6);
  EXPECT_EQ(st.garbage_total, 0u);
}

TEST_F(AdminRecords, cordoned_departed_and_foreign_members_have_no_lanes) {
  plan(1);
  member("a", 4);
  member("c", 4);
  member("f", 4, 0, "another-fingerprint");
  split("s1", 7, core::SplitStatus::runnable, "gone");
  lease("s1", "gone");  // its owner's session is gone
  put(core::cordon_key("c"), core::CordonRecord{"c", "disk swap"});

  JobAdmin admin(store, clock);
  JobStatus st = admin.status();
  ASSERT_EQ(st.members.size(), 4u);
  const MemberStatus* c = find_member(st, "c");
  const MemberStatus* f = find_member(st, "f");
  const MemberStatus* gone = find_member(st, "gone");
  ASSERT_TRUE(c && f && gone);
  EXPECT_TRUE(c->cordoned);
  EXPECT_EQ(c->cordon_reason, "disk swap");
  EXPECT_EQ(c->max_in_flight, 4u);
  EXPECT_EQ(c->lane_budget, 0u);
  EXPECT_FALSE(f->fingerprint_matches);
  EXPECT_EQ(f->lane_budget, 0u);
  EXPECT_FALSE(gone->has_session);
  EXPECT_EQ(gone->held, 1u);
  EXPECT_EQ(gone->weight_held, 7u);
  EXPECT_FALSE(gone->assigned.has_value());
  // Only "a" has lanes; it holds nothing.
  EXPECT_EQ(st.balance.members, 1u);
  EXPECT_EQ(st.balance.max_over_mean, 0.0);
}

TEST_F(AdminRecords, an_assignment_below_the_plan_term_counts_as_none_for_drains_and_moves) {
  plan(5);
  member("a", 4);
  member("b", 4);
  split("s1", 1, core::SplitStatus::runnable, "a");
  lease("s1", "a");
  put(core::assign_key("a"), core::AssignmentRecord{"a", 4, {}});      // a deposed leader's
  put(core::assign_key("b"), core::AssignmentRecord{"b", 4, {"s1"}});  // likewise
  JobAdmin admin(store, clock);
  JobStatus st = admin.status();
  EXPECT_EQ(find_member(st, "a")->draining, 0u);
  EXPECT_EQ(st.moves_total, 0u);
  EXPECT_EQ(find_member(st, "a")->assignment_term, 4u);
}

TEST_F(AdminRecords, observation_durations_follow_the_clock_and_reset_on_change) {
  put(std::string(core::kLeaderKey), core::LeaderRecord{"a", "nonce-a", 1});
  member("a", 4);
  JobAdmin admin(store, clock);
  JobStatus first = admin.status();
  EXPECT_EQ(first.leader->observed_for, 0ms);
  EXPECT_EQ(first.members[0].observed_for, 0ms);
  EXPECT_FALSE(first.members[0].unchanged_for.has_value());

  clock.advance(1500ms);
  JobStatus second = admin.status();
  EXPECT_EQ(second.leader->observed_for, 1500ms);
  EXPECT_EQ(second.members[0].observed_for, 1500ms);
  EXPECT_EQ(second.members[0].unchanged_for, std::optional(1500ms));

  // A renewal moves the record: unchanged_for restarts, observed_for does not.
  auto cur = store.get(core::member_key("a"));
  ASSERT_TRUE(store
                  .update(core::member_key("a"),
                          core::encode(core::MemberRecord{"a", "nonce-a", "fp", 4, 1, 3000}),
                          cur->revision)
                  .ok);
  clock.advance(200ms);
  JobStatus third = admin.status();
  EXPECT_EQ(third.members[0].observed_for, 1700ms);
  EXPECT_EQ(third.members[0].unchanged_for, std::optional(0ms));

  // A new leader term is a new leader.
  auto l = store.get(core::kLeaderKey);
  ASSERT_TRUE(store
                  .update(core::kLeaderKey, core::encode(core::LeaderRecord{"a", "nonce-a", 2}),
                          l->revision)
                  .ok);
  clock.advance(100ms);
  EXPECT_EQ(admin.status().leader->observed_for, 0ms);
}

// In the progress tests below: s3's done is above its weight (all of it, never more); a
// quarantined split's weight is neither done nor remaining.
TEST_F(AdminRecords, progress_comes_from_job_progress_with_its_rate_and_eta) {
  plan(1);
  member("a", 4);
  member("b", 4);
  split("s1", 40, core::SplitStatus::runnable, "a", 30);
  split("s2", 20, core::SplitStatus::runnable, "b", 2);
  split("s3", 10, core::SplitStatus::runnable, "b", 99);
  split("s4", 15, core::SplitStatus::runnable, std::nullopt, 5);
  split("s5", 8, core::SplitStatus::completed);
  split("s6", 7, core::SplitStatus::quarantined, std::nullopt, 3);
  // The leader's record lags the split records: status shows it as the job's totals.
  put(std::string(core::kProgressKey), core::ProgressRecord{3, 100, 40, 50, 4});

  JobAdmin admin(store, clock);
  JobStatus st = admin.status();
  EXPECT_EQ(st.progress.source, ProgressSource::leader_record);
  EXPECT_EQ(st.progress.record, ProgressRecordState::ok);
  EXPECT_EQ(st.progress.term, 3u);
  EXPECT_EQ(st.progress.planned, 100u);
  EXPECT_EQ(st.progress.done, 40u);
  EXPECT_EQ(st.progress.remaining, 50u);
  EXPECT_EQ(st.progress.rate_per_s, std::optional<std::uint64_t>(4));
  EXPECT_DOUBLE_EQ(*st.progress.fraction_done(), 0.4);
  EXPECT_EQ(st.progress.eta(), std::optional<std::chrono::milliseconds>(12'500ms));
  // Per member, from the split records: weight - min(done, weight) of what it owns.
  EXPECT_EQ(find_member(st, "a")->weight_remaining, 10u);
  EXPECT_EQ(find_member(st, "b")->weight_remaining, 18u);
  EXPECT_EQ(st.unowned_remaining, 10u);
  EXPECT_EQ(st.garbage_total, 0u) << "job.progress is a key of the layout";
  EXPECT_EQ(admin.job_progress()->done, 40u);
}

TEST_F(AdminRecords, without_job_progress_status_counts_the_split_records_and_knows_no_rate) {
  plan(1);
  member("a", 4);
  split("s1", 40, core::SplitStatus::runnable, "a", 30);
  split("s2", 15, core::SplitStatus::runnable, std::nullopt, 5);
  split("s3", 8, core::SplitStatus::completed);
  split("s4", 7, core::SplitStatus::quarantined, std::nullopt, 3);
  // A split owned by a member that left no other record is still listed with what it owes.
  split("s5", 9, core::SplitStatus::runnable, "gone");

  JobAdmin admin(store, clock);
  JobStatus st = admin.status();
  EXPECT_EQ(st.progress.source, ProgressSource::split_records);
  EXPECT_EQ(st.progress.record, ProgressRecordState::absent);
  EXPECT_EQ(st.progress.planned, 79u);
  EXPECT_EQ(st.progress.done, 30u + 5u + 8u + 3u);
  EXPECT_EQ(st.progress.remaining, 10u + 10u + 9u);
  EXPECT_FALSE(st.progress.rate_per_s.has_value());
  EXPECT_FALSE(st.progress.eta().has_value());
  EXPECT_EQ(find_member(st, "a")->weight_remaining, 10u);
  ASSERT_NE(find_member(st, "gone"), nullptr);
  EXPECT_FALSE(find_member(st, "gone")->has_session);
  EXPECT_EQ(find_member(st, "gone")->weight_remaining, 9u);
  EXPECT_EQ(st.unowned_remaining, 10u);
  EXPECT_FALSE(admin.job_progress().has_value());
}

TEST_F(AdminRecords, an_unreadable_job_progress_is_reported_and_status_counts_instead) {
  plan(1);
  split("s1", 40, core::SplitStatus::runnable, std::nullopt, 10);
  put_raw(std::string(core::kProgressKey), R"({"v":1,"term":1,"planned":"lots"})");

  JobAdmin admin(store, clock);
  JobStatus st = admin.status();
  EXPECT_EQ(st.progress.source, ProgressSource::split_records);
  EXPECT_EQ(st.progress.record, ProgressRecordState::unreadable);
  EXPECT_EQ(st.progress.planned, 40u);
  EXPECT_EQ(st.progress.remaining, 30u);
  ASSERT_EQ(st.garbage_total, 1u);
  EXPECT_EQ(st.garbage[0].key, "job.progress");
  EXPECT_FALSE(st.garbage[0].error.empty());
  EXPECT_FALSE(admin.job_progress().has_value());
}

TEST_F(AdminRecords, a_job_progress_of_an_earlier_term_than_the_leader_is_stale_and_not_used) {
  plan(4);
  member("a", 4);
  put(std::string(core::kLeaderKey), core::LeaderRecord{"a", "nonce-a", 4});
  split("s1", 40, core::SplitStatus::runnable, "a", 30);
  put(std::string(core::kProgressKey), core::ProgressRecord{3, 40, 5, 35, 1});

  JobAdmin admin(store, clock);
  JobStatus st = admin.status();
  EXPECT_EQ(st.progress.source, ProgressSource::split_records);
  EXPECT_EQ(st.progress.record, ProgressRecordState::stale);
  EXPECT_EQ(st.progress.term, 3u);
  EXPECT_EQ(st.progress.done, 30u) << "counted, not the earlier leader's 5";
  EXPECT_FALSE(st.progress.rate_per_s.has_value());

  // Once the current leader writes it, it is used again.
  auto cur = store.get(core::kProgressKey);
  ASSERT_TRUE(store
                  .update(core::kProgressKey, core::encode(core::ProgressRecord{4, 40, 30, 10, 2}),
                          cur->revision)
                  .ok);
  st = admin.status();
  EXPECT_EQ(st.progress.record, ProgressRecordState::ok);
  EXPECT_EQ(st.progress.rate_per_s, std::optional<std::uint64_t>(2));
}

TEST(WeightProgress, eta_rounds_up_and_is_unknown_without_a_rate) {
  WeightProgress p;
  p.planned = 10;
  p.remaining = 10;
  EXPECT_FALSE(p.eta().has_value());
  p.rate_per_s = 0;
  EXPECT_FALSE(p.eta().has_value()) << "a stopped job has no ETA";
  p.rate_per_s = 3;
  EXPECT_EQ(p.eta(), std::optional<std::chrono::milliseconds>(3'334ms));
  p.remaining = 0;
  EXPECT_EQ(p.eta(), std::optional<std::chrono::milliseconds>(0ms));
  p.remaining = std::numeric_limits<std::uint64_t>::max();
  p.rate_per_s = 1;
  EXPECT_EQ(p.eta()->count(), std::numeric_limits<std::int64_t>::max()) << "saturates";
  EXPECT_DOUBLE_EQ(*p.fraction_done(), 0.0);
  p.planned = 0;
  EXPECT_FALSE(p.fraction_done().has_value());
}

TEST_F(AdminRecords, garbage_in_every_prefix_is_reported_and_the_rest_still_read) {
  plan(1);
  member("a", 4);
  split("s1", 3, core::SplitStatus::runnable, "a");
  lease("s1", "a");
  put_raw("job.unexpected", "{}");
  put_raw(std::string(core::kLeaderKey), "not json at all");
  put_raw("member.bad", "{\"v\":1");
  put_raw("lease.=ZZ", core::encode(core::LeaseRecord{"x", "a", "n", 1}));  // key not decodable
  put_raw("split.s2", "{\"v\":2}");
  put_raw("assign.a", core::encode(core::AssignmentRecord{"b", 1, {}}));  // id mismatch
  put_raw("cordon.c", "[1,2,3]");
  // A hostile but well-formed session: counters at the edge must not overflow anything.
  put(core::member_key("h"),
      core::MemberRecord{"h", "n", "fp", 4, ~std::uint64_t{0}, ~std::uint64_t{0}});

  JobAdmin admin(store, clock);
  JobStatus st;
  ASSERT_NO_THROW(st = admin.status());
  EXPECT_TRUE(st.found);
  EXPECT_FALSE(st.leader.has_value());  // unreadable leader record: reported, treated as absent
  EXPECT_EQ(st.garbage_total, 7u);
  std::vector<std::string> keys;
  for (const auto& g : st.garbage) {
    keys.push_back(g.key);
    EXPECT_FALSE(g.error.empty()) << g.key;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"assign.a", "cordon.c", "job.leader", "job.unexpected",
                                            "lease.=ZZ", "member.bad", "split.s2"}));
  const MemberStatus* a = find_member(st, "a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->held, 1u);
  EXPECT_FALSE(a->assigned.has_value());  // its assignment record was garbage
  const MemberStatus* h = find_member(st, "h");
  ASSERT_TRUE(h);
  EXPECT_GT(h->session_age_estimate.count(), 0);

  SplitListing listing;
  ASSERT_NO_THROW(listing = admin.splits());
  ASSERT_EQ(listing.rows.size(), 1u);
  EXPECT_EQ(listing.rows[0].id, "s1");
  EXPECT_EQ(listing.garbage_total, 2u);  // split.s2 and lease.=ZZ
}

// Specs are what a stalled split waits on, and a key outside every family is someone's
// mistake: status() lists both with their reasons (issue 18).
TEST_F(AdminRecords, unreadable_specs_and_keys_outside_the_layout_are_reported) {
  plan(1);
  put(core::spec_key("ok"), core::SpecRecord{SplitSpec{"ok", "d", 1}});
  put_raw(core::spec_key("bad"), "{\"v\":2}");
  put_raw("stray", "x");
  put_raw("other.thing", "{}");
  put_raw("etlc-probe.m1.probe", "probe-1-token");  // a store's own scratch key: in the layout
  JobAdmin admin(store, clock);
  const JobStatus st = admin.status();
  std::vector<std::string> keys;
  for (const auto& g : st.garbage) keys.push_back(g.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"other.thing", "spec.bad", "stray"}));
  for (const auto& g : st.garbage) {
    if (g.key != "spec.bad") {
      EXPECT_EQ(g.error, "not a key of the job layout");
    }
  }
}

TEST_F(AdminRecords, repair_rebuilds_an_unreadable_split_record_from_its_spec_above_every_epoch) {
  plan(7);
  put(core::spec_key("s1"), core::SpecRecord{SplitSpec{"s1", "d", 42}});
  put_raw(core::split_key("s1"), "{garbage");
  JobAdmin admin(store, clock);
  EXPECT_EQ(admin.requeue(std::vector<std::string>{"s1"})[0].detail.find("etlc repair s1") !=
                std::string::npos,
            true);
  const RepairResult r = admin.repair("s1", 0ms);
  ASSERT_EQ(r.outcome, RepairOutcome::rebuilt) << r.detail;
  const auto rec =
      core::decode_split(core::split_key("s1"), store.get(core::split_key("s1"))->value);
  EXPECT_EQ(rec.status, core::SplitStatus::runnable);
  EXPECT_EQ(rec.weight, 42u);
  EXPECT_EQ(rec.progress.watermark, 0u);
  EXPECT_FALSE(rec.owner.has_value());
  EXPECT_EQ(rec.epoch, r.epoch_after);
  EXPECT_GT(rec.epoch, std::uint64_t{7} << 32) << "above every epoch of the plan's term";
  EXPECT_EQ(admin.repair("s1", 0ms).outcome, RepairOutcome::readable);
  // A missing record is rebuilt the same way.
  ASSERT_TRUE(store.erase(core::split_key("s1"), store.get(core::split_key("s1"))->revision).ok);
  EXPECT_EQ(admin.repair("s1", 0ms).outcome, RepairOutcome::rebuilt);
}

TEST_F(AdminRecords, repair_refuses_without_a_readable_spec_and_while_a_live_member_holds_it) {
  plan(1);
  put_raw(core::split_key("s1"), "{garbage");
  JobAdmin admin(store, clock);
  EXPECT_EQ(admin.repair("s1", 0ms).outcome, RepairOutcome::no_spec);
  put_raw(core::spec_key("s1"), "{also garbage");
  const RepairResult unreadable_spec = admin.repair("s1", 0ms);
  EXPECT_EQ(unreadable_spec.outcome, RepairOutcome::no_spec);
  EXPECT_NE(unreadable_spec.detail.find("spec.s1"), std::string::npos) << unreadable_spec.detail;

  // A lease of a member whose session keeps renewing: held.
  put_raw(core::split_key("s2"), "{garbage");
  put(core::spec_key("s2"), core::SpecRecord{SplitSpec{"s2", "d", 1}});
  member("a", 2);
  lease("s2", "a");
  std::atomic<bool> stop{false};
  std::thread renew([&] {
    for (std::uint64_t c = 1; !stop; ++c) {
      auto cur = store.get(core::member_key("a"));
      store.update(core::member_key("a"),
                   core::encode(core::MemberRecord{"a", "nonce-a", "fp", 2, c, 3000}),
                   cur->revision);
      std::this_thread::sleep_for(5ms);
    }
  });
  const RepairResult held = admin.repair("s2", 2000ms);
  stop = true;
  renew.join();
  EXPECT_EQ(held.outcome, RepairOutcome::held) << held.detail;
  EXPECT_EQ(held.holder, "a");
}

TEST_F(AdminRecords, garbage_reports_are_bounded_but_counted) {
  for (std::size_t i = 0; i < kMaxGarbageReported + 20; ++i) {
    put_raw("split.g" + std::to_string(1000 + i), "garbage");
  }
  JobAdmin admin(store, clock);
  SplitListing l = admin.splits();
  EXPECT_EQ(l.garbage_total, kMaxGarbageReported + 20);
  EXPECT_EQ(l.garbage.size(), kMaxGarbageReported);
  EXPECT_EQ(l.garbage.front().key, "split.g1000");
}

TEST_F(AdminRecords, splits_filter_by_status_and_owner_and_limit_after_counting) {
  split("a1", 1, core::SplitStatus::runnable, "x");
  split("a2", 2, core::SplitStatus::runnable, "y");
  split("a3", 3, core::SplitStatus::quarantined);
  split("a4", 4, core::SplitStatus::runnable, "x");
  split("a5", 5, core::SplitStatus::completed);
  lease("a1", "x");

  JobAdmin admin(store, clock);
  SplitListing all = admin.splits();
  ASSERT_EQ(all.rows.size(), 5u);
  EXPECT_EQ(all.rows[0].id, "a1");
  EXPECT_EQ(all.rows[0].lease_owner, std::optional<std::string>("x"));
  EXPECT_EQ(all.rows[1].lease_owner, std::nullopt);
  EXPECT_EQ(all.rows[2].status, SplitState::quarantined);
  EXPECT_EQ(all.rows[4].watermark, 50u);

  SplitFilter f;
  f.owner = "x";
  SplitListing by_owner = admin.splits(f);
  ASSERT_EQ(by_owner.rows.size(), 2u);
  EXPECT_EQ(by_owner.rows[1].id, "a4");

  f = {};
  f.status = SplitState::runnable;
  f.limit = 2;
  SplitListing limited = admin.splits(f);
  EXPECT_EQ(limited.matched, 3u);
  ASSERT_EQ(limited.rows.size(), 2u);
  EXPECT_EQ(limited.rows[1].id, "a2");

  f = {};
  f.status = SplitState::quarantined;
  EXPECT_EQ(admin.splits(f).rows.at(0).id, "a3");
}

TEST_F(AdminRecords, state_names_round_trip) {
  for (SplitState s : {SplitState::runnable, SplitState::completed, SplitState::quarantined}) {
    EXPECT_EQ(parse_split_state(to_string(s)), s);
  }
  EXPECT_EQ(parse_split_state("Runnable"), std::nullopt);
  EXPECT_EQ(finality_name(PlanFinality::open), "open");
  EXPECT_EQ(to_string(PlanVerdict::stalled), "stalled");
  // The words etlc status --json carries for progress (docs/operations.md).
  EXPECT_EQ(to_string(ProgressSource::leader_record), "job.progress");
  EXPECT_EQ(to_string(ProgressSource::split_records), "split_records");
  EXPECT_EQ(to_string(ProgressRecordState::stale), "stale");
  EXPECT_EQ(to_string(ProgressRecordState::unreadable), "unreadable");
}

}  // namespace
}  // namespace etlc

namespace etlc {
namespace {

// Dynamic splitting: splits() names each residual's parent and each parent's residual count;
// status() counts residuals and the pending ones among them.
TEST_F(AdminRecords, residuals_show_their_parent_and_status_counts_them) {
  core::SplitRecord parent;
  parent.id = "big";
  parent.epoch = 2;
  parent.weight = 600;
  parent.children = {"big~2.1", "big~2.2"};
  put(core::split_key("big"), parent);
  core::SplitRecord runnable;
  runnable.id = "big~2.1";
  runnable.weight = 300;
  runnable.cut_from = core::SplitOrigin{"big", 2};
  put(core::split_key("big~2.1"), runnable);
  core::SplitRecord pending = runnable;
  pending.id = "big~2.2";
  pending.status = core::SplitStatus::pending;
  put(core::split_key("big~2.2"), pending);
  split("small", 10);
  JobAdmin admin(store, clock);
  const SplitListing l = admin.splits();
  ASSERT_EQ(l.rows.size(), 4u);
  std::map<std::string, SplitRow> rows;
  for (const SplitRow& r : l.rows) rows[r.id] = r;
  EXPECT_EQ(rows["big"].children, 2u);
  EXPECT_FALSE(rows["big"].parent);
  EXPECT_EQ(rows["big~2.1"].parent, std::optional<std::string>("big"));
  EXPECT_EQ(rows["big~2.2"].status, SplitState::pending);
  EXPECT_EQ(rows["small"].children, 0u);
  SplitFilter only_pending;
  only_pending.status = SplitState::pending;
  EXPECT_EQ(admin.splits(only_pending).matched, 1u);
  const JobStatus st = admin.status();
  EXPECT_EQ(st.splits.residuals, 2u);
  EXPECT_EQ(st.splits.pending, 1u);
  EXPECT_EQ(st.splits.runnable, 3u);
}

}  // namespace
}  // namespace etlc
