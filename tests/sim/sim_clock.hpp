// Virtual time and the members' clocks.
//
// The simulator owns one virtual time (nanoseconds since the start of a run). Each member process
// gets its own SimClock: a monotonic clock with its own origin that runs at 1 + ppm/10^6 times
// the rate of virtual time, so members' clocks drift apart by up to the scenario's skew bound,
// exactly as monotonic clocks of different machines do. Integer arithmetic only: a seed gives the
// same clock readings on every run.
#pragma once

#include <cstdint>

#include "etlc/clock.hpp"

namespace etlc::sim {

// Nanoseconds of virtual time since the start of a run.
using VirtualNs = std::int64_t;

inline constexpr VirtualNs kNsPerMs = 1'000'000;
inline constexpr VirtualNs kNsPerS = 1'000'000'000;
inline constexpr std::int64_t kMaxSkewPpm = 100'000;  // 10%: far beyond "slightly"

// The simulator's virtual time. Not thread-safe (the simulator is single-threaded), but read
// through SimClock::now(), which the Clock contract requires to be callable from any thread: the
// simulator never runs a member on another thread, so no reader races a writer.
class VirtualTime {
 public:
  VirtualNs now() const { return now_; }
  // Moves time forward to t (never back).
  void advance_to(VirtualNs t) {
    if (t > now_) now_ = t;
  }

 private:
  VirtualNs now_ = 0;
};

class SimClock final : public Clock {
 public:
  // A clock that reads `origin_ns` at virtual time `born` and then runs at (1 + ppm/10^6) times
  // the rate of virtual time. |ppm| is clamped to kMaxSkewPpm.
  SimClock(const VirtualTime& time, VirtualNs born, std::int64_t origin_ns, std::int64_t ppm)
      : time_(time),
        born_(born),
        origin_(origin_ns),
        ppm_(ppm > kMaxSkewPpm    ? kMaxSkewPpm
             : ppm < -kMaxSkewPpm ? -kMaxSkewPpm
                                  : ppm) {}

  time_point now() const override { return time_point(duration(local_at(time_.now()))); }

  // The reading of this clock at virtual time v (v >= born; earlier times extrapolate).
  std::int64_t local_at(VirtualNs v) const {
    const std::int64_t d = v - born_;
    return origin_ + d + d * ppm_ / 1'000'000;
  }

  // The earliest virtual time at which this clock reads at least `local` (never before born).
  VirtualNs virtual_at(time_point local) const {
    const std::int64_t want = local.time_since_epoch().count() - origin_;
    if (want <= 0) return born_;
    // d + d*ppm/1e6 >= want  <=>  d >= want * 1e6 / (1e6 + ppm), rounded up, then nudged for
    // the truncation in local_at.
    const std::int64_t den = 1'000'000 + ppm_;
    std::int64_t d = (want / den) * 1'000'000 + ((want % den) * 1'000'000 + den - 1) / den;
    while (d > 0 && d - 1 + (d - 1) * ppm_ / 1'000'000 >= want) --d;
    while (d + d * ppm_ / 1'000'000 < want) ++d;
    return born_ + d;
  }

  std::int64_t ppm() const { return ppm_; }

 private:
  const VirtualTime& time_;
  const VirtualNs born_;
  const std::int64_t origin_;
  const std::int64_t ppm_;
};

}  // namespace etlc::sim
