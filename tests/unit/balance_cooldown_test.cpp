// Unit tests of the rebalance cooldown (core/balance_cooldown.hpp): time enters as values.
#include <gtest/gtest.h>

#include <chrono>

#include "core/balance_cooldown.hpp"

namespace etlc::core {
namespace {

using namespace std::chrono_literals;

const Clock::time_point t0 = Clock::time_point(std::chrono::hours(1));

TEST(BalanceCooldown, a_split_in_transit_is_not_pinned_so_it_can_be_sent_elsewhere) {
  BalanceCooldown c(30s);
  c.moved("s1", "new-a", t0);
  c.observe("s1", "old", t0 + 10ms);  // its old holder still drains it
  EXPECT_FALSE(c.pinned("s1", t0 + 10ms));
  c.moved("s1", "new-b", t0 + 50ms);    // re-targeted before anyone claimed it
  c.observe("s1", "new-a", t0 + 60ms);  // the first target is no longer the one it waits for
  EXPECT_FALSE(c.pinned("s1", t0 + 60ms));
  c.observe("s1", "new-b", t0 + 70ms);
  EXPECT_TRUE(c.pinned("s1", t0 + 70ms));
}

TEST(BalanceCooldown, the_cooldown_runs_from_when_the_new_holder_is_seen_holding_it) {
  BalanceCooldown c(30s);
  c.moved("s1", "b", t0);
  c.observe("s1", "b", t0 + 5s);  // a 5 s drain
  c.observe("s1", "b", t0 + 9s);  // seen again: the start does not move
  EXPECT_TRUE(c.pinned("s1", t0 + 34s));
  EXPECT_FALSE(c.pinned("s1", t0 + 35s));
  ASSERT_TRUE(c.next_end().has_value());
  EXPECT_EQ(*c.next_end(), t0 + 35s);
  c.expire(t0 + 34s);
  EXPECT_EQ(c.size(), 1u);
  c.expire(t0 + 35s);
  EXPECT_EQ(c.size(), 0u);
  EXPECT_FALSE(c.next_end().has_value());
}

TEST(BalanceCooldown, a_move_never_completed_is_forgotten_after_a_cooldown) {
  BalanceCooldown c(30s);
  c.moved("s1", "b", t0);
  EXPECT_FALSE(c.next_end().has_value());  // no cooldown runs: nothing to recompute for
  c.expire(t0 + 29s);
  EXPECT_EQ(c.size(), 1u);
  c.expire(t0 + 30s);
  EXPECT_EQ(c.size(), 0u);
  c.observe("s1", "b", t0 + 31s);  // claimed at last: no longer a balance move we track
  EXPECT_FALSE(c.pinned("s1", t0 + 31s));
}

TEST(BalanceCooldown, a_zero_cooldown_pins_nothing) {
  BalanceCooldown c(0s);
  c.moved("s1", "b", t0);
  c.observe("s1", "b", t0);
  EXPECT_FALSE(c.pinned("s1", t0));
  EXPECT_EQ(c.size(), 0u);
}

TEST(BalanceCooldown, nobody_holding_it_starts_nothing) {
  BalanceCooldown c(30s);
  c.moved("s1", "b", t0);
  c.observe("s1", "", t0 + 1s);
  EXPECT_FALSE(c.pinned("s1", t0 + 1s));
  EXPECT_FALSE(c.next_end().has_value());
}

}  // namespace
}  // namespace etlc::core
