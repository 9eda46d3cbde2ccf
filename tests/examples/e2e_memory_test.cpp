// End to end on the memory store: generate, run three members in one process with one crashed
// (no release, no final commit) at 30 % and restarted under the same id at 60 %, then verify. Also
// one large file: cut at plan time (with a crash), and cut under way for idle members.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "examples/child_process.hpp"
#include "examples/temp_dir.hpp"

namespace fb::testing {
namespace {

const std::string kBin = FILE_BACKFILL_BIN;

TEST(FileBackfillE2E, memory_store_crash_and_restart_then_verify_passes) {
  ScratchDir d("e2e-mem");
  const auto in = (d.path() / "in").string();
  const auto out = (d.path() / "out").string();
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "12", "--total-bytes",
                        "2000000", "--seed", "3", "--malformed", "4"},
                       d.path() / "generate.log"),
            0)
      << read_text(d.path() / "generate.log");

  const int rc = run_to_end({kBin,
                             "run",
                             "--input",
                             in,
                             "--output",
                             out,
                             "--members",
                             "3",
                             "--max-in-flight",
                             "2",
                             "--split-bytes",
                             "150000",
                             "--kill-member-at",
                             "30",
                             "--restart-at",
                             "60",
                             "--lease-ms",
                             "1000",
                             "--rebalance-delay-ms",
                             "500",
                             "--commit-interval-ms",
                             "100",
                             "--throttle-bytes-per-s",
                             "300000",
                             "--progress",
                             "plain"},
                            d.path() / "run.log");
  const std::string log = read_text(d.path() / "run.log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("crashed at"), std::string::npos) << log;
  EXPECT_NE(log.find("restarted at"), std::string::npos) << log;
  EXPECT_NE(log.find("job complete"), std::string::npos) << log;

  ASSERT_EQ(run_to_end({kBin, "verify", "--input", in, "--output", out}, d.path() / "verify.log"),
            0)
      << read_text(d.path() / "verify.log") << "\n--- run ---\n"
      << log;
  const std::string v = read_text(d.path() / "verify.log");
  EXPECT_NE(v.find("missing 0"), std::string::npos) << v;
  EXPECT_NE(v.find("(4 malformed"), std::string::npos) << v;
}

// One file of 1.8 MB, planned as ranges of ~300 kB; a member crashes mid-job and comes back, so
// ranges that begin mid-file are taken over from their commits.
TEST(FileBackfillE2E, a_large_file_planned_as_ranges_with_a_crash_then_verify_passes) {
  ScratchDir d("e2e-ranges");
  const auto in = (d.path() / "in").string();
  const auto out = (d.path() / "out").string();
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "1", "--total-bytes",
                        "1800000", "--seed", "5", "--malformed", "3"},
                       d.path() / "generate.log"),
            0);
  const int rc = run_to_end({kBin,
                             "run",
                             "--input",
                             in,
                             "--output",
                             out,
                             "--members",
                             "3",
                             "--max-in-flight",
                             "1",
                             "--split-bytes",
                             "300000",
                             "--kill-member-at",
                             "30",
                             "--restart-at",
                             "60",
                             "--lease-ms",
                             "1000",
                             "--rebalance-delay-ms",
                             "500",
                             "--commit-interval-ms",
                             "100",
                             "--throttle-bytes-per-s",
                             "300000",
                             "--progress",
                             "plain"},
                            d.path() / "run.log");
  const std::string log = read_text(d.path() / "run.log");
  ASSERT_EQ(rc, 0) << log;
  const std::size_t planned = log.find("MB in ");
  ASSERT_NE(planned, std::string::npos) << log;
  EXPECT_GE(std::stoi(log.substr(planned + 6)), 6) << "one split per ~300 kB\n" << log;
  EXPECT_NE(log.find("crashed at"), std::string::npos) << log;
  ASSERT_EQ(run_to_end({kBin, "verify", "--input", in, "--output", out}, d.path() / "verify.log"),
            0)
      << read_text(d.path() / "verify.log") << "\n--- run ---\n"
      << log;
  EXPECT_NE(read_text(d.path() / "verify.log").find("missing 0"), std::string::npos);
}

// One file in one split, read at 400 kB/s by one lane while seven lanes idle: the leader asks it
// to split, and the residuals (data/split-00000~<epoch>.<n>...) go to the idle lanes.
TEST(FileBackfillE2E, a_straggling_split_is_cut_for_the_idle_lanes_and_verify_passes) {
  ScratchDir d("e2e-cut");
  const auto in = (d.path() / "in").string();
  const auto out = (d.path() / "out").string();
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "1", "--total-bytes",
                        "1800000", "--seed", "6"},
                       d.path() / "generate.log"),
            0);
  const int rc = run_to_end(
      {kBin, "run", "--input", in, "--output", out, "--members", "4", "--max-in-flight", "2",
       "--split-bytes", "4000000", "--throttle-bytes-per-s", "400000", "--progress", "plain"},
      d.path() / "run.log");
  const std::string log = read_text(d.path() / "run.log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("in 1 splits"), std::string::npos) << log;
  std::size_t residuals = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(out) / "data")) {
    if (e.path().filename().string().rfind("split-00000~", 0) == 0) ++residuals;
  }
  EXPECT_GE(residuals, 1u) << log;
  ASSERT_EQ(run_to_end({kBin, "verify", "--input", in, "--output", out}, d.path() / "verify.log"),
            0)
      << read_text(d.path() / "verify.log") << "\n--- run ---\n"
      << log;
  const std::string v = read_text(d.path() / "verify.log");
  EXPECT_NE(v.find("missing 0, duplicates 0"), std::string::npos) << "no crash, no replay\n" << v;
}

// Input files that change after the job was planned make their splits poison: each is failed
// max_attempts times, quarantined, and the final plan stalls instead of completing.
int run_with_input_changing_underneath(const std::filesystem::path& dir, bool drain_on_stall) {
  const auto in = (dir / "in").string();
  if (run_to_end({kBin, "generate", "--output", in, "--files", "6", "--total-bytes", "60000",
                  "--seed", "4"},
                 dir / "generate.log") != 0) {
    return -2;
  }
  std::vector<std::string> args = {kBin,
                                   "run",
                                   "--input",
                                   in,
                                   "--output",
                                   (dir / "out").string(),
                                   "--split-bytes",
                                   "1",
                                   "--max-in-flight",
                                   "1",
                                   "--throttle-bytes-per-s",
                                   "20000",
                                   "--progress",
                                   "plain"};
  if (drain_on_stall) args.push_back("--drain-on-stall");
  ChildProcess p(args, dir / "run.log");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (read_text(dir / "run.log").find("member on the memory store") == std::string::npos &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (const auto& e : std::filesystem::directory_iterator(in)) {
    std::ofstream(e.path(), std::ios::app) << "999,late,row,1.00,,2024-01-01T00:00:00Z\n";
  }
  auto rc = p.wait_for(std::chrono::seconds(60));
  return rc ? *rc : -1;
}

TEST(FileBackfillE2E, input_changed_under_the_job_stalls_it_and_the_run_fails) {
  ScratchDir d("e2e-stall");
  EXPECT_EQ(run_with_input_changing_underneath(d.path(), false), 3)
      << "exit code 3: stalled\n"
      << read_text(d.path() / "run.log");
  const std::string log = read_text(d.path() / "run.log");
  EXPECT_NE(log.find("error: member-0: stalled: the job stalled"), std::string::npos) << log;
  EXPECT_NE(log.find("quarantined"), std::string::npos) << log;
  EXPECT_NE(log.find("changed since the job was planned"), std::string::npos) << log;
}

TEST(FileBackfillE2E, a_stall_drains_with_a_warning_when_asked) {
  ScratchDir d("e2e-stall-drain");
  EXPECT_EQ(run_with_input_changing_underneath(d.path(), true), 0)
      << read_text(d.path() / "run.log");
  EXPECT_NE(read_text(d.path() / "run.log").find("job STALLED"), std::string::npos)
      << read_text(d.path() / "run.log");
}

TEST(FileBackfillE2E, bad_input_is_one_clear_line_and_a_nonzero_exit) {
  ScratchDir d("e2e-bad");
  const auto log = d.path() / "run.log";
  EXPECT_EQ(run_to_end({kBin, "run", "--input", (d.path() / "missing").string(), "--output",
                        (d.path() / "out").string()},
                       log),
            2);
  EXPECT_EQ(read_text(log),
            "error: input directory " + (d.path() / "missing").string() + " does not exist\n");
  std::filesystem::create_directories(d.path() / "in");
  EXPECT_EQ(run_to_end({kBin, "run", "--input", (d.path() / "in").string(), "--output",
                        "/proc/no-such-dir/out"},
                       log),
            2);
  EXPECT_NE(read_text(log).find("error: cannot create output directory"), std::string::npos);
}

TEST(FileBackfillE2E, verify_fails_when_nothing_was_written) {
  ScratchDir d("e2e-empty");
  const auto in = (d.path() / "in").string();
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "2", "--total-bytes", "5000",
                        "--seed", "1"},
                       d.path() / "g.log"),
            0);
  std::filesystem::create_directories(d.path() / "out");
  EXPECT_EQ(run_to_end({kBin, "verify", "--input", in, "--output", (d.path() / "out").string()},
                       d.path() / "v.log"),
            1);
  EXPECT_NE(read_text(d.path() / "v.log").find("verify: FAILED"), std::string::npos);
}

}  // namespace
}  // namespace fb::testing
