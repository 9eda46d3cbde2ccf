#include "runtime/throttled_log.hpp"

#include "log.hpp"

namespace etlc::runtime {

void ThrottledLog::warn(const std::string& key, const std::string& message) {
  const TimePoint now = ctx_.clock.now();
  auto it = warned_at_.find(key);
  if (it != warned_at_.end() && now - it->second < ctx_.config.lease_duration) return;
  if (it == warned_at_.end() && warned_at_.size() >= kMaxKeys) warned_at_.clear();
  warned_at_[key] = now;
  log().warn("etlc: {}: {}", ctx_.instance, message);
}

}  // namespace etlc::runtime
