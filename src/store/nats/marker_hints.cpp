// See marker_hints.hpp.
#include "store/nats/marker_hints.hpp"

namespace etlc::nats_detail {

MarkerHints::MarkerHints(std::size_t capacity) : ring_(capacity == 0 ? 1 : capacity) {
  hints_.reserve(ring_.size());
}

void MarkerHints::note(std::string_view key, std::uint64_t revision) {
  if (revision == 0 || key.empty()) return;
  MutexLock lock(mu_);
  auto [it, inserted] = hints_.try_emplace(std::string(key), revision);
  if (!inserted) {
    if (revision > it->second) it->second = revision;
    return;
  }
  std::string& slot = ring_[next_];
  if (!slot.empty()) hints_.erase(slot);
  slot = std::string(key);
  next_ = (next_ + 1) % ring_.size();
}

std::uint64_t MarkerHints::get(std::string_view key) const {
  MutexLock lock(mu_);
  auto it = hints_.find(std::string(key));
  return it == hints_.end() ? 0 : it->second;
}

std::size_t MarkerHints::size() const {
  MutexLock lock(mu_);
  return hints_.size();
}

}  // namespace etlc::nats_detail
