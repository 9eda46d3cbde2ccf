// Dynamic splitting in the runtime (docs/work-assignment.md, "Splitting a split under way"): the
// leader asks for a cut when a lane is free and nothing is queued; the owner's cut creates the
// residual pending and names it by a fenced CAS; the leader makes it runnable and assigns it; the
// job completes only with its residuals; a zombie's cut loses the fence and its residual is
// deleted; an unanswered request is not repeated in that tenancy.
#include <gtest/gtest.h>

#include "core/cut_rules.hpp"
#include "core/keys.hpp"
#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

using std::chrono::milliseconds;

void one_lane(CoordinatorConfig& c) {
  c.max_in_flight = 1;
  c.dynamic_splitting = true;
}

std::optional<core::SplitRecord> split_record(Fleet& fleet, const std::string& id) {
  auto e = fleet.mem->get(core::split_key(id));
  if (!e) return std::nullopt;
  try {
    return core::decode_split(e->key, e->value);
  } catch (const core::RecordError&) {
    return std::nullopt;  // garbled
  }
}

// Two splits of weight 1000 on two one-lane members, each read to 300; the holder of s001
// completes it, so its lane is free while s000 has 700 left. Returns the holder of s000.
Node& one_split_left(Fleet& fleet, Node& a, Node& b) {
  EXPECT_TRUE(fleet.run_until([&] { return a.held().size() == 1 && b.held().size() == 1; }));
  Node& slow = a.held().count("s000") ? a : b;
  Node& fast = &slow == &a ? b : a;
  for (std::uint64_t done = 100; done <= 300; done += 100) {
    EXPECT_TRUE(slow.coord->commit("s000", SplitProgress{done, {}, done}).durable());
    EXPECT_TRUE(fast.coord->commit("s001", SplitProgress{done, {}, done}).durable());
    fleet.run_for(1s);
  }
  EXPECT_TRUE(fast.coord->complete("s001", SplitProgress{1000, {}, 1000}).durable());
  fast.lanes.clear();
  return slow;
}

void erase_record(Fleet& fleet, const std::string& key) {
  auto cur = fleet.mem->get(key);
  ASSERT_TRUE(cur) << key;
  ASSERT_TRUE(fleet.mem->erase(key, cur->revision).ok) << key;
}

std::optional<SplitRequested> request_to(Fleet& fleet, Node& n) {
  EXPECT_TRUE(fleet.run_until([&] { return n.count<SplitRequested>() > 0; }, 10s));
  auto all = n.all<SplitRequested>();
  if (all.empty()) return std::nullopt;
  return all.front();
}

TEST(DynamicSplit, a_free_lane_gets_the_residual_of_the_split_that_ends_last) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(2, 1000)));
  Node& a = fleet.add("a", one_lane);
  Node& b = fleet.add("b", one_lane);
  Node& slow = one_split_left(fleet, a, b);
  Node& other = &slow == &a ? b : a;
  const auto ask = request_to(fleet, slow);
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->split_id, "s000");
  EXPECT_DOUBLE_EQ(ask->keep, 0.5);
  const SplitProgress cut_at{300, "end=650", 300};
  ASSERT_TRUE(slow.coord->split("s000", cut_at, SplitResidual{"rows 650..1000", 350}, ask->epoch)
                  .durable());
  const std::string child = core::child_split_id("s000", ask->epoch, 1);
  auto parent = split_record(fleet, "s000");
  ASSERT_TRUE(parent);
  EXPECT_EQ(parent->children, std::vector<std::string>{child});
  EXPECT_EQ(parent->weight, 650u) << "the parent keeps what it did not give";
  EXPECT_EQ(parent->progress.state, "end=650");
  ASSERT_TRUE(fleet.run_until([&] { return other.held().count(child) > 0; }, 10s));
  const auto grants = other.all<SplitGranted>();
  ASSERT_FALSE(grants.empty());
  EXPECT_EQ(grants.back().spec, (SplitSpec{child, "rows 650..1000", 350}));
  auto rec = split_record(fleet, child);
  ASSERT_TRUE(rec && rec->cut_from);
  EXPECT_EQ(*rec->cut_from, (core::SplitOrigin{"s000", ask->epoch}));

  // The job completes only with its residual.
  ASSERT_TRUE(slow.coord->complete("s000", SplitProgress{650, "end=650", 650}).durable());
  fleet.run_for(3s);
  EXPECT_EQ(a.count<AllComplete>() + b.count<AllComplete>(), 0u);
  ASSERT_TRUE(other.coord->complete(child, SplitProgress{350, {}, 350}).durable());
  ASSERT_TRUE(
      fleet.run_until([&] { return a.count<AllComplete>() > 0 && b.count<AllComplete>() > 0; }));
  EXPECT_EQ(a.all<AllComplete>().front().completed, 3u);
  EXPECT_EQ(fleet.plan_record()->split_count, 3u);
}

// An operator deletes a residual's record after its parent named it, before the leader made it
// runnable: the one delete the leader's views do not take for damage (its own orphan cleanup
// looks the same). The parent names it, so it is rebuilt from its spec and read.
TEST(DynamicSplit, a_named_residual_whose_record_is_deleted_is_rebuilt_and_read) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(2, 1000)));
  Node& a = fleet.add("a", one_lane);
  Node& b = fleet.add("b", one_lane);
  Node& slow = one_split_left(fleet, a, b);
  Node& other = &slow == &a ? b : a;
  const auto ask = request_to(fleet, slow);
  ASSERT_TRUE(ask);
  ASSERT_TRUE(slow.coord
                  ->split("s000", SplitProgress{300, "end=650", 300},
                          SplitResidual{"rows 650..1000", 350}, ask->epoch)
                  .durable());
  const std::string child = core::child_split_id("s000", ask->epoch, 1);
  auto rec = fleet.mem->get(core::split_key(child));
  ASSERT_TRUE(rec);
  ASSERT_EQ(core::decode_split(rec->key, rec->value).status, core::SplitStatus::pending);
  ASSERT_TRUE(fleet.mem->erase(core::split_key(child), rec->revision).ok);
  ASSERT_TRUE(fleet.run_until([&] { return other.held().count(child) > 0; }, 20s));
  EXPECT_EQ(other.all<SplitGranted>().back().spec.descriptor, "rows 650..1000");
}

// A cut by a tenancy that is over (a zombie that has not noticed) creates its residual's
// records, but its CAS of the parent loses: the residual is never runnable, and the leader
// deletes it.
TEST(DynamicSplit, a_zombies_cut_loses_the_fence_and_its_residual_is_deleted) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  ASSERT_TRUE(fleet.run_until([&] { return a.held().size() == 1; }));
  Node& b = fleet.add("b", one_lane);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::uint64_t epoch = split_record(fleet, "s000")->epoch;
  a.running = false;  // a stops stepping: b expires its session and takes s000 over
  ASSERT_TRUE(fleet.run_until([&] { return b.held().count("s000") > 0; }, 30s));
  const CommitResult r =
      a.coord->split("s000", SplitProgress{100, "end=500", 100}, SplitResidual{"rows", 500}, epoch);
  EXPECT_EQ(r.status, CommitStatus::fenced) << r.detail;
  const std::string child = core::child_split_id("s000", epoch, 1);
  EXPECT_TRUE(fleet.mem->get(core::spec_key(child))) << "the zombie's first writes landed";
  ASSERT_TRUE(fleet.run_until(
      [&] {
        return !fleet.mem->get(core::split_key(child)) && !fleet.mem->get(core::spec_key(child));
      },
      10s));
  EXPECT_TRUE(split_record(fleet, "s000")->children.empty());
  EXPECT_EQ(b.ever_granted.count(child), 0u);
  ASSERT_TRUE(b.coord->complete("s000", SplitProgress{1000, {}, 1000}).durable());
  ASSERT_TRUE(fleet.run_until([&] { return b.count<AllComplete>() > 0; }));
  EXPECT_EQ(b.all<AllComplete>().front().completed, 1u) << "the orphan is not a split of the job";
}

// A residual created but not yet named (the owner between its two writes) is not claimable; the
// owner's next tenancy reads the parent whole, and the residual is deleted.
TEST(DynamicSplit, a_residual_its_parent_does_not_name_is_never_claimed) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  ASSERT_TRUE(fleet.run_until([&] { return a.held().size() == 1; }));
  Node& b = fleet.add("b", one_lane);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }));
  const std::uint64_t epoch = split_record(fleet, "s000")->epoch;
  const std::string child = core::child_split_id("s000", epoch, 1);
  // What a's cut writes first, as if it crashed right after.
  ASSERT_TRUE(fleet.mem->create(core::spec_key(child),
                                core::encode(core::SpecRecord{SplitSpec{child, "rows", 500}})));
  ASSERT_TRUE(fleet.mem->create(
      core::split_key(child),
      core::encode(core::pending_child(child, 500, core::SplitOrigin{"s000", epoch}))));
  fleet.run_for(5s);
  EXPECT_EQ(b.ever_granted.count(child), 0u) << "pending while its cutter may still name it";
  EXPECT_TRUE(fleet.mem->get(core::split_key(child)));
  fleet.crash("a");
  ASSERT_TRUE(fleet.run_until([&] { return b.held().count("s000") > 0; }, 30s));
  EXPECT_EQ(b.all<SplitGranted>().back().progress.watermark, 0u);
  ASSERT_TRUE(fleet.run_until([&] { return !fleet.mem->get(core::split_key(child)); }, 10s));
  EXPECT_FALSE(fleet.mem->get(core::spec_key(child)));
  EXPECT_EQ(b.ever_granted.count(child), 0u);
}

// An earlier cut of this tenancy left its residual's spec and pending record, and its parent
// CAS never landed (the lane closed; the split adopted again at the same epoch). The next cut
// of the tenancy would take the same id: it takes the next one instead, never rewriting a spec
// (a stale read of a rewritten spec would give a claimer the wrong range) and never refusing the
// cut (which would fail the split and use an attempt). The leftover is deleted once the tenancy
// is over.
TEST(DynamicSplit, a_leftover_of_an_earlier_cut_of_the_same_tenancy_is_skipped) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  ASSERT_TRUE(fleet.run_until([&] { return a.held().size() == 1; }));
  const std::uint64_t epoch = split_record(fleet, "s000")->epoch;
  const std::string leftover = core::child_split_id("s000", epoch, 1);
  const std::string child = core::child_split_id("s000", epoch, 2);
  const std::string old_spec = core::encode(
      core::SpecRecord{SplitSpec{leftover, "700..", 300}, SplitProgress{50, "700", 50}});
  ASSERT_TRUE(fleet.mem->create(core::spec_key(leftover), old_spec));
  ASSERT_TRUE(fleet.mem->create(
      core::split_key(leftover),
      core::encode(core::pending_child(leftover, 300, core::SplitOrigin{"s000", epoch}))));
  const CommitResult r = a.coord->split("s000", SplitProgress{100, "end=600", 100},
                                        SplitResidual{"600..", 400}, epoch);
  ASSERT_TRUE(r.durable()) << r.detail;
  EXPECT_EQ(fleet.mem->get(core::spec_key(leftover))->value, old_spec) << "specs never change";
  auto spec = fleet.mem->get(core::spec_key(child));
  ASSERT_TRUE(spec);
  EXPECT_EQ(core::decode_spec(spec->key, spec->value),
            (core::SpecRecord{SplitSpec{child, "600..", 400}, SplitProgress{100, "end=600", 100}}));
  EXPECT_EQ(split_record(fleet, "s000")->children, std::vector<std::string>{child});
  ASSERT_TRUE(fleet.run_until(
      [&] {
        auto c = split_record(fleet, child);
        return c && c->status == core::SplitStatus::runnable && c->weight == 400;
      },
      10s));
  EXPECT_EQ(split_record(fleet, leftover)->status, core::SplitStatus::pending);
  ASSERT_TRUE(a.coord->complete("s000", SplitProgress{600, "end=600", 600}).durable());
  ASSERT_TRUE(fleet.run_until(
      [&] {
        return !fleet.mem->get(core::split_key(leftover)) &&
               !fleet.mem->get(core::spec_key(leftover));
      },
      10s));
  EXPECT_EQ(a.ever_granted.count(leftover), 0u);
}

// A pending record whose parent does not exist (no record, no spec: a stray writer's, or left
// after an operator removed the parent) can never be named; the leader deletes it after a lease
// instead of keeping it (and counting it against max_dynamic_splits) for ever.
TEST(DynamicSplit, a_pending_record_whose_parent_does_not_exist_is_deleted) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  ASSERT_TRUE(fleet.run_until([&] { return a.held().size() == 1; }));
  const std::string stray = core::child_split_id("nosuch", 3, 1);
  ASSERT_TRUE(fleet.mem->create(
      core::split_key(stray),
      core::encode(core::pending_child(stray, 10, core::SplitOrigin{"nosuch", 3}))));
  ASSERT_TRUE(fleet.mem->create(core::spec_key(stray),
                                core::encode(core::SpecRecord{SplitSpec{stray, "x", 10}})));
  ASSERT_TRUE(fleet.run_until(
      [&] {
        return !fleet.mem->get(core::split_key(stray)) && !fleet.mem->get(core::spec_key(stray));
      },
      20s));
  EXPECT_EQ(a.ever_granted.count(stray), 0u);
  ASSERT_TRUE(a.coord->complete("s000", SplitProgress{1000, {}, 1000}).durable());
  ASSERT_TRUE(fleet.run_until([&] { return a.count<AllComplete>() > 0; }));
}

void garble(Fleet& fleet, const std::string& key) {
  auto cur = fleet.mem->get(key);
  ASSERT_TRUE(cur) << key;
  ASSERT_TRUE(fleet.mem->update(key, "{not json", cur->revision).ok) << key;
}

// Completes every split the fleet's live members hold, at its weight.
void complete_held(Fleet& fleet) {
  for (Node* n : fleet.live()) {
    for (const std::string& id : n->held()) {
      std::uint64_t w = 0;
      for (const auto& g : n->all<SplitGranted>()) {
        if (g.spec.id == id) w = g.spec.weight;
      }
      (void)n->coord->complete(id, SplitProgress{w, {}, w});
    }
  }
}

// One member `a` holding the job's only split s000 (weight 1000): its tenancy's epoch.
std::uint64_t hold_s000(Fleet& fleet, Node& a) {
  EXPECT_TRUE(fleet.run_until([&] { return a.held().size() == 1; }));
  return split_record(fleet, "s000")->epoch;
}

// a's cut of s000 at watermark 100 so that it ends at `end`, the residual "{end}.." weighing
// `weight`: the residual's id.
std::string cut_s000(Fleet& fleet, Node& a, std::uint64_t epoch, int end, std::uint64_t weight) {
  const std::size_t n = split_record(fleet, "s000")->children.size() + 1;
  const std::string e = "end=" + std::to_string(end);
  EXPECT_TRUE(a.coord
                  ->split("s000", SplitProgress{100, e, 100},
                          SplitResidual{std::to_string(end) + "..", weight}, epoch)
                  .durable());
  return core::child_split_id("s000", epoch, n);
}

void wait_runnable(Fleet& fleet, const std::string& id) {
  EXPECT_TRUE(fleet.run_until(
      [&] {
        auto r = split_record(fleet, id);
        return r && r->status == core::SplitStatus::runnable;
      },
      10s))
      << id;
}

// A new member that leads once the others crashed, with `lanes` lanes.
Node& newcomer(Fleet& fleet, std::uint32_t lanes) {
  return fleet.add("b", [lanes](CoordinatorConfig& c) {
    c.max_in_flight = lanes;
    c.dynamic_splitting = true;
  });
}

// Sim operator 318: a cutter died between its residual's pending record and the parent's CAS,
// and the operator garbled that record. A leader with no memory of it rebuilt it from its spec
// as a runnable split, which its parent does not name: both would read its records. Rebuilt
// pending, it is an orphan (the tenancy that cut it is over) and is deleted unclaimed.
TEST(DynamicSplit, a_residual_rebuilt_from_its_spec_is_pending_until_its_parent_names_it) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  ASSERT_TRUE(fleet.run_until([&] { return a.held().size() == 1; }));
  const std::uint64_t epoch = split_record(fleet, "s000")->epoch;
  const std::string child = core::child_split_id("s000", epoch, 1);
  ASSERT_TRUE(fleet.mem->create(core::spec_key(child),
                                core::encode(core::SpecRecord{SplitSpec{child, "rows", 500}})));
  ASSERT_TRUE(fleet.mem->create(
      core::split_key(child),
      core::encode(core::pending_child(child, 500, core::SplitOrigin{"s000", epoch}))));
  fleet.crash("a");
  garble(fleet, core::split_key(child));
  Node& b = fleet.add("b", [](CoordinatorConfig& c) {
    c.max_in_flight = 2;
    c.dynamic_splitting = true;
  });
  ASSERT_TRUE(fleet.run_until([&] { return b.held().count("s000") > 0; }, 30s));
  ASSERT_TRUE(fleet.run_until([&] { return !fleet.mem->get(core::split_key(child)); }, 20s));
  EXPECT_EQ(b.ever_granted.count(child), 0u) << "a residual nobody names was claimable";
  ASSERT_TRUE(b.coord->complete("s000", SplitProgress{1000, {}, 1000}).durable());
  ASSERT_TRUE(fleet.run_until([&] { return b.count<AllComplete>() > 0; }));
  EXPECT_EQ(b.all<AllComplete>().front().completed, 1u);
}

// Sim operator 282: a planned record deleted while no leader watched is found only because a
// fresh snapshot holds fewer records than the plan counts. Residuals named since the count was
// written made up for it: nothing looked missing, and the job would have completed without the
// deleted split. With residuals in the view the leader lists the specs instead.
TEST(DynamicSplit, a_record_deleted_while_no_leader_watched_is_rebuilt_in_a_job_with_residuals) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(2, 1000)));
  Node& a = fleet.add("a", one_lane);
  Node& b = fleet.add("b", one_lane);
  ASSERT_TRUE(fleet.run_until([&] { return a.held().size() == 1 && b.held().size() == 1; }));
  Node& cutter = a.held().count("s000") ? a : b;
  const std::uint64_t epoch = split_record(fleet, "s000")->epoch;
  // Two cuts, and no step of the fleet after them: the plan record still counts 2 splits.
  ASSERT_TRUE(cutter.coord
                  ->split("s000", SplitProgress{100, "end=800", 100},
                          SplitResidual{"rows 800..1000", 200}, epoch)
                  .durable());
  ASSERT_TRUE(cutter.coord
                  ->split("s000", SplitProgress{100, "end=600", 100},
                          SplitResidual{"rows 600..800", 200}, epoch)
                  .durable());
  ASSERT_EQ(fleet.plan_record()->split_count, 2u);
  fleet.crash("a");
  fleet.crash("b");
  erase_record(fleet, core::split_key("s001"));  // never completed
  Node& c = fleet.add("c", [](CoordinatorConfig& cfg) {
    cfg.max_in_flight = 4;
    cfg.dynamic_splitting = true;
  });
  ASSERT_TRUE(fleet.run_until(
      [&] {
        complete_held(fleet);
        return c.count<AllComplete>() > 0;
      },
      90s));
  EXPECT_EQ(c.ever_granted.count("s001"), 1u) << "the job completed without the deleted split";
  EXPECT_EQ(c.all<AllComplete>().front().completed, 4u);
}

// Sim operator 131: a parent's record garbled, rebuilt by a leader that never read it: from its
// spec it named no residual, and would read theirs again. It keeps the residuals past pending
// that were cut from it, in the order they were cut.
// ... and resumes from the progress its last cut recorded in the residual's spec, whose state
// carries its end: it stops at the cut instead of reading its residuals' rows again (sim
// operator 23281), and its weight is what the cuts left it.
TEST(DynamicSplit, a_parent_rebuilt_from_its_spec_keeps_its_named_residuals) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  const std::uint64_t epoch = hold_s000(fleet, a);
  const std::string first = cut_s000(fleet, a, epoch, 800, 200);
  const std::string second = cut_s000(fleet, a, epoch, 600, 200);
  wait_runnable(fleet, first);
  wait_runnable(fleet, second);
  fleet.crash("a");
  garble(fleet, core::split_key("s000"));
  fleet.add("b", one_lane);
  ASSERT_TRUE(fleet.run_until(
      [&] {
        auto r = split_record(fleet, "s000");
        return r && r->epoch > epoch;
      },
      30s));
  const auto rebuilt = split_record(fleet, "s000");
  EXPECT_EQ(rebuilt->children, (std::vector<std::string>{first, second}));
  EXPECT_EQ(rebuilt->progress, (SplitProgress{100, "end=600", 100}));
  EXPECT_EQ(rebuilt->weight, 600u);
}

// A residual whose record and spec are both destroyed, with a leader that never read either: no
// planner lists a residual, so nothing can rewrite its descriptor. Rather than a job that runs
// for ever one split short, the record is rebuilt parked for its spec, and the job ends stalled
// naming the record to restore (sim operator 34533).
TEST(DynamicSplit, a_residual_that_lost_record_and_spec_is_parked_and_the_job_stalls) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  const std::string child = cut_s000(fleet, a, hold_s000(fleet, a), 800, 200);
  wait_runnable(fleet, child);
  fleet.crash("a");
  garble(fleet, core::split_key(child));
  garble(fleet, core::spec_key(child));
  Node& b = newcomer(fleet, 2);
  ASSERT_TRUE(fleet.run_until([&] { return b.held().count("s000") > 0; }, 30s));
  ASSERT_TRUE(b.coord->complete("s000", SplitProgress{800, "end=800", 800}).durable());
  ASSERT_TRUE(fleet.run_until([&] { return b.count<Stalled>() > 0; }, 60s));
  const auto parked = split_record(fleet, child);
  ASSERT_TRUE(parked);
  EXPECT_EQ(parked->status, core::SplitStatus::quarantined);
  EXPECT_NE(parked->last_error->find("spec." + child), std::string::npos) << *parked->last_error;
  EXPECT_EQ(b.ever_granted.count(child), 0u);
}

// A cut that wrote its residual's spec and died, the spec then garbled: no record, no usable
// spec, no parent naming it. Once the tenancy that cut it is over it can never be named: the
// leader removes the spec instead of rebuilding a record for it (sim operator 44943).
TEST(DynamicSplit, an_unnamed_residuals_damaged_spec_is_removed_once_its_tenancy_is_over) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  const std::uint64_t epoch = hold_s000(fleet, a);
  cut_s000(fleet, a, epoch, 800, 200);
  const std::string lost = core::child_split_id("s000", epoch, 2);  // the next cut's
  ASSERT_TRUE(fleet.mem->create(core::spec_key(lost), "{garbage"));
  fleet.crash("a");
  Node& b = newcomer(fleet, 2);
  ASSERT_TRUE(fleet.run_until([&] { return !fleet.mem->get(core::spec_key(lost)); }, 30s));
  EXPECT_FALSE(fleet.mem->get(core::split_key(lost)));
  EXPECT_EQ(b.ever_granted.count(lost), 0u);
  ASSERT_TRUE(fleet.run_until([&] { return b.held().size() == 2; }, 30s));
  complete_held(fleet);
  ASSERT_TRUE(fleet.run_until([&] { return b.count<AllComplete>() > 0; }, 30s));
  EXPECT_EQ(b.all<AllComplete>().front().completed, 2u);
}

// Two cuts named, then the parent's record and its second residual's record both garbled, with a
// leader that never read them: the parent is rebuilt first (by id), and must name the damaged
// residual too, or that residual would be judged an orphan and deleted while the parent reads
// its rows again. Both come back; each reads its own range.
TEST(DynamicSplit, a_parent_and_its_residual_destroyed_together_come_back_with_the_cut) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  const std::uint64_t epoch = hold_s000(fleet, a);
  const std::string first = cut_s000(fleet, a, epoch, 800, 200);
  const std::string second = cut_s000(fleet, a, epoch, 600, 200);
  wait_runnable(fleet, second);
  fleet.crash("a");
  garble(fleet, core::split_key("s000"));
  garble(fleet, core::split_key(second));
  Node& b = newcomer(fleet, 3);
  ASSERT_TRUE(fleet.run_until(
      [&] {
        auto p = split_record(fleet, "s000");
        auto c = split_record(fleet, second);
        return p && p->epoch > epoch && c && c->status == core::SplitStatus::runnable;
      },
      30s));
  EXPECT_EQ(split_record(fleet, "s000")->children, (std::vector<std::string>{first, second}));
  EXPECT_EQ(split_record(fleet, "s000")->progress, (SplitProgress{100, "end=600", 100}));
  EXPECT_TRUE(fleet.mem->get(core::spec_key(second)));
  ASSERT_TRUE(fleet.run_until([&] { return b.held().size() == 3; }, 30s));
  complete_held(fleet);
  ASSERT_TRUE(fleet.run_until([&] { return b.count<AllComplete>() > 0; }, 30s));
  EXPECT_EQ(b.all<AllComplete>().front().completed, 3u);
}

// A parent's record and spec deleted while no leader watched: the repair re-plan lists it, but
// seeded afresh it would read its residual's rows again. It is rebuilt with its cut instead.
TEST(DynamicSplit, a_parent_whose_record_and_spec_were_deleted_comes_back_with_its_cut) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(1, 1000)));
  Node& a = fleet.add("a", one_lane);
  const std::uint64_t epoch = hold_s000(fleet, a);
  const std::string child = cut_s000(fleet, a, epoch, 800, 200);
  wait_runnable(fleet, child);
  fleet.crash("a");
  erase_record(fleet, core::split_key("s000"));
  erase_record(fleet, core::spec_key("s000"));
  newcomer(fleet, 2);
  ASSERT_TRUE(fleet.run_until(
      [&] {
        auto p = split_record(fleet, "s000");
        return p && fleet.mem->get(core::spec_key("s000"));
      },
      60s));
  const auto p = split_record(fleet, "s000");
  EXPECT_EQ(p->children, std::vector<std::string>{child});
  EXPECT_EQ(p->progress, (SplitProgress{100, "end=800", 100}));
  EXPECT_GT(p->epoch, epoch);
}

// A lane that never answers (a source that cannot split, or an event loop that ignores the
// event): after split_request_timeout the request is dropped and not made again in that tenancy,
// so it costs two publishes, then the fleet is quiet.
TEST(DynamicSplit, an_unanswered_request_is_taken_as_declined_and_not_repeated) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(2, 1000)));
  auto tweak = [](CoordinatorConfig& c) {
    c.max_in_flight = 1;
    c.dynamic_splitting = true;
    c.split_request_timeout = milliseconds(4000);
  };
  Node& a = fleet.add("a", tweak);
  Node& b = fleet.add("b", tweak);
  Node& slow = one_split_left(fleet, a, b);
  ASSERT_TRUE(request_to(fleet, slow));
  fleet.run_for(6s);  // past the timeout: the record is republished without the request
  const std::string leader = fleet.leader_id();
  const std::uint64_t publishes = fleet.node(leader).member().publishes();
  fleet.run_for(20s);
  EXPECT_EQ(slow.count<SplitRequested>(), 1u);
  EXPECT_EQ(fleet.node(leader).member().publishes(), publishes);
  auto rec = fleet.mem->get(core::assign_key(slow.id));
  ASSERT_TRUE(rec);
  EXPECT_TRUE(core::decode_assignment(rec->key, rec->value).split_requests.empty());
}

// Nothing is asked while splits are queued, nor when dynamic splitting is off.
TEST(DynamicSplit, no_request_while_work_is_queued_or_when_off) {
  {
    Fleet fleet(std::make_shared<TestPlanner>(make_splits(3, 1000)));
    Node& a = fleet.add("a", one_lane);
    Node& b = fleet.add("b", one_lane);
    ASSERT_TRUE(fleet.run_until([&] { return a.held().size() == 1 && b.held().size() == 1; }));
    fleet.run_for(10s);  // s002 waits for a lane
    EXPECT_EQ(a.count<SplitRequested>() + b.count<SplitRequested>(), 0u);
  }
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(2, 1000)));
  auto off = [](CoordinatorConfig& c) {
    c.max_in_flight = 1;
    c.dynamic_splitting = false;
  };
  Node& a = fleet.add("a", off);
  Node& b = fleet.add("b", off);
  Node& slow = one_split_left(fleet, a, b);
  fleet.run_for(10s);
  EXPECT_EQ(slow.count<SplitRequested>(), 0u);
}

}  // namespace
}  // namespace etlc::testing
