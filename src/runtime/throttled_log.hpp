// ThrottledLog: a warning about one key at most once per interval, for records the loop reads
// directly on every retry (an unreadable one would otherwise be logged ten times a second).
// Bounded: it forgets everything when it knows too many keys. Not thread-safe.
#pragma once

#include <map>
#include <string>

#include "runtime/member_context.hpp"

namespace etlc::runtime {

class ThrottledLog {
 public:
  static constexpr std::size_t kMaxKeys = 4096;

  explicit ThrottledLog(const MemberContext& ctx) : ctx_(ctx) {}
  // Logs `message` (a warning of this member) unless `key` was warned about within a lease.
  void warn(const std::string& key, const std::string& message);

 private:
  const MemberContext& ctx_;
  std::map<std::string, TimePoint> warned_at_;
};

}  // namespace etlc::runtime
