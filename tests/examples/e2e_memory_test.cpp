// End to end on the memory store: generate, run three members in one process with one crashed
// (no release, no final commit) at 30 % and restarted under the same id at 60 %, then verify.
#include <gtest/gtest.h>

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
