#include "core/lane_pace.hpp"

#include <algorithm>
#include <limits>

namespace etlc::core {

namespace {
__extension__ typedef unsigned __int128 Wide;
constexpr Wide kMillion = 1'000'000;
}  // namespace

void PaceMeter::observe(std::chrono::milliseconds at, std::uint64_t done) noexcept {
  // Rebuilt from its spec, an estimate revised, or time going back: start from this observation.
  if (seen_ && (done < last_done_ || at < last_at_)) reset();
  if (!seen_) {
    seen_ = true;
    first_at_ = last_at_ = at;
    last_done_ = done;
    return;
  }
  if (at == last_at_) {  // the same instant: its progress counts in the next step
    return;
  }
  const Wide dt = static_cast<std::uint64_t>((at - last_at_).count());
  const Wide moved = Wide{done - last_done_} * 1'000'000;  // weight x ms per 1000 s
  const Wide tau = static_cast<std::uint64_t>(kWindow.count());
  // The step's own pace is moved / dt; weighted by dt / (tau + dt) against the mean so far.
  mean_ = steps_ == 0 ? moved / dt : (mean_ * tau + moved) / (tau + dt);
  ++steps_;
  last_at_ = at;
  last_done_ = done;
}

std::optional<std::uint64_t> PaceMeter::per_kilosecond(
    std::chrono::milliseconds now) const noexcept {
  if (steps_ == 0 || (steps_ < kMinSteps && last_at_ - first_at_ < kWindow / 2)) {
    return std::nullopt;
  }
  Wide pace = mean_;
  if (now - last_at_ > kWindow) {  // stalled: a step of no progress, as long as the stall
    const Wide tau = static_cast<std::uint64_t>(kWindow.count());
    pace = pace * tau / (tau + static_cast<std::uint64_t>((now - last_at_).count()));
  }
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  return pace > kMax ? kMax : static_cast<std::uint64_t>(pace);
}

std::optional<std::uint64_t> median_pace(std::vector<std::uint64_t> paces) {
  if (paces.empty()) return std::nullopt;
  const auto mid = paces.begin() + static_cast<std::ptrdiff_t>((paces.size() - 1) / 2);
  std::nth_element(paces.begin(), mid, paces.end());
  return *mid;
}

void LanePaceHistory::observe(std::uint32_t load, std::uint64_t pace) {
  ++seq_;
  for (Entry& e : entries_) {
    if (e.load == load) {
      e.pace = pace;
      e.seen = seq_;
      return;
    }
  }
  if (entries_.size() == kMaxLoads) {
    entries_.erase(
        std::min_element(entries_.begin(), entries_.end(),
                         [](const Entry& a, const Entry& b) { return a.seen < b.seen; }));
  }
  entries_.push_back(Entry{load, pace, seq_});
}

std::optional<std::uint64_t> LanePaceHistory::at(std::uint32_t load) const noexcept {
  const Entry* best = nullptr;
  auto distance = [load](const Entry& e) { return e.load > load ? e.load - load : load - e.load; };
  for (const Entry& e : entries_) {
    if (best == nullptr || distance(e) < distance(*best) ||
        (distance(e) == distance(*best) && e.load > best->load)) {
      best = &e;
    }
  }
  if (best == nullptr) return std::nullopt;
  return best->pace;
}

bool pace_admits(std::optional<std::uint64_t> split_pace, std::optional<std::uint64_t> lane_pace,
                 std::uint32_t gain_ppm) noexcept {
  if (!split_pace || !lane_pace) return true;
  return *lane_pace > 0 && Wide{*lane_pace} * kMillion >= Wide{*split_pace} * (kMillion + gain_ppm);
}

}  // namespace etlc::core
