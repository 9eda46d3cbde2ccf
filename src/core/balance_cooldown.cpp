#include "core/balance_cooldown.hpp"

#include <algorithm>

namespace etlc::core {

void BalanceCooldown::moved(std::string_view split, std::string_view target,
                            Clock::time_point now) {
  if (cooldown_ <= Clock::duration::zero()) return;
  moves_.insert_or_assign(std::string(split), Move{std::string(target), now, std::nullopt});
}

void BalanceCooldown::observe(std::string_view split, std::string_view holder,
                              Clock::time_point now) {
  if (moves_.empty() || holder.empty()) return;
  auto it = moves_.find(std::string(split));
  if (it == moves_.end() || it->second.held_since || it->second.target != holder) return;
  it->second.held_since = now;
}

bool BalanceCooldown::pinned(std::string_view split, Clock::time_point now) const {
  if (moves_.empty()) return false;
  auto it = moves_.find(std::string(split));
  return it != moves_.end() && it->second.held_since && now - *it->second.held_since < cooldown_;
}

void BalanceCooldown::expire(Clock::time_point now) {
  std::erase_if(moves_, [&](const auto& e) {
    const Move& m = e.second;
    return now - m.held_since.value_or(m.published) >= cooldown_;
  });
}

std::optional<Clock::time_point> BalanceCooldown::next_end() const {
  std::optional<Clock::time_point> end;
  for (const auto& [split, m] : moves_) {
    if (!m.held_since) continue;
    const Clock::time_point e = *m.held_since + cooldown_;
    if (!end || e < *end) end = e;
  }
  return end;
}

}  // namespace etlc::core
