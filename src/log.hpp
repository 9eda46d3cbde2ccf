// The library's logger: spdlog logger "etlc", quiet by default (warnings and errors only).
// Applications raise it with etlc::set_log_level or spdlog::get("etlc")->set_level(...).
#pragma once

#include <spdlog/spdlog.h>

namespace etlc {

spdlog::logger& log();

}  // namespace etlc
