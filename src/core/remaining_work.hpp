// Remaining work: what the leader balances on and what it reports of a job's progress. A split's
// commits may report how much of its weight is done (SplitProgress::done, in the weight's units);
// what remains is weight - min(done, weight). Pure; thread-safe on distinct objects.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "core/records.hpp"

namespace etlc::core {

__extension__ typedef unsigned __int128 WideWeight;

// How much of the record's weight is done: all of it once completed, else min(done, weight)
// (0 when no commit reported done).
std::uint64_t done_weight(const SplitRecord& r) noexcept;

// What the leader balances a runnable split on: weight - done_weight (0 for a split that is not
// runnable). Equal to the planned weight when no commit reported done.
std::uint64_t remaining_weight(const SplitRecord& r) noexcept;

// A runnable split of positive weight that reported done and is nearly finished: pass 3 does not
// move it (a move would drain it to move almost nothing). Nearly finished is at most pin_ppm /
// 10^6 of its weight left, or at most twice `last_step` left, `last_step` being how much its
// previous commit added to done: the leader sees a split up to one commit interval late, so a
// split within two commits of its end would be drained for at most about one commit's work
// (0 = unknown). Exact for every weight. pin_ppm 0 pins by the step only, or when nothing is left.
bool nearly_done(const SplitRecord& r, std::uint32_t pin_ppm, std::uint64_t last_step = 0) noexcept;

// A job's weight, planned, done and remaining, kept incrementally over every split record the
// leader sees: add() a record when it appears, remove() its old version when it changes. Sums
// are exact (128-bit) and read saturated at 2^64-1. Done counts what a quarantined split
// reported; the weight neither done nor remaining is the rest of the quarantined splits.
struct JobWeights {
  std::uint64_t planned = 0;
  std::uint64_t done = 0;
  std::uint64_t remaining = 0;
  friend bool operator==(const JobWeights&, const JobWeights&) = default;
};

class WeightTally {
 public:
  void add(const SplitRecord& r) noexcept { apply(r, true); }
  void remove(const SplitRecord& r) noexcept { apply(r, false); }
  void clear() noexcept { planned_ = done_ = remaining_ = 0; }
  JobWeights weights() const noexcept;

 private:
  void apply(const SplitRecord& r, bool add) noexcept;
  WideWeight planned_ = 0, done_ = 0, remaining_ = 0;
};

// The job's recent rate (done weight per second) over a sliding window of samples, one per
// observe() call. The caller supplies the time (a steady clock's), so this stays pure. A sample
// whose done is below the last one (a split rebuilt, or an estimate revised) restarts the
// window: the rate is never negative.
class RateWindow {
 public:
  static constexpr std::size_t kMaxSamples = 64;
  explicit RateWindow(std::chrono::milliseconds window) : window_(window) {}

  void observe(std::chrono::milliseconds now, std::uint64_t done);
  void clear() { samples_.clear(); }
  // Weight per second over the samples in the window; nullopt until two samples span at least
  // 1 ms.
  std::optional<std::uint64_t> per_second() const;

 private:
  struct Sample {
    std::chrono::milliseconds at;
    std::uint64_t done;
  };
  std::chrono::milliseconds window_;
  std::deque<Sample> samples_;
};

}  // namespace etlc::core
