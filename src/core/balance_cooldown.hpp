// The rebalance cooldown: a split moved for balance is not moved for balance again until it has
// run at its new holder for `cooldown`, so loads that shift with progress cannot make a split
// chase them from member to member (issue 16).
//
// The cooldown starts when the member the split was moved to is first seen holding it, not when
// the move is published. Until then the split is in transit (its old holder drains it), and the
// leader may send it elsewhere at no extra cost: the drain happens either way, and nobody has
// started reading it. A fleet scaled out by a burst of joiners needs exactly that: the leader
// sees the joiners one computation at a time, and the splits it first handed to the early ones
// must be able to go to the later ones before they are claimed (pinning them at publication held
// the early joiners above their share for a whole cooldown, then moved the surplus twice:
// docs/performance.md, "Scale-out").
//
// Time enters as values; this class never reads a clock. Not thread-safe: owned by the leader's
// control loop.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "etlc/clock.hpp"

namespace etlc::core {

class BalanceCooldown {
 public:
  // cooldown 0 = no cooldown: nothing is ever pinned or remembered.
  explicit BalanceCooldown(Clock::duration cooldown) noexcept : cooldown_(cooldown) {}

  // The leader published `split` to `target`, taking it from a live holder. A move of a split
  // already in transit re-targets it (the cooldown has not started); a move of one whose cooldown
  // has started cannot happen (it is pinned) unless its holder left, and then starts afresh.
  void moved(std::string_view split, std::string_view target, Clock::time_point now);

  // `holder` holds `split` at `now` (its lease owner, else its record owner; empty: nobody). If it
  // is the member the split was moved to, the cooldown starts (once).
  void observe(std::string_view split, std::string_view holder, Clock::time_point now);

  // True iff `split` was moved for balance, its new holder holds it, and less than the cooldown
  // has passed since that was first observed.
  bool pinned(std::string_view split, Clock::time_point now) const;

  // Forgets cooldowns that ended and moves not completed within a cooldown of their publication
  // (the target left or was given something else: the next move records itself again).
  void expire(Clock::time_point now);

  // When the earliest running cooldown ends (the leader recomputes then), or nullopt.
  std::optional<Clock::time_point> next_end() const;

  std::size_t size() const noexcept { return moves_.size(); }

 private:
  struct Move {
    std::string target;
    Clock::time_point published{};
    std::optional<Clock::time_point> held_since;  // set once the target is seen holding it
  };
  Clock::duration cooldown_;
  std::unordered_map<std::string, Move> moves_;
};

}  // namespace etlc::core
