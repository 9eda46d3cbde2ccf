// WeightProgress's derived figures: percent done and ETA (etlc/admin.hpp).
#include <algorithm>
#include <limits>

#include "core/remaining_work.hpp"
#include "etlc/admin.hpp"

namespace etlc {

std::optional<double> WeightProgress::fraction_done() const noexcept {
  if (planned == 0) return std::nullopt;
  return std::min(1.0, static_cast<double>(done) / static_cast<double>(planned));
}

std::optional<std::chrono::milliseconds> WeightProgress::eta() const noexcept {
  if (!rate_per_s || *rate_per_s == 0) return std::nullopt;
  // remaining * 1000 / rate, rounded up, in 128 bits; saturated far beyond any real ETA.
  const core::WideWeight ms =
      (static_cast<core::WideWeight>(remaining) * 1000 + *rate_per_s - 1) / *rate_per_s;
  constexpr auto kMax = static_cast<core::WideWeight>(std::numeric_limits<std::int64_t>::max());
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms > kMax ? kMax : ms));
}

}  // namespace etlc
