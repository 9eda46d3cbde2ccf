// The library's logger: the spdlog logger "etlc", registered at start-up, warn and above by
// default. Its one sink dispatches to stderr, an application callback or an application's spdlog
// sinks (etlc/logging.hpp, etlc/log_spdlog.hpp).
//
// Call sites may still begin their format string with "etlc: " (a prefix from before the
// logger was routable); the sink drops it, so every route names the library exactly once.
#pragma once

#include <spdlog/spdlog.h>

namespace etlc {

spdlog::logger& log();

}  // namespace etlc
