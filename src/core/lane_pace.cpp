#include "core/lane_pace.hpp"

#include <algorithm>
#include <limits>

namespace etlc::core {

namespace {
__extension__ typedef unsigned __int128 Wide;
constexpr Wide kMillion = 1'000'000;
}  // namespace

void PaceMeter::observe(std::chrono::milliseconds at, std::uint64_t done) noexcept {
  if (last_ && (done < last_->done || at < last_->at)) reset();  // rebuilt, revised, or clock
  const Sample s{at, done};
  if (!base_) {
    base_ = last_ = s;
    return;
  }
  if (at == last_->at) {  // the same instant: keep the latest done, no step of time
    last_ = s;
    return;
  }
  ++steps_;
  last_ = s;
  if (!mid_ && at - base_->at >= kWindow / 2) mid_ = s;
  if (mid_ && at - base_->at >= kWindow) {
    base_ = mid_;
    mid_.reset();
    if (at - base_->at >= kWindow / 2) mid_ = s;
  }
}

std::optional<std::uint64_t> PaceMeter::per_kilosecond() const noexcept {
  if (steps_ < kMinSteps || !base_ || last_->at <= base_->at) return std::nullopt;
  const Wide delta = last_->done - base_->done;
  const auto span = static_cast<std::uint64_t>((last_->at - base_->at).count());
  const Wide pace = delta * 1'000'000 / span;  // per ms, to per 1000 s
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  return pace > kMax ? kMax : static_cast<std::uint64_t>(pace);
}

std::optional<std::uint64_t> median_pace(std::vector<std::uint64_t> paces) {
  if (paces.empty()) return std::nullopt;
  const auto mid = paces.begin() + static_cast<std::ptrdiff_t>((paces.size() - 1) / 2);
  std::nth_element(paces.begin(), mid, paces.end());
  return *mid;
}

bool pace_admits(std::optional<std::uint64_t> split_pace, std::optional<std::uint64_t> lane_pace,
                 std::uint32_t gain_ppm) noexcept {
  if (!split_pace || !lane_pace) return true;
  return Wide{*lane_pace} * kMillion >= Wide{*split_pace} * (kMillion + gain_ppm);
}

}  // namespace etlc::core
