// Where the library's log lines go, and which ones.
//
// The library logs operational events through one logger: ownership changes and elections at
// info, trouble at warn and error, internals at debug. By default lines go to stderr as
//   [2024-05-01 12:00:00.123] [etlc] [warn] m1: session expired by peers; ...
// at warn and above; the environment variable ETLC_LOG_LEVEL (trace, debug, info, warn, error,
// off) sets the initial level. An application routes the lines before it starts anything (or at
// any time later):
//   etlc::set_log_level(etlc::LogLevel::info);
//   etlc::set_log_callback([](etlc::LogLevel level, std::string_view message) { ... });
// or hands over an spdlog logger (etlc/log_spdlog.hpp). Every line names the library once: the
// default sink and the spdlog route print the logger name "etlc", and messages carry no prefix
// of their own, so a callback adds whatever prefix its framework uses.
//
// Thread safety: every function may be called from any thread at any time, also while members
// run. Lines are delivered one at a time (calls to the callback never overlap), from whatever
// library thread logs; the callback must be quick and must not call the functions below.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace etlc {

enum class LogLevel : std::uint8_t { trace, debug, info, warn, error, off };

// "trace", "debug", "info", "warn", "error", "off".
std::string_view to_string(LogLevel level) noexcept;
// The inverse of to_string (also accepts "warning"); nullopt for anything else.
std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;

// Lines below `level` are dropped before they are formatted.
void set_log_level(LogLevel level);
LogLevel log_level() noexcept;

// Receives every line at or above the level: the level and the message (no prefix, no time, no
// trailing newline). An empty callback restores the default (stderr).
using LogCallback = std::function<void(LogLevel level, std::string_view message)>;
void set_log_callback(LogCallback callback);

}  // namespace etlc
