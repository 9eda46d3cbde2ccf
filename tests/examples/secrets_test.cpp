// No secret in any output (issue 18): a nats-server that wants a user and a password, and every
// way a secret reaches the tools (in the URL, as a flag, in the environment; right and wrong),
// with the library logging at debug level. Every byte the processes print is searched for each
// secret.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "examples/child_process.hpp"
#include "examples/temp_dir.hpp"
#include "support/nats_server.hpp"

namespace fb::testing {
namespace {

namespace fs = std::filesystem;

const std::string kBin = FILE_BACKFILL_BIN;
const std::string kCli = ETLC_CLI_PATH;
constexpr const char* kPassword = "Pw-right-5e7c9f21";
constexpr const char* kWrongPassword = "Pw-wrong-81d4a3b6";

TEST(Secrets, no_password_appears_in_any_output_of_the_example_or_the_tool) {
  etlc::testing::NatsServerConfig config;
  config.user = "app";
  config.password = kPassword;
  etlc::testing::NatsServer server(config);
  ScratchDir d("secrets");
  const std::string in = (d.path() / "in").string();
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "3", "--total-bytes", "30000",
                        "--seed", "4"},
                       d.path() / "generate.log"),
            0);
  const std::string host = "127.0.0.1:" + std::to_string(server.port());
  auto url = [&](const char* password) {
    return "nats://app:" + std::string(password) + "@" + host;
  };
  ::setenv("ETLC_LOG_LEVEL", "debug", 1);
  std::vector<fs::path> logs;
  auto run = [&](const std::string& name, std::vector<std::string> argv) {
    logs.push_back(d.path() / (name + ".log"));
    return run_to_end(std::move(argv), logs.back(), std::chrono::seconds(120));
  };
  auto fb_run = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv{kBin,
                                  "run",
                                  "--input",
                                  in,
                                  "--output",
                                  (d.path() / "out").string(),
                                  "--job",
                                  "secrets",
                                  "--progress",
                                  "plain",
                                  "--lease-ms",
                                  "1500",
                                  "--startup-wait-ms",
                                  "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  EXPECT_EQ(run("url", fb_run({"--store", url(kPassword)})), 0);
  EXPECT_NE(run("url-wrong", fb_run({"--store", url(kWrongPassword)})), 0);
  EXPECT_EQ(
      run("flags", fb_run({"--store", "nats://" + host, "--user", "app", "--password", kPassword})),
      0);
  EXPECT_NE(run("flags-wrong", fb_run({"--store", "nats://" + host, "--user", "app", "--password",
                                       kWrongPassword})),
            0);
  EXPECT_EQ(run("etlc-url", {kCli, "status", "--nats", url(kPassword), "--job", "secrets"}), 0);
  EXPECT_NE(run("etlc-wrong", {kCli, "status", "--nats", url(kWrongPassword), "--job", "secrets"}),
            0);
  EXPECT_EQ(run("etlc-flags", {kCli, "status", "--nats", "nats://" + host, "--user", "app",
                               "--password", kPassword, "--job", "secrets", "--json"}),
            0);
  ::setenv("ETLC_NATS_USER", "app", 1);
  ::setenv("ETLC_NATS_PASSWORD", kWrongPassword, 1);
  EXPECT_NE(run("env-wrong", fb_run({"--store", "nats://" + host})), 0);
  EXPECT_NE(run("etlc-env-wrong", {kCli, "status", "--nats", "nats://" + host, "--job", "secrets"}),
            0);
  ::unsetenv("ETLC_NATS_USER");
  ::unsetenv("ETLC_NATS_PASSWORD");
  ::unsetenv("ETLC_LOG_LEVEL");

  for (const fs::path& log : logs) {
    const std::string text = read_text(log);
    EXPECT_FALSE(text.empty()) << log;
    EXPECT_EQ(text.find(kPassword), std::string::npos) << log << ":\n" << text;
    EXPECT_EQ(text.find(kWrongPassword), std::string::npos) << log << ":\n" << text;
  }
  // A refused login says which credentials were presented.
  EXPECT_NE(read_text(d.path() / "url-wrong.log").find("user 'app'"), std::string::npos)
      << read_text(d.path() / "url-wrong.log");
}

}  // namespace
}  // namespace fb::testing
