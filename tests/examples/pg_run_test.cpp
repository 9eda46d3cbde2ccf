// The pg-backfill binary against real PostgreSQL servers, on the memory store: a clean run is
// exactly-once; bad input gives a clear, named error and loses nothing (a sink table missing, a
// sink fence row from a newer epoch than any grant, the sink database refusing connections
// mid-run).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "examples/child_process.hpp"
#include "examples/temp_dir.hpp"
#include "support/pg_server.hpp"

namespace fb::testing {
namespace {

using namespace std::chrono_literals;
using etlc::testing::PgServer;
using etlc::testing::PgServerConfig;

const std::string kBin = PG_BACKFILL_BIN;

std::vector<std::string> run_args(const PgServer& src, const PgServer& snk, const std::string& job,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> a{kBin,
                             "run",
                             "--source-pg",
                             src.url(),
                             "--sink-pg",
                             snk.url(),
                             "--table",
                             "orders",
                             "--job",
                             job,
                             "--lease-ms",
                             "1500",
                             "--rebalance-delay-ms",
                             "300",
                             "--commit-interval-ms",
                             "200"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

int generate(const PgServer& s, int rows, const std::filesystem::path& log) {
  return run_to_end({kBin, "generate", "--pg", s.url(), "--table", "orders", "--rows",
                     std::to_string(rows), "--seed", "11"},
                    log);
}

int init_sink(const PgServer& s, const std::filesystem::path& log) {
  return run_to_end({kBin, "init-sink", "--sink-pg", s.url(), "--table", "orders"}, log);
}

std::string verify(const PgServer& src, const PgServer& snk, const std::filesystem::path& log,
                   int& rc) {
  rc = run_to_end(
      {kBin, "verify", "--source-pg", src.url(), "--sink-pg", snk.url(), "--table", "orders"}, log);
  return read_text(log);
}

TEST(PgBackfillRun, two_members_copy_every_row_exactly_once_and_verify_says_so) {
  PgServer src, snk;
  ScratchDir d("pg-run");
  ASSERT_EQ(generate(src, 20'000, d.path() / "gen.log"), 0) << read_text(d.path() / "gen.log");
  ASSERT_EQ(init_sink(snk, d.path() / "init.log"), 0) << read_text(d.path() / "init.log");
  const int rc = run_to_end(run_args(src, snk, "clean", {"--members", "2", "--split-rows", "2000"}),
                            d.path() / "run.log", 120s);
  ASSERT_EQ(rc, 0) << read_text(d.path() / "run.log");
  int vrc = 0;
  const std::string v = verify(src, snk, d.path() / "verify.log", vrc);
  EXPECT_EQ(vrc, 0) << v;
  EXPECT_NE(v.find("missing 0, duplicates 0"), std::string::npos) << v;
  EXPECT_EQ(snk.query_int("etlc", "SELECT count(*) FROM etlc_sink_fence WHERE job = 'clean'"), 10);
  EXPECT_EQ(snk.query_int("etlc", "SELECT sum(watermark) FROM etlc_sink_fence"), 20'000);
}

TEST(PgBackfillRun, a_missing_sink_table_is_one_named_line_and_exit_2_writing_nothing) {
  PgServer src, snk;
  ScratchDir d("pg-missing");
  ASSERT_EQ(generate(src, 1'000, d.path() / "gen.log"), 0);
  int rc = run_to_end(run_args(src, snk, "m"), d.path() / "run.log");
  std::string log = read_text(d.path() / "run.log");
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("error: the sink table 'orders_sink' does not exist in postgresql://"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("pg-backfill init-sink"), std::string::npos) << log;
  // The fence table missing (a sink table made by hand) is named as well.
  snk.exec("etlc",
           "CREATE TABLE orders_sink (id bigint, payload text, split text, epoch bigint, "
           "writer text)");
  rc = run_to_end(run_args(src, snk, "m"), d.path() / "run2.log");
  log = read_text(d.path() / "run2.log");
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("'etlc_sink_fence' does not exist"), std::string::npos) << log;
  EXPECT_EQ(snk.query_int("etlc", "SELECT count(*) FROM orders_sink"), 0);
  // ... and so is a missing source table.
  rc = run_to_end(
      {kBin, "run", "--source-pg", src.url(), "--sink-pg", snk.url(), "--table", "nothing"},
      d.path() / "run3.log");
  log = read_text(d.path() / "run3.log");
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("the source table 'nothing' does not exist"), std::string::npos) << log;
}

TEST(PgBackfillRun, a_fence_row_from_a_newer_epoch_quarantines_that_split_named_and_loses_nothing) {
  PgServer src, snk;
  ScratchDir d("pg-newer");
  ASSERT_EQ(generate(src, 5'000, d.path() / "gen.log"), 0);
  ASSERT_EQ(init_sink(snk, d.path() / "init.log"), 0);
  // An operator's mistake: a fence row at an epoch no grant of this job ever had.
  snk.exec("etlc", "INSERT INTO etlc_sink_fence VALUES ('newer', 'r0000', 1000, 0, '')");
  const auto args = run_args(src, snk, "newer", {"--split-rows", "1000", "--max-attempts", "3"});
  const int rc = run_to_end(args, d.path() / "run.log", 120s);
  const std::string log = read_text(d.path() / "run.log");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find("the sink fence of split 'r0000' stands at epoch 1000"), std::string::npos)
      << log;
  EXPECT_NE(log.find("the job stalled: 4 splits completed, 1 quarantined"), std::string::npos)
      << log;
  EXPECT_EQ(snk.query_int("etlc", "SELECT count(*) FROM orders_sink WHERE split = 'r0000'"), 0)
      << "a refused split writes nothing";
  EXPECT_EQ(snk.query_int("etlc",
                          "SELECT count(*) FROM etlc_sink_fence WHERE split = 'r0000' "
                          "AND epoch = 1000"),
            1)
      << "the fence row is left as it was";
  int vrc = 0;
  std::string v = verify(src, snk, d.path() / "verify.log", vrc);
  EXPECT_NE(v.find("duplicates 0"), std::string::npos) << v;
  EXPECT_NE(v.find("unexpected 0, wrong 0"), std::string::npos) << v;
  const auto r0000_rows = src.query_int("etlc", "SELECT count(*) FROM orders") -
                          snk.query_int("etlc", "SELECT count(*) FROM orders_sink");
  EXPECT_NE(v.find("missing " + std::to_string(r0000_rows) + ","), std::string::npos) << v;

  // Repaired (the row removed), a new run writes the rest and nothing twice: the completed
  // splits resume at their sink watermark, which is their end.
  snk.exec("etlc", "DELETE FROM etlc_sink_fence WHERE split = 'r0000'");
  ASSERT_EQ(run_to_end(args, d.path() / "rerun.log", 120s), 0) << read_text(d.path() / "rerun.log");
  v = verify(src, snk, d.path() / "verify2.log", vrc);
  EXPECT_EQ(vrc, 0) << v;
  EXPECT_NE(v.find("missing 0, duplicates 0"), std::string::npos) << v;
}

TEST(PgBackfillRun, the_sink_refusing_connections_mid_run_is_named_retried_and_loses_nothing) {
  PgServer src, snk;
  ScratchDir d("pg-refused");
  ASSERT_EQ(generate(src, 12'000, d.path() / "gen.log"), 0);
  ASSERT_EQ(init_sink(snk, d.path() / "init.log"), 0);
  ChildProcess run(run_args(src, snk, "refused",
                            {"--members", "2", "--split-rows", "1500", "--batch-rows", "200",
                             "--throttle-rows-per-s", "1500"}),
                   d.path() / "run.log");
  auto rows = [&] { return snk.query_int("etlc", "SELECT count(*) FROM orders_sink"); };
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (rows() < 1'000 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  ASSERT_GE(rows(), 1'000) << read_text(d.path() / "run.log");
  ASSERT_LT(rows(), 12'000) << "finished before the sink could be stopped";
  snk.stop();  // connections break, new ones are refused
  // Named: which database, and libpq's reason (the first lines may name the broken connection,
  // later ones the refused reconnect).
  auto logged = [&](const std::string& needle) {
    const auto named_until = std::chrono::steady_clock::now() + 60s;
    while (read_text(d.path() / "run.log").find(needle) == std::string::npos &&
           std::chrono::steady_clock::now() < named_until) {
      std::this_thread::sleep_for(50ms);
    }
    return read_text(d.path() / "run.log").find(needle) != std::string::npos;
  };
  EXPECT_TRUE(logged("the sink database is unreachable (retrying)"))
      << read_text(d.path() / "run.log");
  EXPECT_TRUE(logged("Connection refused")) << read_text(d.path() / "run.log");
  EXPECT_FALSE(run.wait_for(0ms).has_value()) << "an unreachable sink must not end the job";
  snk.start();  // the same port and data
  const auto rc = run.wait_for(120s);
  ASSERT_TRUE(rc.has_value()) << read_text(d.path() / "run.log");
  EXPECT_EQ(*rc, 0) << read_text(d.path() / "run.log");
  int vrc = 0;
  const std::string v = verify(src, snk, d.path() / "verify.log", vrc);
  EXPECT_EQ(vrc, 0) << v << read_text(d.path() / "run.log");
  EXPECT_NE(v.find("missing 0, duplicates 0"), std::string::npos) << v;
}

}  // namespace
}  // namespace fb::testing
