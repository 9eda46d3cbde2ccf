#include "log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace etlc {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("etlc");
    if (existing) return existing;
    auto l = spdlog::stderr_color_mt("etlc");
    // ETLC_LOG_LEVEL=info|debug|... overrides the quiet default (for tests and debugging).
    const char* env = std::getenv("ETLC_LOG_LEVEL");
    l->set_level(env != nullptr ? spdlog::level::from_str(env) : spdlog::level::warn);
    return l;
  }();
  return *logger;
}

}  // namespace etlc
