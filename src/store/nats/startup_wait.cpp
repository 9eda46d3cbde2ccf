#include "store/nats/startup_wait.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "log.hpp"

namespace etlc::nats_detail {

namespace {
constexpr std::chrono::milliseconds kFirstBackoff{250};
constexpr std::chrono::milliseconds kMaxBackoff{5'000};
}  // namespace

std::shared_ptr<Core> open_with_startup_wait(NatsStoreOptions options) {
  using std::chrono::milliseconds;
  using Steady = std::chrono::steady_clock;
  options.validate();  // a ConfigError is never worth waiting for
  const milliseconds wait(options.startup_wait_ms);
  const Steady::time_point start = Steady::now();
  milliseconds backoff = kFirstBackoff;
  for (int attempt = 1;; ++attempt) {
    auto core = std::make_shared<Core>(options);
    try {
      core->open();
      if (attempt > 1) {
        log().warn("nats: bucket '{}': connected on attempt {}", core->bucket(), attempt);
      }
      return core;
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unavailable) throw;
      const auto waited = std::chrono::duration_cast<milliseconds>(Steady::now() - start);
      if (waited + backoff > wait) {
        if (attempt == 1) throw;
        throw StoreError(e.code(), fmt::format("{} (gave up after {} attempts in {} ms: "
                                               "startup_wait_ms is {})",
                                               e.what(), attempt, waited.count(), wait.count()));
      }
      log().warn("nats: bucket '{}': not reachable yet (attempt {}): {}; retrying in {} ms",
                 core->bucket(), attempt, e.what(), backoff.count());
    }
    core.reset();  // closes the failed attempt's connection before sleeping
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

}  // namespace etlc::nats_detail
