// Rebalance-delay bookkeeping: which departed instances still have their splits withheld.
//
// When an instance's presence key expires (or is deleted), the leader withholds ("reserves") its
// splits for `rebalance_delay` instead of reassigning them, so a pod that restarts inside the
// window gets its own work back and nothing moves. The window is cancelled the moment the
// instance's presence returns. When a window ends, the leader reassigns the splits and cleans up
// assign.{instance}.
//
// A delay of zero means "reassign immediately". It is a separate code path, not a window of
// length zero: with a zero delay nothing is ever recorded as withheld, so no comparison against
// a deadline can withhold anything (Kafka Connect's equivalent knob read zero as "withhold
// forever", KAFKA-15693; here that bug is not expressible). Zero-delay departures are only
// queued for take_expired(), so the leader still learns to clean up assign.{instance}.
//
// Time enters as values (Clock::time_point); this class never reads a clock. Not thread-safe:
// owned by the leader's control loop.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/clock.hpp"
#include "etlc/errors.hpp"

namespace etlc::core {

class RebalanceDelay {
 public:
  // Throws ConfigError if delay < 0.
  explicit RebalanceDelay(Clock::duration delay);

  Clock::duration delay() const noexcept { return delay_; }
  // True iff the delay is zero: departures are reassigned at once, nothing is ever withheld.
  bool immediate() const noexcept { return immediate_; }

  // `instance`'s presence key expired or was deleted at `now`. Opens its window (deadline
  // now + delay, saturating). A repeated notice for an instance whose window is open keeps the
  // original deadline: a window never extends itself.
  void departed(std::string_view instance, Clock::time_point now);
  // `instance`'s presence is back: its window (or pending zero-delay departure) is dropped at
  // once, whatever the time. Unknown instances are ignored.
  void returned(std::string_view instance);

  // True iff `instance`'s splits are still reserved at `now` (its window has not ended).
  // Always false when immediate().
  bool withheld(std::string_view instance, Clock::time_point now) const;
  // Every instance withheld at `now`, sorted by id.
  std::vector<std::string> withheld_instances(Clock::time_point now) const;

  // Removes and returns (sorted by id) every instance whose window ended at or before `now`;
  // when immediate(), every departure recorded since the last call, whatever `now` is.
  std::vector<std::string> take_expired(Clock::time_point now);

  // When take_expired() next has something to return: the earliest open deadline, or (when
  // immediate()) the earliest pending departure time, i.e. already due. nullopt if nothing is
  // pending.
  std::optional<Clock::time_point> next_deadline() const;

  // Forgets everything (the leader lost leadership; the next leader rebuilds from the store).
  void clear() noexcept;

 private:
  Clock::duration delay_;
  bool immediate_;
  // delay > 0: instance -> end of its window.
  std::map<std::string, Clock::time_point, std::less<>> windows_;
  // delay == 0: instance -> when it departed; never consulted by withheld().
  std::map<std::string, Clock::time_point, std::less<>> departed_now_;
};

}  // namespace etlc::core
