// No state of the store stalls a job (docs/architecture.md, "No store state stalls a job"): for
// every record family, garbage, a foreign version, a record of the wrong kind, an oversized value
// or a delete ends with the job complete, or in its named end state. And a lone member survives a
// store outage longer than its lease.
#include <gtest/gtest.h>

#include "core/repair_rules.hpp"
#include "runtime/fleet.hpp"
#include "runtime/scripted_store.hpp"

namespace etlc::testing {
namespace {

struct BadValue {
  const char* name;
  std::string bytes;
};

// Values no member can read, of the kinds a stray writer leaves.
std::vector<BadValue> bad_values() {
  return {
      {"garbage", "{not json"},
      {"foreign_version", R"({"v":2,"anything":true})"},
      {"wrong_kind", core::encode(core::CordonRecord{"x", "a cordon where it does not belong"})},
      {"oversized", std::string(kMaxValueBytes, 'x')},
  };
}

std::optional<core::PlanRecord> readable_plan(Fleet& fleet) {
  auto e = fleet.mem->get(core::kPlanKey);
  if (!e) return std::nullopt;
  try {
    return core::decode_plan(core::kPlanKey, e->value);
  } catch (const core::RecordError&) {
    return std::nullopt;
  }
}

std::optional<core::SplitRecord> readable_split(Fleet& fleet, const std::string& id) {
  auto e = fleet.mem->get(core::split_key(id));
  if (!e) return std::nullopt;
  try {
    return core::decode_split(core::split_key(id), e->value);
  } catch (const core::RecordError&) {
    return std::nullopt;
  }
}

bool verdict_is(Fleet& fleet, core::Verdict v) {
  auto p = readable_plan(fleet);
  return p && p->verdict == v;
}

// Every running member finishes the splits it holds (their lanes reached the end).
void complete_held(Fleet& fleet) {
  for (Node* n : fleet.live()) {
    if (!n->running) continue;
    for (const auto& s : n->held()) n->coord->complete(s, SplitProgress{10, "done"});
  }
}

bool runs_to_completion(Fleet& fleet, Clock::duration bound = 60s) {
  return fleet.run_until(
      [&] {
        complete_held(fleet);
        return verdict_is(fleet, core::Verdict::complete);
      },
      bound);
}

std::size_t fatals(Fleet& fleet) {
  std::size_t n = 0;
  for (Node* node : fleet.live()) n += node->count<Fatal>();
  return n;
}

void overwrite(Fleet& fleet, std::string_view key, const std::string& bytes) {
  auto cur = fleet.mem->get(key);
  ASSERT_TRUE(cur.has_value()) << key;
  ASSERT_TRUE(fleet.mem->update(key, bytes, cur->revision).ok) << key;
}

void erase(Fleet& fleet, std::string_view key) {
  auto cur = fleet.mem->get(key);
  ASSERT_TRUE(cur.has_value()) << key;
  ASSERT_TRUE(fleet.mem->erase(key, cur->revision).ok) << key;
}

// --- a lone member -------------------------------------------------------------------------------

TEST(LoneMember, recovers_from_a_store_outage_longer_than_its_lease_and_completes_the_job) {
  auto planner = std::make_shared<TestPlanner>(make_splits(8, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.max_in_flight = 2; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 2; }));
  const std::string old_nonce = a.member().nonce();
  a.store->fail_next(1'000'000);  // the store pauses for longer than the lease (3 s)
  fleet.run_for(4s);
  ASSERT_TRUE(a.held().empty());
  a.store->clear_faults();
  // It rejoins under a new nonce; the leader record still names its old session, which only it
  // can tell is dead. It must take leadership back and assign the six splits nobody holds.
  ASSERT_TRUE(runs_to_completion(fleet));
  EXPECT_NE(a.member().nonce(), old_nonce);
  EXPECT_TRUE(a.coord->is_leader());
  EXPECT_EQ(fatals(fleet), 0u);
}

// --- job.plan ------------------------------------------------------------------------------------

class PlanDamage : public ::testing::TestWithParam<std::size_t> {};

TEST_P(PlanDamage, the_leader_rewrites_an_unreadable_plan_at_its_term_and_the_job_completes) {
  const BadValue bad = bad_values()[GetParam()];
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c"}) fleet.add(id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::uint64_t term = readable_plan(fleet)->term;
  overwrite(fleet, core::kPlanKey, bad.bytes);
  ASSERT_TRUE(fleet.run_until([&] { return readable_plan(fleet).has_value(); }, 5s)) << bad.name;
  EXPECT_EQ(readable_plan(fleet)->term, term);
  EXPECT_TRUE(readable_plan(fleet)->planned);
  ASSERT_TRUE(runs_to_completion(fleet)) << bad.name;
  EXPECT_EQ(fatals(fleet), 0u);
}

INSTANTIATE_TEST_SUITE_P(BadValues, PlanDamage, ::testing::Range<std::size_t>(0, 4),
                         [](const auto& p) { return bad_values()[p.param].name; });

TEST(PlanDeleted, the_leader_writes_it_back_and_the_next_leader_takes_a_newer_term) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c"}) fleet.add(id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::uint64_t term = readable_plan(fleet)->term;
  erase(fleet, core::kPlanKey);
  ASSERT_TRUE(fleet.run_until([&] { return readable_plan(fleet).has_value(); }, 5s));
  EXPECT_EQ(readable_plan(fleet)->term, term);
  const std::string leader = fleet.leader_id();
  fleet.crash(leader);
  ASSERT_TRUE(fleet.run_until([&] { return !fleet.leader_id().empty(); }, 20s));
  EXPECT_GT(readable_plan(fleet)->term, term) << "a new leader must never reuse an old term";
  ASSERT_TRUE(runs_to_completion(fleet));
}

TEST(PlanDeleted, with_the_leader_gone_before_it_could_rewrite_it_terms_still_never_go_back) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c"}) fleet.add(id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::uint64_t term = readable_plan(fleet)->term;
  fleet.crash(fleet.leader_id());
  erase(fleet, core::kPlanKey);  // nobody remembers the plan now but the assignment records
  ASSERT_TRUE(fleet.run_until([&] { return readable_plan(fleet).has_value(); }, 20s));
  EXPECT_GT(readable_plan(fleet)->term, term);
  ASSERT_TRUE(runs_to_completion(fleet));
  EXPECT_EQ(fatals(fleet), 0u);
}

// --- split.{id} ----------------------------------------------------------------------------------

class SplitDamage : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SplitDamage, a_held_split_record_is_rebuilt_above_every_epoch_and_the_owner_is_fenced) {
  const BadValue bad = bad_values()[GetParam()];
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b"}) fleet.add(id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  Node& owner = fleet.node("b");
  ASSERT_FALSE(owner.held().empty());
  const std::string split = *owner.held().begin();
  ASSERT_TRUE(owner.coord->commit(split, SplitProgress{4, "before"}).durable());
  const std::uint64_t epoch = fleet.split_record(split).epoch;
  fleet.run_for(200ms);  // the leader sees the commit
  overwrite(fleet, core::split_key(split), bad.bytes);
  ASSERT_TRUE(fleet.run_until([&] { return readable_split(fleet, split).has_value(); }, 5s));
  const core::SplitRecord rebuilt = *readable_split(fleet, split);
  EXPECT_GE(rebuilt.epoch, epoch + core::kRebuildEpochStep);
  EXPECT_EQ(rebuilt.progress.watermark, 4u) << "the last progress the leader read";
  EXPECT_EQ(owner.coord->commit(split, SplitProgress{6, "after"}).status, CommitStatus::fenced);
  ASSERT_TRUE(runs_to_completion(fleet)) << bad.name;
  EXPECT_EQ(fatals(fleet), 0u);
}

INSTANTIATE_TEST_SUITE_P(BadValues, SplitDamage, ::testing::Range<std::size_t>(0, 4),
                         [](const auto& p) { return bad_values()[p.param].name; });

TEST(SplitDeleted, a_running_splits_record_is_rebuilt_from_the_last_one_read_and_completes) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 4; }));
  const std::string gone = "s003";
  const std::uint64_t epoch = fleet.split_record(gone).epoch;
  erase(fleet, core::split_key(gone));
  ASSERT_TRUE(fleet.run_until([&] { return readable_split(fleet, gone).has_value(); }, 5s));
  EXPECT_GT(fleet.split_record(gone).epoch, epoch);
  ASSERT_TRUE(runs_to_completion(fleet));
}

TEST(SplitDeleted, records_deleted_while_no_leader_watched_are_rebuilt_from_their_specs) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b"}) fleet.add(id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  fleet.crash("a");
  fleet.crash("b");
  erase(fleet, core::split_key("s001"));
  erase(fleet, core::split_key("s004"));
  for (const char* id : {"c", "d"}) fleet.add(id);
  // The new leader's snapshot is short of the plan's count: it waits a lease, re-watches, then
  // finds the specs without records and rebuilds them.
  ASSERT_TRUE(fleet.run_until(
      [&] { return readable_split(fleet, "s001") && readable_split(fleet, "s004"); }, 30s));
  ASSERT_TRUE(runs_to_completion(fleet, 90s));
  EXPECT_EQ(fatals(fleet), 0u);
}

// --- spec.{id} -----------------------------------------------------------------------------------

class SpecDamage : public ::testing::TestWithParam<std::size_t> {};

// Two members converge; the non-leader and one split it holds (crashing it makes the survivor
// claim the split again, which reads its spec). `split` is empty if it held none.
struct Victim {
  std::string id;
  std::string split;
};
Victim converge_two(Fleet& fleet) {
  auto cfg = [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; };
  fleet.add("a", cfg);
  fleet.add("b", cfg);
  EXPECT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  Victim v{fleet.leader_id() == "a" ? "b" : "a", {}};
  const auto held = fleet.node(v.id).held();
  if (!held.empty()) v.split = *held.begin();
  return v;
}

// Runs the job to completion (every held split completed); `parked` records whether `split` was
// parked for its spec on the way.
bool completes_noting_park(Fleet& fleet, const std::string& split, bool& parked) {
  return fleet.run_until(
      [&] {
        auto r = readable_split(fleet, split);
        parked |= r && core::parked_for_spec(*r);
        complete_held(fleet);
        return verdict_is(fleet, core::Verdict::complete);
      },
      60s);
}

TEST_P(SpecDamage, the_split_is_parked_then_a_repair_replan_rewrites_the_spec_and_requeues_it) {
  const BadValue bad = bad_values()[GetParam()];
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  const Victim victim = converge_two(fleet);
  ASSERT_FALSE(victim.split.empty());
  const std::string& split = victim.split;
  fleet.crash(victim.id);  // its splits are claimed again, which reads their specs
  overwrite(fleet, core::spec_key(split), bad.bytes);
  bool parked = false;
  ASSERT_TRUE(completes_noting_park(fleet, split, parked)) << bad.name;
  EXPECT_TRUE(parked) << "the claimer should have parked the split first";
  auto spec = fleet.mem->get(core::spec_key(split));
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(core::decode_spec(core::spec_key(split), spec->value).spec.id, split);
}

INSTANTIATE_TEST_SUITE_P(BadValues, SpecDamage, ::testing::Range<std::size_t>(0, 4),
                         [](const auto& p) { return bad_values()[p.param].name; });

std::size_t quarantined_in_store(Fleet& fleet) {
  std::size_t n = 0;
  for (const Entry& e : fleet.mem->list(core::kSplitPrefix)) {
    try {
      n += core::decode_split(e.key, e.value).status == core::SplitStatus::quarantined;
    } catch (const core::RecordError&) {
    }
  }
  return n;
}

// Issue 39: a requeue whose CAS has an unknown outcome. It landed, the leader's split view still
// showed the park (its watch was behind), and the repair re-plan's plan write counted a
// quarantine the store no longer held (the simulator's invariant 4: tallies never exceed the
// store's counts). The requeue is now settled before the next tally write.
TEST(SpecDamage, a_requeue_of_unknown_outcome_is_settled_before_the_tallies_are_written) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  Scripts scripts;
  script_members(fleet, scripts);
  const Victim victim = converge_two(fleet);
  ASSERT_FALSE(victim.split.empty());
  const std::string split = victim.split;
  const std::string key = core::split_key(split);
  Node& leader = fleet.node(fleet.leader_id());
  fleet.crash(victim.id);  // the leader claims its splits again, and parks this one
  overwrite(fleet, core::spec_key(split), "{not json");
  ASSERT_TRUE(fleet.run_until([&] {
    const auto plan = readable_plan(fleet);
    return plan && plan->quarantined == 1;  // the leader's view holds the park
  }));
  // From now on the leader's watches are behind, and its requeue lands with its answer lost.
  leader.store->hold_watch_events(true);
  ScriptedStore::Rule requeue =
      ScriptedStore::on(OpKind::update, key, ScriptedStore::Fault::unknown_applied);
  requeue.matches = [&](std::string_view v) {
    return core::decode_split(key, v).status == core::SplitStatus::runnable;
  };
  scripts.at(leader.id)->arm(requeue);
  // Every plan write is checked as it lands (a write older than the requeue may count the park).
  Revision plan_seen = fleet.mem->get(core::kPlanKey)->revision;
  std::size_t over_counted = 0;
  auto check_plan_writes = [&] {
    const auto e = fleet.mem->get(core::kPlanKey);
    if (!e || e->revision == plan_seen) return;
    plan_seen = e->revision;
    if (core::decode_plan(core::kPlanKey, e->value).quarantined > quarantined_in_store(fleet)) {
      ++over_counted;
    }
  };
  ASSERT_TRUE(fleet.run_until(
      [&] {
        check_plan_writes();
        return scripts.at(leader.id)->fired() == 1 && quarantined_in_store(fleet) == 0;
      },
      60s))
      << "the requeue never came";
  fleet.run_until(  // the repair re-plan goes on with the leader's watches behind
      [&] {
        check_plan_writes();
        return false;
      },
      5s);
  EXPECT_EQ(over_counted, 0u) << "a plan write counted the requeued split as quarantined";
  leader.store->hold_watch_events(false);
  ASSERT_TRUE(runs_to_completion(fleet));
  EXPECT_EQ(fatals(fleet), 0u);
}

// Issue 39 (bug 25's erase): the claimer proves a spec's damage current by erasing it, then parks
// the split by CAS. When the record moved in between (an operator's write here), the park failed
// and the spec was gone: the next claim found it missing and waited two leases before parking.
// The absence is the claimer's own erase, so the next pass parks at once.
TEST(SpecDamage, a_park_that_loses_after_its_erase_parks_on_the_next_pass) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  Scripts scripts;
  script_members(fleet, scripts);
  const Victim victim = converge_two(fleet);
  ASSERT_FALSE(victim.split.empty());
  const std::string split = victim.split;
  const std::string key = core::split_key(split);
  const std::string survivor = fleet.leader_id();
  ScriptedStore::Rule park = ScriptedStore::on(OpKind::update, key, ScriptedStore::Fault::before);
  park.matches = [&](std::string_view v) {
    return core::parked_for_spec(core::decode_split(key, v));
  };
  park.before = [&] {  // an operator's write lands first: the park's CAS loses
    const auto cur = fleet.mem->get(key);
    core::SplitRecord r = core::decode_split(key, cur->value);
    r.last_error = "looked at by an operator";
    ASSERT_TRUE(fleet.mem->update(key, core::encode(r), cur->revision).ok);
  };
  scripts.at(survivor)->arm(park);
  fleet.crash(victim.id);  // the survivor claims its splits again, and finds this spec damaged
  overwrite(fleet, core::spec_key(split), "{not json");
  ASSERT_TRUE(fleet.run_until([&] { return scripts.at(survivor)->fired() == 1; }));
  ASSERT_FALSE(fleet.mem->get(core::spec_key(split))) << "the damage was not erased";
  ASSERT_FALSE(core::parked_for_spec(fleet.split_record(split)))
      << "the park landed over the operator's write";
  const auto lost_at = fleet.clock.now();
  ASSERT_TRUE(fleet.run_until(
      [&] {
        const auto r = readable_split(fleet, split);
        return r && core::parked_for_spec(*r);
      },
      30s));
  EXPECT_LT(fleet.clock.now() - lost_at, Fleet::default_config(survivor).lease_duration)
      << "the claimer waited leases for an absence it made itself";
  ASSERT_TRUE(runs_to_completion(fleet));  // the repair re-plan writes the spec and requeues it
  EXPECT_EQ(fatals(fleet), 0u);
}

// Serves a member's next `reads` point reads of one key from an older entry, as a lagging
// replica would (stale reads are outside the store contract; the runtime must not trust them).
class StaleReads final : public KvStoreWrapper {
 public:
  using KvStoreWrapper::KvStoreWrapper;
  void serve(std::string key, Entry old, int reads) {
    key_ = std::move(key);
    old_ = std::move(old);
    reads_ = reads;
  }
  std::optional<Entry> get(std::string_view key) override {
    if (key == key_ && reads_ > 0) {
      --reads_;
      ++served;
      return old_;
    }
    return KvStoreWrapper::get(key);
  }
  int served = 0;

 private:
  std::string key_;
  Entry old_;
  int reads_ = 0;
};

// Sim chaos 29276: a spec damaged and then repaired was read stale, as the garbage, by the split's
// next claimer. Parking on that read would quarantine a healthy split; the claimer proves the
// damage current first (an erase at the revision read), fails, and claims on a later read.
TEST(SpecDamage, a_stale_read_of_a_spec_repaired_since_does_not_park_the_split) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  std::vector<std::shared_ptr<StaleReads>> stale;
  fleet.wrap_store = [&](const std::string&, std::shared_ptr<KvStore> inner) {
    stale.push_back(std::make_shared<StaleReads>(std::move(inner)));
    return stale.back();
  };
  const Victim victim = converge_two(fleet);
  ASSERT_FALSE(victim.split.empty());
  const std::string& split = victim.split;
  const std::string skey = core::spec_key(split);
  const std::string good = fleet.mem->get(skey)->value;
  overwrite(fleet, skey, "{not json");
  const Entry damaged = *fleet.mem->get(skey);
  overwrite(fleet, skey, good);  // repaired before anyone read the damage
  for (auto& s : stale) s->serve(skey, damaged, 3);
  fleet.crash(victim.id);  // the survivor claims the split and reads its spec
  bool parked = false;
  ASSERT_TRUE(completes_noting_park(fleet, split, parked));
  int served = 0;
  for (auto& s : stale) served += s->served;
  EXPECT_GT(served, 0) << "the survivor should have read the stale spec";
  EXPECT_FALSE(parked) << "a stale read of the damage parked a healthy split";
  auto spec = fleet.mem->get(skey);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->value, good);
}

TEST(SpecDamage, a_spec_the_planner_no_longer_lists_stalls_the_job_with_a_reason_naming_it) {
  auto planner = std::make_shared<TestPlanner>(make_splits(3, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.max_in_flight = 2; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && a.held().size() == 2; }));
  std::string waiting;
  for (const char* s : {"s000", "s001", "s002"}) {
    if (!a.held().count(s)) waiting = s;
  }
  erase(fleet, core::spec_key(waiting));
  planner->set_splits({});  // the planner forgot it too
  ASSERT_TRUE(fleet.run_until(
      [&] {
        complete_held(fleet);
        return verdict_is(fleet, core::Verdict::stalled);
      },
      60s));
  const core::SplitRecord rec = fleet.split_record(waiting);
  EXPECT_TRUE(core::parked_for_spec(rec));
  ASSERT_TRUE(rec.last_error.has_value());
  EXPECT_NE(rec.last_error->find("spec." + waiting), std::string::npos) << *rec.last_error;
  EXPECT_NE(rec.last_error->find("etlc requeue"), std::string::npos) << *rec.last_error;
  EXPECT_EQ(a.count<Stalled>(), 1u);
}

// --- member.{id} ---------------------------------------------------------------------------------

class SessionDamage : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SessionDamage, a_live_member_replaces_garbage_over_its_own_session_and_keeps_its_work) {
  const BadValue bad = bad_values()[GetParam()];
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b"}) fleet.add(id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  Node& b = fleet.node("b");
  const auto held = b.held();
  overwrite(fleet, core::member_key("b"), bad.bytes);
  fleet.run_for(5s);
  EXPECT_EQ(b.count<Fatal>(), 0u) << bad.name;
  EXPECT_EQ(b.count<SplitLost>(), 0u) << bad.name;
  EXPECT_EQ(b.held(), held);
  auto rec = fleet.mem->get(core::member_key("b"));
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(core::decode_member(core::member_key("b"), rec->value).nonce, b.member().nonce());
  ASSERT_TRUE(runs_to_completion(fleet));
}

TEST_P(SessionDamage, a_dead_members_unreadable_session_is_expired_and_its_splits_move) {
  const BadValue bad = bad_values()[GetParam()];
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  auto cfg = [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; };
  fleet.add("a", cfg);
  fleet.add("b", cfg);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::string dead = fleet.leader_id() == "a" ? "b" : "a";
  fleet.crash(dead);
  overwrite(fleet, core::member_key(dead), bad.bytes);
  ASSERT_TRUE(fleet.run_until([&] { return !fleet.mem->get(core::member_key(dead)); }, 10s))
      << bad.name;
  ASSERT_TRUE(runs_to_completion(fleet));
}

INSTANTIATE_TEST_SUITE_P(BadValues, SessionDamage, ::testing::Range<std::size_t>(0, 4),
                         [](const auto& p) { return bad_values()[p.param].name; });

TEST(PeerBounds, a_forged_session_with_a_huge_lane_budget_and_lease_gets_no_work_and_expires) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  Node& a = fleet.add("a", [](CoordinatorConfig& c) { c.max_in_flight = 2; });
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  core::MemberRecord fake;
  fake.instance = "fake";
  fake.nonce = "forged";
  fake.fingerprint = "test-job";
  fake.max_in_flight = 4'294'967'295u;
  fake.lease_ms = 24ull * 3600 * 1000;
  ASSERT_TRUE(fleet.mem->create(core::member_key("fake"), core::encode(fake)).ok);
  bool assigned = false;
  const auto start = fleet.clock.now();
  ASSERT_TRUE(fleet.run_until(
      [&] {
        if (auto e = fleet.mem->get(core::assign_key("fake"))) {
          assigned |= !core::decode_assignment(core::assign_key("fake"), e->value).splits.empty();
        }
        return !fleet.mem->get(core::member_key("fake"));
      },
      30s));
  EXPECT_FALSE(assigned) << "a lane budget outside 1..kMaxLanes must get no work";
  // Judged by at most four of the observer's own leases (3 s), not by the day it advertised.
  EXPECT_LE(fleet.clock.now() - start, 4 * 3s + 2s);
  EXPECT_EQ(a.count<Fatal>(), 0u);
  ASSERT_TRUE(runs_to_completion(fleet));
}

// --- lease.{id}, assign.{id}, job.leader ---------------------------------------------------------

class LeaseDamage : public ::testing::TestWithParam<std::size_t> {};

TEST_P(LeaseDamage, an_unreadable_lease_of_a_dead_owner_is_removed_by_the_next_claimer) {
  const BadValue bad = bad_values()[GetParam()];
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  Fleet fleet(planner);
  auto cfg = [](CoordinatorConfig& c) { c.rebalance_delay = 0ms; };
  fleet.add("a", cfg);
  fleet.add("b", cfg);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::string dead = fleet.leader_id() == "a" ? "b" : "a";
  const std::string split = *fleet.node(dead).held().begin();
  fleet.crash(dead);
  overwrite(fleet, core::lease_key(split), bad.bytes);
  ASSERT_TRUE(runs_to_completion(fleet)) << bad.name;
}

INSTANTIATE_TEST_SUITE_P(BadValues, LeaseDamage, ::testing::Range<std::size_t>(0, 4),
                         [](const auto& p) { return bad_values()[p.param].name; });

TEST(AssignDamage, the_leader_rewrites_an_unreadable_assignment_and_its_member_keeps_its_work) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b"}) fleet.add(id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::string worker = fleet.leader_id() == "a" ? "b" : "a";
  const auto held = fleet.node(worker).held();
  for (const BadValue& bad : bad_values()) {
    overwrite(fleet, core::assign_key(worker), bad.bytes);
    auto readable = [&] {
      auto e = fleet.mem->get(core::assign_key(worker));
      try {
        return e && core::decode_assignment(core::assign_key(worker), e->value).splits.size() ==
                        held.size();
      } catch (const core::RecordError&) {
        return false;
      }
    };
    ASSERT_TRUE(fleet.run_until([&] { return readable() && fleet.converged(); }, 5s)) << bad.name;
    EXPECT_EQ(fleet.node(worker).held(), held) << bad.name;
  }
  EXPECT_EQ(fleet.node(worker).count<RevokeRequested>(), 0u);
}

TEST(LeaderDamage, a_live_leader_rewrites_its_unreadable_record_and_keeps_its_term) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b"}) fleet.add(id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::string leader = fleet.leader_id();
  const std::uint64_t term = readable_plan(fleet)->term;
  for (const BadValue& bad : bad_values()) {
    overwrite(fleet, core::kLeaderKey, bad.bytes);
    ASSERT_TRUE(fleet.run_until(
        [&] {
          auto e = fleet.mem->get(core::kLeaderKey);
          try {
            return e && core::decode_leader(core::kLeaderKey, e->value).owner == leader;
          } catch (const core::RecordError&) {
            return false;
          }
        },
        5s))
        << bad.name;
  }
  EXPECT_EQ(fleet.leader_id(), leader);
  EXPECT_EQ(readable_plan(fleet)->term, term);
}

TEST(LeaderDamage, an_unreadable_record_of_a_dead_leader_is_removed_and_a_new_one_elected) {
  auto planner = std::make_shared<TestPlanner>(make_splits(6, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c"}) fleet.add(id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::string leader = fleet.leader_id();
  const std::uint64_t term = readable_plan(fleet)->term;
  fleet.crash(leader);
  overwrite(fleet, core::kLeaderKey, "{garbage");
  ASSERT_TRUE(fleet.run_until(
      [&] { return !fleet.leader_id().empty() && fleet.leader_id() != leader; }, 20s));
  EXPECT_GT(readable_plan(fleet)->term, term);
  ASSERT_TRUE(runs_to_completion(fleet));
}

}  // namespace
}  // namespace etlc::testing
