// Routing the library's log lines into an application's spdlog setup (see etlc/logging.hpp).
// Needs spdlog at the consumer's build (CMake: spdlog::spdlog; pkg-config: spdlog).
#pragma once

#include <spdlog/logger.h>

#include <memory>

namespace etlc {

// From now on the library's lines are written to `logger`'s sinks (as they are at this call),
// formatted by those sinks, under the logger name "etlc"; the library's level becomes
// logger->level(). The library keeps the sinks alive until the next set_* call. A null logger
// restores the default (stderr). Thread-safe, like everything in etlc/logging.hpp.
void set_spdlog_logger(const std::shared_ptr<spdlog::logger>& logger);

}  // namespace etlc
