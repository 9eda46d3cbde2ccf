// The PostgreSQL sink fence against a real server (tests/support/pg_server): open raises the
// fence and returns the sink's progress; a batch commits rows and progress together or not at
// all; the fence row's lock makes a zombie's batch and the new owner's open take turns, and the
// higher epoch wins either way. Also the planner on a generated table and verify's counting.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "generate.hpp"
#include "pg.hpp"
#include "plan.hpp"
#include "schema.hpp"
#include "sink.hpp"
#include "support/pg_server.hpp"
#include "verify.hpp"

namespace pgb {
namespace {

using namespace std::chrono_literals;
using etlc::testing::PgServer;

class PgSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Connection c(server.url(), "test");
    create_sink(c, "t_sink");
    pool = std::make_shared<ConnPool>(server.url(), "test");
  }
  std::int64_t count(const std::string& sql) { return server.query_int("etlc", sql); }
  static std::vector<Row> rows(std::int64_t from, int n) {
    std::vector<Row> out;
    for (int i = 0; i < n; ++i) out.push_back(Row{from + i, "p" + std::to_string(from + i)});
    return out;
  }
  SinkWriter writer(std::uint64_t epoch, etlc::SplitProgress start) {
    return SinkWriter(*pool, SinkTarget{"job", "t_sink", true}, "s1", epoch, "w", std::move(start));
  }

  PgServer server;
  std::shared_ptr<ConnPool> pool;
  std::function<bool()> live = [] { return true; };
};

TEST_F(PgSinkTest, open_raises_the_fence_and_returns_the_sinks_progress_a_batch_moves_both) {
  PgSinkFence fence(pool, "job");
  auto r = fence.open("s1", 1);
  ASSERT_EQ(r.status, etlc::FenceStatus::open);
  EXPECT_EQ(r.progress.watermark, 0u);
  EXPECT_EQ(r.progress.state, "");
  SinkWriter w = writer(1, r.progress);
  std::string detail;
  ASSERT_EQ(w.write(rows(10, 3), live, detail), SinkWriter::Outcome::written) << detail;
  EXPECT_EQ(w.progress().watermark, 3u);
  EXPECT_EQ(w.progress().state, "12");
  EXPECT_EQ(count("SELECT count(*) FROM t_sink WHERE epoch = 1 AND split = 's1'"), 3);
  // Opening again at the same epoch (an unknown outcome retried) and at a newer one: the sink's
  // progress comes back.
  r = fence.open("s1", 1);
  ASSERT_EQ(r.status, etlc::FenceStatus::open);
  EXPECT_EQ(r.progress.watermark, 3u);
  r = fence.open("s1", 2);
  ASSERT_EQ(r.status, etlc::FenceStatus::open);
  EXPECT_EQ(r.progress.watermark, 3u);
  EXPECT_EQ(r.progress.state, "12");
  EXPECT_EQ(count("SELECT epoch FROM etlc_sink_fence WHERE job = 'job' AND split = 's1'"), 2);
}

TEST_F(PgSinkTest, an_older_epoch_is_refused_at_open_and_at_a_batch_and_writes_nothing) {
  PgSinkFence fence(pool, "job");
  ASSERT_EQ(fence.open("s1", 1).status, etlc::FenceStatus::open);
  SinkWriter zombie = writer(1, {});
  ASSERT_EQ(fence.open("s1", 2).status, etlc::FenceStatus::open);  // the new owner
  std::string detail;
  EXPECT_EQ(zombie.write(rows(1, 5), live, detail), SinkWriter::Outcome::refused);
  EXPECT_NE(detail.find("epoch 2"), std::string::npos) << detail;
  EXPECT_EQ(count("SELECT count(*) FROM t_sink"), 0);
  const auto r = fence.open("s1", 1);
  EXPECT_EQ(r.status, etlc::FenceStatus::refused);
  EXPECT_EQ(r.sink_epoch, 2u);
  EXPECT_EQ(count("SELECT epoch FROM etlc_sink_fence WHERE split = 's1'"), 2)
      << "a refused open never lowers the fence";
}

TEST_F(PgSinkTest, the_row_lock_makes_the_new_owner_wait_for_a_zombies_batch_then_resume_after_it) {
  PgSinkFence fence(pool, "job");
  ASSERT_EQ(fence.open("s1", 1).status, etlc::FenceStatus::open);
  // The zombie's batch, stopped between its fence check and COMMIT (holding the row lock).
  Connection z(server.url(), "zombie");
  z.exec("BEGIN");
  auto u = z.exec(
      "UPDATE etlc_sink_fence SET watermark = 4, state = '4' WHERE job = 'job' AND "
      "split = 's1' AND epoch = 1 AND watermark = 0");
  ASSERT_EQ(u.affected(), 1u);
  z.copy_in("COPY t_sink (id, payload, split, epoch, writer) FROM STDIN",
            "1\tp1\ts1\t1\tz\n2\tp2\ts1\t1\tz\n3\tp3\ts1\t1\tz\n4\tp4\ts1\t1\tz\n");
  auto opening = std::async(std::launch::async, [&] { return fence.open("s1", 2); });
  EXPECT_EQ(opening.wait_for(300ms), std::future_status::timeout)
      << "the new owner's open must wait for the zombie's row lock";
  z.exec("COMMIT");
  const auto r = opening.get();
  ASSERT_EQ(r.status, etlc::FenceStatus::open);
  EXPECT_EQ(r.progress.watermark, 4u) << "the new owner resumes after the zombie's batch";
  EXPECT_EQ(r.progress.state, "4");
  // ... and from there on the zombie can write nothing.
  SinkWriter zombie = writer(1, {4, "4"});
  std::string detail;
  EXPECT_EQ(zombie.write(rows(5, 2), live, detail), SinkWriter::Outcome::refused);
  SinkWriter owner = writer(2, r.progress);
  ASSERT_EQ(owner.write(rows(5, 2), live, detail), SinkWriter::Outcome::written) << detail;
  EXPECT_EQ(count("SELECT count(*) FROM t_sink"), 6);
  EXPECT_EQ(count("SELECT count(DISTINCT id) FROM t_sink"), 6);
}

TEST_F(PgSinkTest, a_batch_whose_session_lapsed_before_commit_is_rolled_back) {
  PgSinkFence fence(pool, "job");
  ASSERT_EQ(fence.open("s1", 1).status, etlc::FenceStatus::open);
  SinkWriter w = writer(1, {});
  int checks = 0;
  std::function<bool()> lapses_before_commit = [&] { return ++checks < 2; };
  std::string detail;
  EXPECT_EQ(w.write(rows(1, 3), lapses_before_commit, detail), SinkWriter::Outcome::lapsed);
  EXPECT_EQ(checks, 2) << "checked before the transaction and again right before COMMIT";
  EXPECT_EQ(count("SELECT count(*) FROM t_sink"), 0);
  EXPECT_EQ(count("SELECT watermark FROM etlc_sink_fence WHERE split = 's1'"), 0);
  EXPECT_EQ(w.progress().watermark, 0u);
}

TEST_F(PgSinkTest, a_fence_row_changed_by_hand_under_a_tenancy_is_an_error_not_a_write) {
  PgSinkFence fence(pool, "job");
  ASSERT_EQ(fence.open("s1", 3).status, etlc::FenceStatus::open);
  server.exec("etlc", "UPDATE etlc_sink_fence SET watermark = 99 WHERE split = 's1'");
  SinkWriter w = writer(3, {});
  std::string detail;
  try {
    w.write(rows(1, 2), live, detail);
    FAIL() << "a moved watermark must not be written over";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("changed by hand"), std::string::npos) << e.what();
  }
  server.exec("etlc", "DELETE FROM etlc_sink_fence WHERE split = 's1'");
  EXPECT_EQ(w.write(rows(1, 2), live, detail), SinkWriter::Outcome::refused);
  EXPECT_NE(detail.find("gone"), std::string::npos) << detail;
  EXPECT_EQ(count("SELECT count(*) FROM t_sink"), 0);
}

TEST_F(PgSinkTest, a_missing_fence_table_is_a_named_error_and_an_unreachable_sink_is_retryable) {
  server.exec("etlc", "DROP TABLE etlc_sink_fence");
  PgSinkFence fence(pool, "job");
  try {
    fence.open("s1", 1);
    FAIL() << "opening without a fence table must throw";
  } catch (const PgError& e) {
    EXPECT_TRUE(e.undefined_table()) << e.what();
    EXPECT_NE(std::string(e.what()).find("etlc_sink_fence"), std::string::npos) << e.what();
  }
  auto nowhere = std::make_shared<ConnPool>(
      "postgresql://etlc@127.0.0.1:" + std::to_string(etlc::testing::pick_free_port()) + "/x",
      "test");
  PgSinkFence down(nowhere, "job");
  const auto r = down.open("s1", 1);
  EXPECT_EQ(r.status, etlc::FenceStatus::retryable);
  EXPECT_NE(r.detail.find("cannot connect"), std::string::npos) << r.detail;
}

TEST_F(PgSinkTest, the_planner_balances_rows_over_sparse_clustered_ids_counted_or_from_stats) {
  GenerateOptions g{server.url(), "src", 30'000, 5, 4};
  const auto rep = generate(g);
  ASSERT_EQ(rep.rows, 30'000u);
  for (PlanFrom from : {PlanFrom::count, PlanFrom::stats}) {
    PgPlanner planner(PlanSettings{server.url(), "src", "src_sink", 2'000, from, true});
    const auto ranges = planner.ranges();
    ASSERT_EQ(ranges.size(), 15u);
    std::uint64_t total = 0;
    for (const auto& r : ranges) {
      // Count the real rows of each range: the weights are right, and they are balanced.
      const auto real =
          server.query_int("etlc", "SELECT count(*) FROM src WHERE id BETWEEN " +
                                       std::to_string(r.lo) + " AND " + std::to_string(r.hi));
      total += static_cast<std::uint64_t>(real);
      if (from == PlanFrom::count) {
        EXPECT_EQ(static_cast<std::uint64_t>(real), r.rows);
      }
      EXPECT_GT(real, 1'500) << "range " << r.lo << ".." << r.hi;
      EXPECT_LT(real, 2'500) << "range " << r.lo << ".." << r.hi;
    }
    EXPECT_EQ(total, 30'000u);
  }
  // By id span instead, one of 15 equal spans of the id range holds far more than its share.
  const std::int64_t span = (rep.max_id - rep.min_id) / 15 + 1;
  const auto heaviest = server.query_int(
      "etlc", "SELECT max(c) FROM (SELECT count(*) AS c FROM src GROUP BY (id - " +
                  std::to_string(rep.min_id) + ") / " + std::to_string(span) + ") s");
  EXPECT_GT(heaviest, 5'000);
}

TEST_F(PgSinkTest, verify_counts_missing_duplicate_unexpected_and_wrong_rows) {
  server.exec("etlc", "CREATE TABLE v (id bigint PRIMARY KEY, payload text NOT NULL)");
  server.exec("etlc", "INSERT INTO v SELECT g, 'p' || g FROM generate_series(1, 100) g");
  server.exec("etlc", "INSERT INTO t_sink SELECT id, payload, 's', 1, 'w' FROM v WHERE id > 3");
  server.exec("etlc",
              "INSERT INTO t_sink SELECT id, payload, 's', 2, 'w' FROM v WHERE id <= 10 "
              "AND id > 5");
  server.exec("etlc", "INSERT INTO t_sink VALUES (500, 'x', 's', 1, 'w'), (-1, 'y', 's', 1, 'w')");
  server.exec("etlc", "UPDATE t_sink SET payload = 'bad' WHERE id = 50");
  const auto rep = verify(VerifyOptions{server.url(), server.url(), "v", "t_sink"});
  EXPECT_EQ(rep.source_rows, 100u);
  EXPECT_EQ(rep.missing, 3u);
  EXPECT_EQ(rep.duplicates, 5u);
  EXPECT_EQ(rep.unexpected, 2u);
  EXPECT_EQ(rep.wrong, 1u);
  EXPECT_FALSE(rep.ok());
}

}  // namespace
}  // namespace pgb
