#include "core/remaining_work.hpp"

#include <algorithm>
#include <limits>

namespace etlc::core {

namespace {
std::uint64_t saturate(WideWeight v) noexcept {
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  return v > kMax ? kMax : static_cast<std::uint64_t>(v);
}
}  // namespace

std::uint64_t done_weight(const SplitRecord& r) noexcept {
  if (r.status == SplitStatus::completed) return r.weight;
  return std::min(r.progress.done.value_or(0), r.weight);
}

std::uint64_t remaining_weight(const SplitRecord& r) noexcept {
  if (r.status != SplitStatus::runnable) return 0;
  return r.weight - done_weight(r);
}

bool nearly_done(const SplitRecord& r, std::uint32_t pin_ppm, std::uint64_t last_step) noexcept {
  if (r.status != SplitStatus::runnable || !r.progress.done || r.weight == 0) return false;
  const WideWeight left = remaining_weight(r);
  return left * 1'000'000 <= static_cast<WideWeight>(r.weight) * pin_ppm ||
         left <= static_cast<WideWeight>(last_step) * 2;
}

void WeightTally::apply(const SplitRecord& r, bool add) noexcept {
  auto step = [add](WideWeight& sum, std::uint64_t v) { sum = add ? sum + v : sum - v; };
  step(planned_, r.weight);
  step(done_, done_weight(r));
  step(remaining_, remaining_weight(r));
}

JobWeights WeightTally::weights() const noexcept {
  return JobWeights{saturate(planned_), saturate(done_), saturate(remaining_)};
}

void RateWindow::observe(std::chrono::milliseconds now, std::uint64_t done) {
  if (!samples_.empty() && (done < samples_.back().done || now < samples_.back().at)) {
    samples_.clear();
  }
  samples_.push_back(Sample{now, done});
  while (samples_.size() > kMaxSamples ||
         (samples_.size() > 2 && now - samples_[1].at >= window_)) {
    samples_.pop_front();
  }
}

std::optional<std::uint64_t> RateWindow::per_second() const {
  if (samples_.size() < 2) return std::nullopt;
  const auto span = samples_.back().at - samples_.front().at;
  if (span.count() <= 0) return std::nullopt;
  const WideWeight delta = samples_.back().done - samples_.front().done;
  return saturate(delta * 1000 / static_cast<std::uint64_t>(span.count()));
}

}  // namespace etlc::core
