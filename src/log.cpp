#include "log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace etlc {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("etlc");
    if (existing) return existing;
    auto l = spdlog::stderr_color_mt("etlc");
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return *logger;
}

}  // namespace etlc
