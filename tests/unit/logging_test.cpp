// The public logging hook (etlc/logging.hpp, etlc/log_spdlog.hpp): usable before anything starts,
// one prefix per line, levels respected, routable to a callback or to an application's spdlog
// sinks while members run.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "etlc/coordinator.hpp"
#include "etlc/log_spdlog.hpp"
#include "etlc/logging.hpp"
#include "etlc/memory_store.hpp"
#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

struct Captured {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  bool contains(LogLevel level, std::string_view text) {
    std::lock_guard lk(mu);
    for (const auto& [l, m] : lines) {
      if (l == level && m.find(text) != std::string::npos) return true;
    }
    return false;
  }
};

// A member joins and leads a one-split job on virtual time: "session open" and "elected
// leader" are info lines.
void run_a_member(const std::string& id) {
  ManualClock clock;
  auto store = std::make_shared<MemoryStore>();
  CoordinatorConfig c;
  c.instance_id = id;
  Coordinator member(c, store, std::make_shared<TestPlanner>(make_splits(1)), clock);
  for (int i = 0; i < 20; ++i) {
    member.step();
    clock.advance(std::chrono::milliseconds(100));
  }
  member.shutdown();
}

class Logging : public ::testing::Test {
 protected:
  void TearDown() override {
    set_log_callback({});
    set_log_level(LogLevel::warn);
  }
};

TEST_F(Logging, the_logger_exists_before_anything_starts) {
  ASSERT_NE(spdlog::get("etlc"), nullptr) << "spdlog::get(\"etlc\") must not be null at start-up";
  set_log_level(LogLevel::debug);
  EXPECT_EQ(log_level(), LogLevel::debug);
  EXPECT_EQ(spdlog::get("etlc")->level(), spdlog::level::debug);
}

TEST_F(Logging, a_callback_gets_each_line_once_without_a_prefix_and_levels_are_respected) {
  auto cap = std::make_shared<Captured>();
  set_log_callback([cap](LogLevel l, std::string_view m) {
    std::lock_guard lk(cap->mu);
    cap->lines.emplace_back(l, std::string(m));
  });
  set_log_level(LogLevel::info);
  run_a_member("log-a");
  EXPECT_TRUE(cap->contains(LogLevel::info, "log-a: session open")) << cap->lines.size();
  EXPECT_TRUE(cap->contains(LogLevel::info, "log-a: elected leader"));
  for (const auto& [l, m] : cap->lines) {
    EXPECT_NE(m.rfind("etlc", 0), 0u) << "a line repeats the library's name: " << m;
    EXPECT_GE(l, LogLevel::info) << m;
  }

  cap->lines.clear();
  set_log_level(LogLevel::warn);
  run_a_member("log-b");
  for (const auto& [l, m] : cap->lines) EXPECT_GE(l, LogLevel::warn) << m;
  EXPECT_FALSE(cap->contains(LogLevel::info, "log-b: session open"));
}

TEST_F(Logging, an_spdlog_logger_receives_the_lines_under_the_name_etlc_once) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_pattern("%n|%l|%v");
  auto app = std::make_shared<spdlog::logger>("app", sink);
  app->set_level(spdlog::level::info);
  set_spdlog_logger(app);
  EXPECT_EQ(log_level(), LogLevel::info) << "the library takes the logger's level";
  run_a_member("log-c");
  const std::string text = out.str();
  EXPECT_NE(text.find("etlc|info|log-c: session open"), std::string::npos) << text;
  EXPECT_EQ(text.find("etlc: "), std::string::npos) << "a repeated prefix:\n" << text;
  set_spdlog_logger(nullptr);
}

TEST_F(Logging, levels_parse_and_print) {
  for (LogLevel l : {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn,
                     LogLevel::error, LogLevel::off}) {
    EXPECT_EQ(parse_log_level(to_string(l)), l);
  }
  EXPECT_EQ(parse_log_level("warning"), LogLevel::warn);
  EXPECT_EQ(parse_log_level("loud"), std::nullopt);
}

}  // namespace
}  // namespace etlc::testing
