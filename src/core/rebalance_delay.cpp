#include "core/rebalance_delay.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace etlc::core {

namespace {

Clock::time_point saturating_add(Clock::time_point t, Clock::duration d) {
  // d >= 0 here (checked at construction).
  if (t > Clock::time_point::max() - d) return Clock::time_point::max();
  return t + d;
}

}  // namespace

RebalanceDelay::RebalanceDelay(Clock::duration delay)
    : delay_(delay), immediate_(delay == Clock::duration::zero()) {
  if (delay < Clock::duration::zero()) {
    throw ConfigError(fmt::format(
        "rebalance_delay must be >= 0 (0 = reassign immediately), got {} ns", delay.count()));
  }
}

void RebalanceDelay::departed(std::string_view instance, Clock::time_point now) {
  if (immediate_) {
    // The zero-delay path: nothing is withheld, the departure is only queued for clean-up.
    departed_now_.try_emplace(std::string(instance), now);
    return;
  }
  windows_.try_emplace(std::string(instance), saturating_add(now, delay_));
}

void RebalanceDelay::returned(std::string_view instance) {
  if (auto it = windows_.find(instance); it != windows_.end()) windows_.erase(it);
  if (auto it = departed_now_.find(instance); it != departed_now_.end()) departed_now_.erase(it);
}

bool RebalanceDelay::withheld(std::string_view instance, Clock::time_point now) const {
  if (immediate_) return false;
  auto it = windows_.find(instance);
  return it != windows_.end() && now < it->second;
}

std::vector<std::string> RebalanceDelay::withheld_instances(Clock::time_point now) const {
  std::vector<std::string> out;
  if (immediate_) return out;
  for (const auto& [instance, deadline] : windows_) {
    if (now < deadline) out.push_back(instance);
  }
  return out;  // std::map iterates in id order
}

std::vector<std::string> RebalanceDelay::take_expired(Clock::time_point now) {
  std::vector<std::string> out;
  if (immediate_) {
    for (auto& entry : departed_now_) out.push_back(entry.first);
    departed_now_.clear();
    return out;
  }
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (it->second <= now) {
      out.push_back(it->first);
      it = windows_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<Clock::time_point> RebalanceDelay::next_deadline() const {
  const auto& pending = immediate_ ? departed_now_ : windows_;
  if (pending.empty()) return std::nullopt;
  auto earliest =
      std::min_element(pending.begin(), pending.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  return earliest->second;
}

void RebalanceDelay::clear() noexcept {
  windows_.clear();
  departed_now_.clear();
}

}  // namespace etlc::core
