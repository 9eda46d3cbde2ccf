// A held split's writes after a lost or doubtful CAS (core/held_write.hpp): what changed in the
// record meanwhile is kept, never overwritten with what the holder last knew.
#include <gtest/gtest.h>

#include "runtime/fleet.hpp"
#include "runtime/scripted_store.hpp"

namespace etlc::testing {
namespace {

// A lone member holding every split of a two-split job, each member's store behind a
// ScriptedStore (scripts[id]).
struct Lone {
  explicit Lone(Fleet& fleet) {
    script_members(fleet, scripts);
    a = &fleet.add("a");
    EXPECT_TRUE(fleet.run_until([&] { return fleet.converged() && a->held().size() == 2; }));
  }
  Node* a = nullptr;
  Scripts scripts;
};

void rewrite(Fleet& fleet, const std::string& split, const core::SplitRecord& rec) {
  const std::string key = core::split_key(split);
  const auto cur = fleet.mem->get(key);
  ASSERT_TRUE(cur.has_value());
  ASSERT_TRUE(fleet.mem->update(key, core::encode(rec), cur->revision).ok);
}

// Issue 39, finding 5: the retry after a lost CAS was sent on top of the revision it re-read but
// with the content the owner had built on, so a write of another writer to a field the commit
// does not touch was overwritten.
TEST(HeldWrites, another_writers_change_to_a_held_record_survives_the_owners_next_commit) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(2, 10)));
  Lone lone(fleet);
  Node& a = *lone.a;
  const std::string split = "s000";
  ASSERT_TRUE(a.coord->commit(split, SplitProgress{4, "four", 4}).durable());
  core::SplitRecord changed = fleet.split_record(split);
  changed.weight = 40;  // an operator's write at the same tenancy
  changed.last_error = "looked at by an operator";
  rewrite(fleet, split, changed);
  // The commit's CAS loses (the revision moved), re-reads, and is retried on top.
  ASSERT_TRUE(a.coord->commit(split, SplitProgress{6, "six"}).durable());
  const core::SplitRecord after = fleet.split_record(split);
  EXPECT_EQ(after.progress.watermark, 6u);
  EXPECT_EQ(after.progress.state, "six");
  EXPECT_EQ(after.weight, 40u) << "the retry overwrote the weight written meanwhile";
  EXPECT_EQ(after.last_error, "looked at by an operator");
  EXPECT_EQ(after.epoch, changed.epoch);
  EXPECT_EQ(after.owner, "a");
  // The next commit is built on what the retry read: nothing to resolve, the weight stays.
  ASSERT_TRUE(a.coord->commit(split, SplitProgress{8, "eight"}).durable());
  EXPECT_EQ(fleet.split_record(split).weight, 40u);
  ASSERT_TRUE(a.coord->complete(split, SplitProgress{10, "done"}).durable());
  EXPECT_EQ(fleet.split_record(split).weight, 40u);
  EXPECT_EQ(fleet.split_record(split).status, core::SplitStatus::completed);
}

// Issue 39, finding 6: a commit with an unknown outcome lands and the re-read that should settle it
// fails; the owner's next commit, which reports no `done`, was built on the record before it and
// wrote its older `done` back.
TEST(HeldWrites, a_commit_without_done_after_one_whose_reread_failed_keeps_the_newer_done) {
  Fleet fleet(std::make_shared<TestPlanner>(make_splits(2, 10)));
  Lone lone(fleet);
  Node& a = *lone.a;
  const std::string split = "s000";
  const std::string key = core::split_key(split);
  ASSERT_TRUE(a.coord->commit(split, SplitProgress{4, "four", 4}).durable());
  ScriptedStore& script = *lone.scripts.at("a");
  script.arm(ScriptedStore::on(OpKind::update, key, ScriptedStore::Fault::unknown_applied));
  script.arm(ScriptedStore::on(OpKind::get, key, ScriptedStore::Fault::unavailable));
  const CommitResult doubtful = a.coord->commit(split, SplitProgress{6, "six", 6});
  EXPECT_EQ(script.fired(), 2);
  EXPECT_FALSE(doubtful.durable()) << "its outcome could not be settled";
  ASSERT_EQ(fleet.split_record(split).progress.done, 6u) << "the scripted write did not land";
  ASSERT_TRUE(a.coord->commit(split, SplitProgress{8, "eight"}).durable());
  const core::SplitRecord after = fleet.split_record(split);
  EXPECT_EQ(after.progress.watermark, 8u);
  EXPECT_EQ(after.progress.done, 6u) << "the done of the commit before it was written back";
}

}  // namespace
}  // namespace etlc::testing
