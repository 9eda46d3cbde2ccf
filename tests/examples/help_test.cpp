// Every example's and tool's --help runs as written: exit 0 and a usage text on stdout.
#include <gtest/gtest.h>

#include "ops/run_process.hpp"

namespace etlc::testing {
namespace {

void expect_help(std::vector<std::string> argv, const std::string& mentions) {
  const ProcessResult r = run_process(argv, std::chrono::seconds(30));
  std::string cmd;
  for (const auto& a : argv) cmd += a + " ";
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.out << r.err;
  EXPECT_NE(r.out.find(mentions), std::string::npos) << cmd << "\n" << r.out;
}

TEST(Help, file_backfill_and_each_subcommand) {
  expect_help({FILE_BACKFILL_BIN, "--help"}, "Exit codes");
  expect_help({FILE_BACKFILL_BIN, "generate", "--help"}, "--total-bytes");
  expect_help({FILE_BACKFILL_BIN, "run", "--help"}, "--creds");
  expect_help({FILE_BACKFILL_BIN, "verify", "--help"}, "--output");
  expect_help({FILE_BACKFILL_BIN, "bench", "--help"}, "--repeat");
}

TEST(Help, custom_source_and_hello) {
  expect_help({CUSTOM_SOURCE_BIN, "--help"}, "usage");
  expect_help({HELLO_BIN, "--help"}, "NATS_URL");
}

#ifdef ETLC_CLI_PATH
TEST(Help, etlc_and_each_command) {
  expect_help({ETLC_CLI_PATH, "--help"}, "Exit codes");
  for (const char* cmd : {"status", "splits", "requeue", "cordon", "uncordon", "watch", "pause",
                          "resume", "delete", "reset", "seek"}) {
    expect_help({ETLC_CLI_PATH, cmd, "--help"}, "--job");
  }
}
#endif

TEST(Help, a_usage_error_is_exit_2) {
  const ProcessResult r = run_process({FILE_BACKFILL_BIN, "run", "--no-such-option"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(run_process({CUSTOM_SOURCE_BIN, "--bogus"}).exit_code, 2);
  EXPECT_EQ(run_process({HELLO_BIN, "--bogus"}).exit_code, 2);
}

}  // namespace
}  // namespace etlc::testing
