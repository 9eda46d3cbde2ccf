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

// A split's pace over its tenancy's recent commits: an exponentially weighted mean of done weight
// per 1000 s, each step between observations weighted by its length against kWindow (so a
// single late delivery moves it by its share of the window, and a pace change shows within about
// a window). Integer arithmetic, exact up to 128 bits; O(1) state. A done below the last, or time
// going back, restarts it. (Restarting it also when its owner's load changes was measured: more
// restarts made for noisier paces and more moves between lanes of one speed, and no move gained
// where lanes share a resource; docs/performance.md, "The tail of a job".)
class PaceMeter {
 public:
  static constexpr std::chrono::milliseconds kWindow{10'000};
  // Known after two steps of time (one is a single delivery, possibly late), or one step of at
  // least half a window (a slow commit cadence).
  static constexpr std::uint32_t kMinSteps = 2;

  void observe(std::chrono::milliseconds at, std::uint64_t done) noexcept;
  void reset() noexcept { *this = PaceMeter{}; }
  // Weight per 1000 s (saturated at 2^64-1), as of `now`: a split that has not advanced for
  // longer than kWindow counts the stall as a step without progress, so its pace falls while it
  // lasts. nullopt until known.
  std::optional<std::uint64_t> per_kilosecond(std::chrono::milliseconds now) const noexcept;

 private:
  __extension__ typedef unsigned __int128 Wide;
  std::chrono::milliseconds first_at_{0}, last_at_{0};
  std::uint64_t last_done_ = 0;
  Wide mean_ = 0;  // weight per 1000 s
  std::uint32_t steps_ = 0;
  bool seen_ = false;
};

// The pace a member's lanes read at: the median of the known paces of the splits it holds (its
// lower middle value), nullopt when it holds none with a known pace.
std::optional<std::uint64_t> median_pace(std::vector<std::uint64_t> paces);

// What a member's lanes read at each load (the number of splits it held): the last median pace
// seen at each load, for at most kMaxLoads loads (the most recently seen). A member whose lanes
// share a resource reads slower per lane the more it holds; one whose readers are bounded each on
// its own reads at one pace whatever it holds. Asking for the pace at the load a move would give
// it answers for both without knowing which it is.
class LanePaceHistory {
 public:
  static constexpr std::size_t kMaxLoads = 8;
  void observe(std::uint32_t load, std::uint64_t pace);
  // The pace seen at `load`, else at the nearest load seen (a tie: the heavier, the slower if
  // anything); nullopt if none was seen.
  std::optional<std::uint64_t> at(std::uint32_t load) const noexcept;

 private:
  struct Entry {
    std::uint32_t load;
    std::uint64_t pace;
    std::uint64_t seen;  // observe() sequence, for evicting the oldest
  };
  std::vector<Entry> entries_;
  std::uint64_t seq_ = 0;
};

// The pace rule's test for one move: a split under way at `split_pace` may move to a member whose
// lanes read at `lane_pace` iff the split has no pace (not under way, or not measured yet), the
// member's pace is unknown (a newcomer may be fast), or its lanes read at all (lane_pace > 0) and
// lane_pace >= split_pace x (10^6 + gain_ppm) / 10^6. Exact for every value.
bool pace_admits(std::optional<std::uint64_t> split_pace, std::optional<std::uint64_t> lane_pace,
                 std::uint32_t gain_ppm) noexcept;

}  // namespace etlc::core
