#include "runtime/startup_wait.hpp"

#include <fmt/format.h>
#include "log.hpp"

#include <algorithm>
#include <thread>

namespace etlc::runtime {

namespace {
constexpr std::chrono::milliseconds kFirstBackoff{250};
constexpr std::chrono::milliseconds kMaxBackoff{5'000};

bool worth_waiting_for(const StoreError& e) {
  return e.code() == StoreErrc::unavailable || e.code() == StoreErrc::unknown_outcome;
}
}  // namespace

void join_with_startup_wait(Member& member, std::chrono::milliseconds wait) {
  using std::chrono::milliseconds;
  using Steady = std::chrono::steady_clock;
  const Steady::time_point start = Steady::now();
  milliseconds backoff = kFirstBackoff;
  for (int attempt = 1;; ++attempt) {
    try {
      member.join_now();
      if (attempt > 1) {
        log().warn("etlc: {}: joined the job on attempt {}", member.instance_id(), attempt);
      }
      return;
    } catch (const StoreError& e) {
      const auto waited = std::chrono::duration_cast<milliseconds>(Steady::now() - start);
      if (!worth_waiting_for(e)) throw;
      if (waited + backoff > wait) {
        if (attempt == 1) throw;
        throw StoreError(
            e.code(), fmt::format("{} (gave up after {} attempts in {} ms: startup_wait is {} ms)",
                                  e.what(), attempt, waited.count(), wait.count()));
      }
      log().warn("etlc: {}: the store is not reachable yet (attempt {}): {}; retrying in {} ms",
                 member.instance_id(), attempt, e.what(), backoff.count());
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }
}

}  // namespace etlc::runtime
