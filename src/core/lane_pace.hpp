// Lane pace: how fast a lane reads a split, in weight per 1000 s (fine enough to tell apart splits
// that read a few units of weight per second), as the leader sees its commits' progress.done; and
// the rule built on it. A split under way is read by one lane; moving it for
// balance costs a drain (or a forced release and a commit interval of replay) and helps only if
// its new lane reads faster. On a fleet whose lanes read at one pace (a per-lane throttle, a
// source that bounds each reader) a balance move of a started split reads the same records at
// the same speed after paying that cost; on a fleet whose members share a resource among their
// lanes, a loaded member's splits read slower than an idle member's lanes did, and the move pays.
// The leader tells the two apart by what it observes (docs/work-assignment.md, "Pace"), and pass
// 3 admits a balance move of a split under way only to a lane that reads it faster.
// Pure: the caller supplies the observation times. Thread-safe on distinct objects.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace etlc::core {

// A split's pace over its tenancy's recent commits: done weight per 1000 s between an early
// observation and the latest, the early one advancing so the span stays about kWindow. Three
// samples of state, whatever the history. A done below the last, or time going back, restarts it.
class PaceMeter {
 public:
  static constexpr std::chrono::milliseconds kWindow{10'000};
  // Observations needed before per_kilosecond() answers: two steps of done, not one (one step over
  // a single, possibly delayed, delivery is noise).
  static constexpr std::uint32_t kMinSteps = 2;

  void observe(std::chrono::milliseconds at, std::uint64_t done) noexcept;
  void reset() noexcept { *this = PaceMeter{}; }
  // Weight per 1000 s (saturated at 2^64-1); nullopt until kMinSteps steps that advanced time
  // were observed.
  std::optional<std::uint64_t> per_kilosecond() const noexcept;

 private:
  struct Sample {
    std::chrono::milliseconds at{0};
    std::uint64_t done = 0;
  };
  std::optional<Sample> base_, mid_, last_;
  std::uint32_t steps_ = 0;
};

// The pace a member's lanes read at: the median of the known paces of the splits it holds (its
// lower middle value), nullopt when it holds none with a known pace.
std::optional<std::uint64_t> median_pace(std::vector<std::uint64_t> paces);

// The pace rule's test for one move: a split under way at `split_pace` may move to a member whose
// lanes read at `lane_pace` iff the split has no pace (not under way, or not measured yet), the
// member's pace is unknown (a newcomer may be fast), or lane_pace >= split_pace x (10^6 +
// gain_ppm) / 10^6. Exact for every value.
bool pace_admits(std::optional<std::uint64_t> split_pace, std::optional<std::uint64_t> lane_pace,
                 std::uint32_t gain_ppm) noexcept;

}  // namespace etlc::core
