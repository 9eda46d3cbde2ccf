// The library's logger and its routing (etlc/logging.hpp, etlc/log_spdlog.hpp).
#include "log.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "etlc/log_spdlog.hpp"
#include "etlc/logging.hpp"

namespace etlc {

namespace {

constexpr std::string_view kLegacyPrefix = "etlc: ";

spdlog::level::level_enum to_spdlog(LogLevel l) {
  switch (l) {
    case LogLevel::trace:
      return spdlog::level::trace;
    case LogLevel::debug:
      return spdlog::level::debug;
    case LogLevel::info:
      return spdlog::level::info;
    case LogLevel::warn:
      return spdlog::level::warn;
    case LogLevel::error:
      return spdlog::level::err;
    case LogLevel::off:
      return spdlog::level::off;
  }
  return spdlog::level::warn;
}

LogLevel from_spdlog(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
      return LogLevel::trace;
    case spdlog::level::debug:
      return LogLevel::debug;
    case spdlog::level::info:
      return LogLevel::info;
    case spdlog::level::warn:
      return LogLevel::warn;
    case spdlog::level::err:
    case spdlog::level::critical:
      return LogLevel::error;
    default:
      return LogLevel::off;
  }
}

// The logger's only sink. base_sink's mutex serialises every line with every change of route.
class DispatchSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  DispatchSink() : stderr_(std::make_shared<spdlog::sinks::stderr_color_sink_st>()) {}

  void route(LogCallback callback, std::vector<spdlog::sink_ptr> sinks) {
    std::lock_guard lk(this->mutex_);
    callback_ = std::move(callback);
    sinks_ = std::move(sinks);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::details::log_msg line = msg;
    std::string_view text(msg.payload.data(), msg.payload.size());
    if (text.substr(0, kLegacyPrefix.size()) == kLegacyPrefix) {
      text.remove_prefix(kLegacyPrefix.size());
      line.payload = spdlog::string_view_t(text.data(), text.size());
    }
    if (callback_) {
      try {
        callback_(from_spdlog(msg.level), text);
      } catch (...) {  // NOLINT(bugprone-empty-catch): a logging callback must not break callers
      }
      return;
    }
    if (sinks_.empty()) {
      stderr_->log(line);
      return;
    }
    for (const auto& s : sinks_) {
      if (s->should_log(line.level)) s->log(line);
    }
  }
  void flush_() override {
    if (callback_) return;
    if (sinks_.empty()) stderr_->flush();
    for (const auto& s : sinks_) s->flush();
  }

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_st> stderr_;
  LogCallback callback_;
  std::vector<spdlog::sink_ptr> sinks_;
};

struct Logger {
  std::shared_ptr<DispatchSink> sink = std::make_shared<DispatchSink>();
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>("etlc", sink);

  Logger() {
    LogLevel level = LogLevel::warn;
    const char* env = std::getenv("ETLC_LOG_LEVEL");
    std::optional<LogLevel> parsed = env != nullptr ? parse_log_level(env) : std::nullopt;
    if (parsed) level = *parsed;
    logger->set_level(to_spdlog(level));
    logger->flush_on(spdlog::level::warn);
    // Registered so that spdlog::get("etlc") finds it; an application that registered its own
    // "etlc" first keeps it in the registry (ours is used either way).
    try {
      spdlog::register_logger(logger);
    } catch (const spdlog::spdlog_ex&) {  // NOLINT(bugprone-empty-catch): name already taken
    }
    if (env != nullptr && !parsed) {
      logger->warn(
          "ETLC_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, off); "
          "using warn",
          env);
    }
  }
};

Logger& instance() {
  static Logger l;
  return l;
}

// Exists from start-up, so spdlog::get("etlc") and set_log_level work before anything runs.
[[maybe_unused]] const bool kRegistered = (instance(), true);

}  // namespace

spdlog::logger& log() {
  return *instance().logger;
}

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::trace:
      return "trace";
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      return "warn";
    case LogLevel::error:
      return "error";
    case LogLevel::off:
      return "off";
  }
  return "unknown";
}

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  for (LogLevel l : {LogLevel::trace, LogLevel::debug, LogLevel::info, LogLevel::warn,
                     LogLevel::error, LogLevel::off}) {
    if (text == to_string(l)) return l;
  }
  if (text == "warning") return LogLevel::warn;
  return std::nullopt;
}

void set_log_level(LogLevel level) {
  instance().logger->set_level(to_spdlog(level));
}

LogLevel log_level() noexcept {
  return from_spdlog(instance().logger->level());
}

void set_log_callback(LogCallback callback) {
  instance().sink->route(std::move(callback), {});
}

void set_spdlog_logger(const std::shared_ptr<spdlog::logger>& logger) {
  if (!logger) {
    instance().sink->route({}, {});
    return;
  }
  instance().sink->route({}, logger->sinks());
  set_log_level(from_spdlog(logger->level()));
}

}  // namespace etlc
