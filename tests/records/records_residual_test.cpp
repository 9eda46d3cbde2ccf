// The record fields of dynamic splitting: a split record's children and cut_from, the pending
// status, and an assignment record's split requests. Golden encodings and the refusals.
#include <gtest/gtest.h>

#include "core/cut_rules.hpp"
#include "core/keys.hpp"
#include "core/records.hpp"
#include "core/repair_rules.hpp"
#include "etlc/errors.hpp"

namespace etlc::core {
namespace {

TEST(ResidualRecords, SplitRecordWithChildrenAndOriginGolden) {
  SplitRecord r;
  r.id = "s1~7.1";
  r.epoch = 2;
  r.weight = 350;
  r.progress = SplitProgress{10, "end=9", 10};
  r.children = {"s1~7.1~2.1", "s1~7.1~2.2"};
  r.cut_from = SplitOrigin{"s1", 7};
  const std::string json =
      R"({"v":1,"id":"s1~7.1","epoch":2,"status":"runnable","attempts":0,"weight":350,)"
      R"("progress":{"watermark":10,"state":"ZW5kPTk=","done":10},)"
      R"("children":["s1~7.1~2.1","s1~7.1~2.2"],"cut_from":{"split":"s1","epoch":7}})";
  EXPECT_EQ(encode(r), json);
  EXPECT_EQ(decode_split(split_key("s1~7.1"), json), r);
  const SplitRecord pending = pending_child("s1~7.1", 350, SplitOrigin{"s1", 7});
  EXPECT_EQ(decode_split(split_key("s1~7.1"), encode(pending)), pending);
  EXPECT_EQ(to_string(SplitStatus::pending), "pending");
}

TEST(ResidualRecords, BadChildrenAndOriginsAreRefused) {
  const std::string head =
      R"({"v":1,"id":"s","epoch":1,"status":"runnable","attempts":0,"weight":1,)"
      R"("progress":{"watermark":0,"state":""})";
  auto code = [&](const std::string& tail) {
    try {
      decode_split("split.s", head + tail + "}");
    } catch (const RecordError& e) {
      return e.code();
    }
    return RecordErrc::malformed;  // not refused: the caller's EXPECT fails on it
  };
  EXPECT_EQ(code(R"(,"children":[])"), RecordErrc::wrong_type) << "one encoding: absent";
  EXPECT_EQ(code(R"(,"children":["a","a"])"), RecordErrc::wrong_type);
  EXPECT_EQ(code(R"(,"children":[""])"), RecordErrc::wrong_type);
  EXPECT_EQ(code(R"(,"children":"a")"), RecordErrc::wrong_type);
  EXPECT_EQ(code(R"(,"cut_from":{"split":"p"})"), RecordErrc::missing_field);
  EXPECT_EQ(code(R"(,"cut_from":{"split":"p","epoch":1,"x":1})"), RecordErrc::unknown_field);
  std::string many = R"(,"children":[)";
  for (std::size_t i = 0; i <= kMaxChildrenPerSplit; ++i) {
    many += (i ? "," : "") + std::string("\"c") + std::to_string(i) + "\"";
  }
  EXPECT_EQ(code(many + "]"), RecordErrc::wrong_type);
  SplitRecord r;
  r.id = "s";
  r.children = {"a", "a"};
  EXPECT_THROW(encode(r), ConfigError);
}

// A pending record must say where it came from, and a residual's origin is the one its id
// names: garbage that would otherwise wait for ever is unreadable, so healing takes it up.
TEST(ResidualRecords, AnOriginMustBeTheOneTheIdNames) {
  auto refused = [](const std::string& id, const std::string& tail) {
    const std::string json = R"({"v":1,"id":")" + id +
                             R"(","epoch":0,"status":"pending","attempts":0,"weight":1,)"
                             R"("progress":{"watermark":0,"state":""})" +
                             tail + "}";
    try {
      decode_split(split_key(id), json);
    } catch (const RecordError& e) {
      return e.code() == RecordErrc::wrong_type;
    }
    return false;
  };
  EXPECT_TRUE(refused("p~4.1", "")) << "pending without an origin";
  EXPECT_TRUE(refused("p~4.1", R"(,"cut_from":{"split":"q","epoch":4})"));
  EXPECT_TRUE(refused("p~4.1", R"(,"cut_from":{"split":"p","epoch":5})"));
  EXPECT_TRUE(refused("p", R"(,"cut_from":{"split":"p","epoch":4})")) << "not a residual's id";
  EXPECT_FALSE(refused("p~4.1", R"(,"cut_from":{"split":"p","epoch":4})"));
  SplitRecord r = pending_child("p~4.1", 1, SplitOrigin{"q", 4});
  EXPECT_THROW(encode(r), ConfigError);
  r.cut_from.reset();
  EXPECT_THROW(encode(r), ConfigError);
}

// A residual's spec records its parent's progress after the cut; only a residual's may.
TEST(ResidualRecords, ResidualSpecWithParentProgressGolden) {
  const SpecRecord spec{SplitSpec{"p~4.1", "rows", 40}, SplitProgress{6, "end=60", 20}};
  const std::string json = R"({"v":1,"id":"p~4.1","descriptor":"cm93cw==","weight":40,)"
                           R"("parent_progress":{"watermark":6,"state":"ZW5kPTYw","done":20}})";
  EXPECT_EQ(encode(spec), json);
  EXPECT_EQ(decode_spec(spec_key("p~4.1"), json), spec);
  EXPECT_THROW(encode(SpecRecord{SplitSpec{"p", "rows", 40}, SplitProgress{}}), ConfigError);
  EXPECT_THROW(decode_spec(spec_key("p"), R"({"v":1,"id":"p","descriptor":"","weight":1,)"
                                          R"("parent_progress":{"watermark":0,"state":""}})"),
               RecordError);
  EXPECT_THROW(decode_spec(spec_key("p~4.1"), R"({"v":1,"id":"p~4.1","descriptor":"",)"
                                              R"("weight":1,"parent_progress":{"state":""}})"),
               RecordError);
}

TEST(ResidualRecords, AssignmentSplitRequestsGolden) {
  const AssignmentRecord a{"m1", 4, {"a", "b"}, {SplitAsk{"b", 3, 1, 500'000}}};
  const std::string json =
      R"({"v":1,"instance":"m1","term":4,"splits":["a","b"],)"
      R"("split_requests":[{"split":"b","epoch":3,"children":1,"keep_ppm":500000}]})";
  EXPECT_EQ(encode(a), json);
  EXPECT_EQ(decode_assignment("assign.m1", json), a);
}

TEST(ResidualRecords, SplitRequestsMustNameTheRecordsOwnSplits) {
  EXPECT_THROW(encode(AssignmentRecord{"m1", 1, {"a"}, {SplitAsk{"z", 1, 0, 500'000}}}),
               ConfigError);
  EXPECT_THROW(encode(AssignmentRecord{"m1", 1, {"a"}, {SplitAsk{"a", 1, 0, 0}}}), ConfigError);
  EXPECT_THROW(encode(AssignmentRecord{"m1", 1, {"a"}, {SplitAsk{"a", 1, 0, 1'000'000}}}),
               ConfigError);
  EXPECT_THROW(encode(AssignmentRecord{
                   "m1", 1, {"a", "b"}, {SplitAsk{"b", 1, 0, 1}, SplitAsk{"a", 1, 0, 1}}}),
               ConfigError);
  const std::string head = R"({"v":1,"instance":"m1","term":1,"splits":["a"],"split_requests":)";
  for (const std::string tail : {R"([])", R"([{"split":"z","epoch":1,"children":0,"keep_ppm":1}])",
                                 R"([{"split":"a","epoch":1,"children":0,"keep_ppm":0}])",
                                 R"([{"split":"a","epoch":1,"children":0}])", R"({"split":"a"})"}) {
    EXPECT_THROW(decode_assignment("assign.m1", head + tail + "}"), RecordError) << tail;
  }
}

TEST(CutRules, ChildIdsNameTheTenancyAndTheCut) {
  EXPECT_EQ(child_split_id("files/a.csv", 12, 3), "files/a.csv~12.3");
  EXPECT_TRUE(child_id_fits(std::string(200, 'x')));
  EXPECT_FALSE(child_id_fits(std::string(240, 'x')));
  EXPECT_THROW(child_split_id(std::string(253, 'x'), 1, 1), ConfigError);
  EXPECT_TRUE(residual_id_form(child_split_id("a~1.2", 30, 4)));
  for (const char* planned :
       {"a", "a~1", "a.1", "~1.2", "a~.1", "a~1.", "backup~1.csv", "x~1.2b"}) {
    EXPECT_FALSE(residual_id_form(planned)) << planned;
  }
}

// The origin a residual's id names, and the record a leader rebuilds from its spec alone (sim
// operator 318): runnable only when its parent names it.
TEST(CutRules, AResidualRebuiltFromItsSpecIsPendingUnlessItsParentNamesIt) {
  EXPECT_EQ(residual_origin(child_split_id("a~1.2", 30, 4)), (SplitOrigin{"a~1.2", 30}));
  EXPECT_EQ(residual_origin("a"), std::nullopt);
  EXPECT_EQ(residual_origin("a~99999999999999999999.1"), std::nullopt) << "epoch overflows";
  const std::string child = child_split_id("p", 3, 1);
  const SplitSpec spec{child, "rows", 40};
  SplitRecord parent;
  parent.id = "p";
  SplitRecord r = rebuild_residual(spec, SplitOrigin{"p", 3}, 9, &parent);
  EXPECT_EQ(r.status, SplitStatus::pending);
  EXPECT_EQ(r.cut_from, (SplitOrigin{"p", 3}));
  EXPECT_EQ(r.epoch, 9u);
  EXPECT_EQ(r.weight, 40u);
  EXPECT_EQ(rebuild_residual(spec, SplitOrigin{"p", 3}, 9, nullptr).status, SplitStatus::pending);
  parent.children = {child};
  EXPECT_EQ(rebuild_residual(spec, SplitOrigin{"p", 3}, 9, &parent).status, SplitStatus::runnable);
}

TEST(CutRules, TheParentNamesTheChildAndGivesUpItsWeight) {
  SplitRecord parent;
  parent.id = "p";
  parent.epoch = 4;
  parent.owner = "m";
  parent.weight = 100;
  parent.progress = SplitProgress{5, "old", 20};
  const SplitRecord next =
      cut_parent(parent, SplitProgress{6, "end=60", std::nullopt}, "p~4.1", 40);
  EXPECT_EQ(next.children, std::vector<std::string>{"p~4.1"});
  EXPECT_EQ(next.weight, 60u);
  EXPECT_EQ(next.progress.state, "end=60");
  EXPECT_EQ(next.progress.done, 20u) << "a cut without done keeps the last one";
  EXPECT_EQ(cut_parent(parent, SplitProgress{}, "c", 500).weight, 0u);
}

// A parent rebuilt from its spec takes back its cuts: named, its weight lowered by each, resumed
// from the last readable cut's parent progress (sim operator 23281).
TEST(CutRules, AParentRebuiltFromItsSpecResumesAtItsLastReadableCut) {
  auto cut = [](const std::string& child, std::uint64_t w, std::uint64_t wm, const char* end) {
    return CutSeen{child, SpecRecord{SplitSpec{child, "d", w}, SplitProgress{wm, end, wm}}};
  };
  SplitRecord r = rebuild_from_spec(SplitSpec{"p", "d", 100}, 7);
  EXPECT_EQ(apply_cuts(r, {cut("p~2.1", 30, 5, "70"), cut("p~3.1", 20, 9, "50")}), 0u);
  EXPECT_EQ(r.children, (std::vector<std::string>{"p~2.1", "p~3.1"}));
  EXPECT_EQ(r.weight, 50u);
  EXPECT_EQ(r.progress, (SplitProgress{9, "50", 9}));
  // The last cut's spec unreadable: named, but the parent ends at the cut before it.
  SplitRecord t = rebuild_from_spec(SplitSpec{"p", "d", 100}, 7);
  EXPECT_EQ(apply_cuts(t, {cut("p~2.1", 30, 5, "70"), CutSeen{"p~3.1", std::nullopt}}), 1u);
  EXPECT_EQ(t.children.size(), 2u);
  EXPECT_EQ(t.progress, (SplitProgress{5, "70", 5}));
  EXPECT_EQ(t.weight, 70u);
  // No cut readable: the planned range, from the start.
  SplitRecord none = rebuild_from_spec(SplitSpec{"p", "d", 100}, 7);
  EXPECT_EQ(apply_cuts(none, {CutSeen{"p~2.1", std::nullopt}}), 1u);
  EXPECT_EQ(none.progress, SplitProgress{});
  EXPECT_EQ(none.weight, 100u);
}

TEST(CutRules, APendingChildIsMadeRunnableOnlyOnceNamedAndDeletedOnlyOnceItCannotBe) {
  SplitRecord parent;
  parent.id = "p";
  parent.epoch = 4;
  parent.owner = "m";
  const SplitRecord child = pending_child("p~4.1", 10, SplitOrigin{"p", 4});
  EXPECT_EQ(pending_child_fate(child, nullptr), ChildFate::wait);
  EXPECT_EQ(pending_child_fate(child, &parent), ChildFate::wait) << "its cutter may still name it";
  SplitRecord named = parent;
  named.children = {"p~4.1"};
  EXPECT_EQ(pending_child_fate(child, &named), ChildFate::flip);
  named.epoch = 9;  // named, then taken over: still its parent's
  named.owner = "n";
  EXPECT_EQ(pending_child_fate(child, &named), ChildFate::flip);
  SplitRecord moved = parent;
  moved.epoch = 5;
  EXPECT_EQ(pending_child_fate(child, &moved), ChildFate::orphan);
  SplitRecord behind = parent;  // a view that has not seen the cutter's claim yet
  behind.epoch = 3;
  behind.owner = "old";
  EXPECT_EQ(pending_child_fate(child, &behind), ChildFate::wait);
  behind.owner.reset();
  EXPECT_EQ(pending_child_fate(child, &behind), ChildFate::wait);
  SplitRecord released = parent;
  released.owner.reset();
  EXPECT_EQ(pending_child_fate(child, &released), ChildFate::orphan);
  SplitRecord done = parent;
  done.status = SplitStatus::completed;
  EXPECT_EQ(pending_child_fate(child, &done), ChildFate::orphan);
  SplitRecord runnable_child = child;
  runnable_child.status = SplitStatus::runnable;
  EXPECT_EQ(pending_child_fate(runnable_child, &moved), ChildFate::wait) << "not pending";
}

}  // namespace
}  // namespace etlc::core
