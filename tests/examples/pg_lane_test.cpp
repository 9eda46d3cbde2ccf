// The range-scan lane splitting itself (Lane::split) against a real PostgreSQL, through the
// fenced sink as the Driver runs it (open the fence, resume from the larger progress, step):
// a lane cut mid-range and a fresh lane on the residual's descriptor write every id exactly once;
// a next owner resumed from the progress after the cut (the record's, or the sink's when a batch
// landed after the cut) stops at the cut; a range with too little left declines.
#include <gtest/gtest.h>

#include <limits>
#include <ostream>
#include <stdexcept>

#include "lane.hpp"
#include "plan.hpp"
#include "schema.hpp"
#include "sink.hpp"
#include "support/pg_server.hpp"
#include "verify.hpp"

namespace etlc {
// Failure messages show the progress, not its bytes.
inline void PrintTo(const SplitProgress& p, std::ostream* os) {
  *os << "{" << p.watermark << ", \"" << p.state << "\"}";
}
}  // namespace etlc

namespace pgb {
namespace {

using etlc::testing::PgServer;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

class PgLaneSplit : public ::testing::Test {
 protected:
  // 1000 rows with ids 3, 6, ..., 3000; pages of 100.
  void SetUp() override {
    server.exec("etlc", "CREATE TABLE src (id bigint PRIMARY KEY, payload text NOT NULL)");
    server.exec("etlc",
                "INSERT INTO src SELECT 3 * g, 'p' || (3 * g) FROM generate_series(1, 1000) g");
    Connection c(server.url(), "test");
    create_sink(c, "src_sink");
    pool = std::make_shared<ConnPool>(server.url(), "test");
    LaneSettings s;
    s.source = pool;
    s.sink = pool;
    s.table = "src";
    s.target = SinkTarget{"job", "src_sink", true};
    s.batch_rows = 100;
    s.counters = &counters;
    source = std::make_unique<PgSource>(std::move(s));
    fence = std::make_unique<PgSinkFence>(pool, "job");
  }

  // The Driver's way: raise the sink fence to `epoch`, resume from the sink's progress when it is
  // ahead of the record's, open the lane.
  std::unique_ptr<etlc::Lane> open(const etlc::SplitSpec& spec, std::uint64_t epoch,
                                   const etlc::SplitProgress& record = {}) {
    const auto f = fence->open(spec.id, epoch);
    if (f.status != etlc::FenceStatus::open) throw std::runtime_error("fence: " + f.detail);
    const etlc::SplitProgress& resume =
        f.progress.watermark > record.watermark ? f.progress : record;
    return source->open(etlc::LaneContext{spec, epoch, resume, "m1", {}, {}});
  }
  static etlc::SplitSpec spec_of(const std::string& id, const etlc::SplitResidual& r) {
    return {id, r.descriptor, r.weight};
  }

  // Steps `n` times (each a batch) unless the split ends first.
  static void step(etlc::Lane& lane, int n) {
    for (int i = 0; i < n; ++i) {
      const auto r = lane.step();
      ASSERT_NE(r.status, etlc::StepResult::Status::poison) << r.reason;
      ASSERT_NE(r.status, etlc::StepResult::Status::fenced) << r.reason;
      if (r.status == etlc::StepResult::Status::end_of_split) return;
    }
  }
  static void run_to_end(etlc::Lane& lane) {
    for (int i = 0; i < 100; ++i) {
      const auto r = lane.step();
      ASSERT_NE(r.status, etlc::StepResult::Status::poison) << r.reason;
      ASSERT_NE(r.status, etlc::StepResult::Status::fenced) << r.reason;
      if (r.status == etlc::StepResult::Status::end_of_split) return;
    }
    FAIL() << "no end of split after 100 steps";
  }

  std::int64_t count(const std::string& sql) { return server.query_int("etlc", sql); }
  std::string fence_state(const std::string& split) {
    Connection c(server.url(), "test");
    Result r = c.exec("SELECT state FROM etlc_sink_fence WHERE split = $1", {split});
    return r.rows() == 1 ? std::string(r.text(0, 0)) : "<none>";
  }
  // Every source row in the sink exactly once, each split's rows on its side of the cut.
  void expect_exactly_once(std::int64_t cut, const std::string& parent, const std::string& child) {
    const auto rep = verify(VerifyOptions{server.url(), server.url(), "src", "src_sink"});
    EXPECT_EQ(rep.source_rows, 1'000u);
    EXPECT_TRUE(rep.ok()) << "missing " << rep.missing << ", duplicates " << rep.duplicates
                          << ", unexpected " << rep.unexpected << ", wrong " << rep.wrong;
    const std::string c = std::to_string(cut);
    EXPECT_EQ(count("SELECT count(*) FROM src_sink WHERE split = '" + parent + "' AND id >= " + c),
              0);
    EXPECT_EQ(count("SELECT count(*) FROM src_sink WHERE split = '" + child + "' AND id < " + c),
              0);
    EXPECT_EQ(count("SELECT count(*) FROM src_sink WHERE split NOT IN ('" + parent + "', '" +
                    child + "')"),
              0);
  }

  PgServer server;
  std::shared_ptr<ConnPool> pool;
  Counters counters;
  std::unique_ptr<PgSource> source;
  std::unique_ptr<PgSinkFence> fence;
};

TEST_F(PgLaneSplit, a_lane_cut_mid_range_and_a_lane_on_its_residual_write_every_id_exactly_once) {
  // The planner's one range over the whole table: INT64_MIN..INT64_MAX, weight 1000 rows.
  const auto ranges =
      PgPlanner(PlanSettings{server.url(), "src", "src_sink", 1'000, PlanFrom::count, true})
          .ranges();
  ASSERT_EQ(ranges.size(), 1u);
  const etlc::SplitSpec parent{"r0000", encode_range(ranges[0]), ranges[0].rows};
  auto lane = open(parent, 1);
  step(*lane, 3);  // ids 3..900
  ASSERT_EQ(lane->durable_progress(), (etlc::SplitProgress{300, "900"}));

  const auto residual = lane->split(0.5);
  ASSERT_TRUE(residual.has_value());
  const auto rest = decode_range(residual->descriptor);
  ASSERT_TRUE(rest.has_value()) << residual->descriptor;
  // Ids 903..3000 are left: half of that key span stays, the rest (ids 1953..3000, 350 rows) goes.
  EXPECT_EQ(rest->lo, 1'952);
  EXPECT_EQ(rest->hi, kMax);
  EXPECT_EQ(residual->weight, 350u);
  EXPECT_EQ(lane->durable_progress(), (etlc::SplitProgress{300, "900 hi=1951"}))
      << "the cut is in the state before the next batch";

  run_to_end(*lane);
  EXPECT_EQ(lane->durable_progress(), (etlc::SplitProgress{650, "1950 hi=1951"}));
  EXPECT_EQ(fence_state("r0000"), "1950 hi=1951") << "the sink's progress carries the cut too";
  lane->close(etlc::LaneEnd::completed);

  auto child = open(spec_of("r0000~1", *residual), 1);
  EXPECT_EQ(child->durable_progress(), (etlc::SplitProgress{0, ""}));
  run_to_end(*child);
  EXPECT_EQ(child->durable_progress(), (etlc::SplitProgress{350, "3000"}));
  child->close(etlc::LaneEnd::completed);
  expect_exactly_once(1'952, "r0000", "r0000~1");
}

TEST_F(PgLaneSplit, a_next_owner_resumed_from_the_committed_cut_stops_at_the_cut) {
  const etlc::SplitSpec parent{"s", "1 3000", 1'000};
  auto lane = open(parent, 1);
  step(*lane, 2);  // ids 3..600
  const auto residual = lane->split(0.5);
  ASSERT_TRUE(residual.has_value());
  const auto rest = decode_range(residual->descriptor);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->lo, 1'802);  // ids 603..3000 left, 1199 of 2398 keys kept
  EXPECT_EQ(rest->hi, 3'000);
  // What the Driver commits with the residual's split; then the member is lost.
  const etlc::SplitProgress record = lane->durable_progress();
  EXPECT_EQ(record, (etlc::SplitProgress{200, "600 hi=1801"}));
  EXPECT_EQ(fence_state("s"), "600") << "no batch since the cut: the sink's is the old form";
  lane->close(etlc::LaneEnd::lost);
  lane.reset();

  // The next owner: the sink is not ahead, so the record's progress (with the cut) is the resume.
  auto next = open(parent, 2, record);
  EXPECT_EQ(next->durable_progress(), record);
  run_to_end(*next);
  EXPECT_EQ(next->durable_progress(), (etlc::SplitProgress{600, "1800 hi=1801"}));
  next->close(etlc::LaneEnd::completed);

  auto child = open(spec_of("s~1", *residual), 1);
  run_to_end(*child);
  child->close(etlc::LaneEnd::completed);
  expect_exactly_once(rest->lo, "s", "s~1");
}

TEST_F(PgLaneSplit, a_next_owner_resumed_from_the_sinks_progress_after_the_cut_stops_at_the_cut) {
  const etlc::SplitSpec parent{"s", "1 3000", 1'000};
  auto lane = open(parent, 1);
  step(*lane, 2);
  const auto residual = lane->split(0.5);
  ASSERT_TRUE(residual.has_value());
  const etlc::SplitProgress record = lane->durable_progress();  // committed with the cut
  step(*lane, 1);  // one more batch lands in the sink, then the member crashes before committing
  EXPECT_EQ(fence_state("s"), "900 hi=1801");
  lane->close(etlc::LaneEnd::aborted);
  lane.reset();

  auto next = open(parent, 2, record);
  EXPECT_EQ(next->durable_progress(), (etlc::SplitProgress{300, "900 hi=1801"}))
      << "resumed from the sink, which is ahead";
  run_to_end(*next);
  EXPECT_EQ(next->durable_progress().watermark, 600u);
  next->close(etlc::LaneEnd::completed);

  auto child = open(spec_of("s~1", *residual), 1);
  run_to_end(*child);
  child->close(etlc::LaneEnd::completed);
  expect_exactly_once(1'802, "s", "s~1");
}

TEST_F(PgLaneSplit,
       a_lane_cuts_again_inside_its_shrunk_range_and_declines_when_too_little_is_left) {
  const etlc::SplitSpec parent{"s", "1 3000", 1'000};
  auto lane = open(parent, 1);
  // Before reading anything: ids 3..3000 left, the first cut keeps 1499 of 2998 keys.
  const auto first = lane->split(0.5);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->descriptor, "1502 3000");
  EXPECT_EQ(lane->durable_progress(), (etlc::SplitProgress{0, "hi=1501"}));
  // ... and again: ids 3..1500 left (the range ends at 1501 now), 1124 of 1498 keys kept.
  const auto second = lane->split(0.75);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->descriptor, "1127 1501");
  EXPECT_EQ(lane->durable_progress(), (etlc::SplitProgress{0, "hi=1126"}));
  run_to_end(*lane);
  EXPECT_EQ(lane->durable_progress(), (etlc::SplitProgress{375, "1125 hi=1126"}));
  // Nothing left: declined, and the state stays as it was.
  EXPECT_FALSE(lane->split(0.5).has_value());
  EXPECT_EQ(lane->durable_progress(), (etlc::SplitProgress{375, "1125 hi=1126"}));
  lane->close(etlc::LaneEnd::completed);

  // One id left (3000, of 2998..3000): declined; no row (a range between ids): declined; ids 3
  // and 6, but keeping 90 % of their 4 keys would leave the residual none: declined.
  auto one = open({"one", "2998 3000", 1}, 1);
  EXPECT_FALSE(one->split(0.5).has_value());
  EXPECT_EQ(one->durable_progress(), (etlc::SplitProgress{0, ""}));
  auto none = open({"none", "3001 3002", 0}, 1);
  EXPECT_FALSE(none->split(0.5).has_value());
  auto two = open({"two", "3 6", 2}, 1);
  EXPECT_FALSE(two->split(0.9).has_value());
  const auto halves = two->split(0.5);
  ASSERT_TRUE(halves.has_value());
  EXPECT_EQ(halves->descriptor, "5 6");
  EXPECT_EQ(halves->weight, 1u);
}

}  // namespace
}  // namespace pgb
