// The time seam. Nothing in the library reads a clock except through a Clock, so the whole
// protocol can run on virtual time in tests and in the simulator.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace etlc {

// A monotonic clock. Implementations must be thread-safe; now() never goes backwards.
class Clock {
 public:
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<std::chrono::steady_clock, duration>;

  virtual ~Clock() = default;
  virtual time_point now() const = 0;
};

// std::chrono::steady_clock. Thread-safe, stateless.
class SystemClock final : public Clock {
 public:
  time_point now() const override {
    return std::chrono::time_point_cast<duration>(std::chrono::steady_clock::now());
  }
  // A process-wide instance (never destroyed before static destruction ends).
  static SystemClock& instance() {
    static SystemClock clock;
    return clock;
  }
};

// A clock that moves only when told. Thread-safe. Starts at an arbitrary non-zero epoch so that
// code never mistakes time_point{} for "now".
class ManualClock final : public Clock {
 public:
  explicit ManualClock(duration start = std::chrono::hours(1)) : ns_(start.count()) {}

  time_point now() const override {
    return time_point(duration(ns_.load(std::memory_order_acquire)));
  }
  // Moves time forward by d (d < 0 is ignored: a monotonic clock never goes back).
  void advance(duration d) {
    if (d.count() > 0) ns_.fetch_add(d.count(), std::memory_order_acq_rel);
  }
  // Moves time forward to t; a t in the past is ignored.
  void advance_to(time_point t) {
    std::int64_t want = t.time_since_epoch().count();
    std::int64_t cur = ns_.load(std::memory_order_acquire);
    while (cur < want && !ns_.compare_exchange_weak(cur, want, std::memory_order_acq_rel)) {
    }
  }

 private:
  std::atomic<std::int64_t> ns_;
};

}  // namespace etlc
