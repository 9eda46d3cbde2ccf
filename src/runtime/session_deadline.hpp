// SessionDeadline: until when, by the member's own monotonic clock, each session of the member is
// provably live, readable from any thread without a lock.
//
// The rule is the one that makes the control loop self-fence (Member::check_starvation): a
// session is live until the send time of its last acknowledged renewal plus lease - op_timeout.
// Peers may expire it only a full lease after they saw that renewal land, on their own clocks,
// so a caller that finds its session live here may still write (docs/exactly-once.md).
//
// Sessions are numbered (1, 2, ... per Member; 0 is never a session): a lane asks about the
// session its grant came from (SplitGranted::session), so a session that lapsed stays dead for
// its lanes even after the member has rejoined under a new one.
//
// Thread safety: begin(), extend() and lapse() are called by the control loop (one thread);
// live() and until() from any thread. Readers never see a deadline of one session attributed to
// another: a reader checks the serial before and after reading the deadline, and a new session
// is announced only after the old one's deadline was cleared.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>

#include "etlc/clock.hpp"

namespace etlc::runtime {

class SessionDeadline {
 public:
  using TimePoint = Clock::time_point;

  // A new session (the previous one, if any, has lapsed): live until `until`. Returns its serial.
  std::uint64_t begin(TimePoint until) {
    until_ns_.store(kDead, std::memory_order_seq_cst);
    const std::uint64_t serial = serial_.load(std::memory_order_seq_cst) + 1;
    serial_.store(serial, std::memory_order_seq_cst);
    until_ns_.store(until.time_since_epoch().count(), std::memory_order_seq_cst);
    return serial;
  }
  // A renewal of the current session was acknowledged: live until `until` (never moves back).
  void extend(TimePoint until) {
    const std::int64_t ns = until.time_since_epoch().count();
    if (ns > until_ns_.load(std::memory_order_seq_cst)) {
      until_ns_.store(ns, std::memory_order_seq_cst);
    }
  }
  // The current session may have lapsed (starved, expired, twin, shutdown, crash): no session is
  // live until the next begin().
  void lapse() { until_ns_.store(kDead, std::memory_order_seq_cst); }

  // The current session's serial (0 before the first session).
  std::uint64_t serial() const { return serial_.load(std::memory_order_seq_cst); }

  // The deadline of session `serial`, or TimePoint::min() if it is not the current session or has
  // lapsed.
  TimePoint until(std::uint64_t serial) const {
    if (serial == 0 || serial_.load(std::memory_order_seq_cst) != serial) return TimePoint::min();
    const std::int64_t ns = until_ns_.load(std::memory_order_seq_cst);
    if (serial_.load(std::memory_order_seq_cst) != serial) return TimePoint::min();
    return ns == kDead ? TimePoint::min() : TimePoint(Clock::duration(ns));
  }
  // Session `serial` is provably live at `now` (the member's clock).
  bool live(std::uint64_t serial, TimePoint now) const { return now < until(serial); }

 private:
  static constexpr std::int64_t kDead = std::numeric_limits<std::int64_t>::min();
  std::atomic<std::uint64_t> serial_{0};
  std::atomic<std::int64_t> until_ns_{kDead};
};

}  // namespace etlc::runtime
