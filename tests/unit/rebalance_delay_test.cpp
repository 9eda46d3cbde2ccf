// Unit tests of the rebalance-delay bookkeeping (time enters as values; no clock is read).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/assignment.hpp"
#include "core/rebalance_delay.hpp"

namespace etlc::core {
namespace {

using namespace std::chrono_literals;
using Strings = std::vector<std::string>;

const Clock::time_point t0 = Clock::time_point(std::chrono::hours(1));

// The splits of `departed` marked reserved iff the bookkeeping withholds it at `now`; the rest
// as held by live members. Returns how many of the departed member's splits were assigned.
std::size_t assigned_after_departure(const RebalanceDelay& delay, Clock::time_point now) {
  AssignmentInput in;
  in.members = {AssignMember{"a", 10}, AssignMember{"b", 10}};
  for (int k = 0; k < 4; ++k) {
    AssignSplit s;
    s.id = "gone-" + std::to_string(k);
    s.weight = 10;
    s.reserved = delay.withheld("gone", now);  // "gone" is not live: no ownership index
    s.holder_departed = true;
    in.splits.push_back(s);
  }
  const Assignment out = desired_assignment(in);
  return out.stats.assigned;
}

// The zero delay is its own path: nothing is ever withheld — not at the departure instant, not
// "before" it — and the departure is handed to the leader for clean-up at once.
TEST(RebalanceDelay, a_zero_rebalance_delay_reassigns_immediately) {
  RebalanceDelay delay(Clock::duration::zero());
  EXPECT_TRUE(delay.immediate());
  delay.departed("gone", t0);
  EXPECT_FALSE(delay.withheld("gone", t0));
  EXPECT_FALSE(delay.withheld("gone", t0 - 1s));  // a "now < departed + 0" window would say true
  EXPECT_TRUE(delay.withheld_instances(t0).empty());
  EXPECT_EQ(assigned_after_departure(delay, t0), 4u);
  EXPECT_EQ(delay.next_deadline(), t0);                       // due already
  EXPECT_EQ(delay.take_expired(t0 - 1s), (Strings{"gone"}));  // whatever the time
  EXPECT_TRUE(delay.take_expired(t0).empty());
  EXPECT_EQ(delay.next_deadline(), std::nullopt);
}

TEST(RebalanceDelay, a_departed_instance_is_withheld_for_the_delay) {
  RebalanceDelay delay(20s);
  EXPECT_FALSE(delay.immediate());
  delay.departed("gone", t0);
  EXPECT_TRUE(delay.withheld("gone", t0));
  EXPECT_TRUE(delay.withheld("gone", t0 + 19s));
  EXPECT_EQ(assigned_after_departure(delay, t0 + 19s), 0u);
  EXPECT_FALSE(delay.withheld("gone", t0 + 20s));
  EXPECT_EQ(assigned_after_departure(delay, t0 + 20s), 4u);
  EXPECT_FALSE(delay.withheld("other", t0));
  EXPECT_EQ(delay.withheld_instances(t0 + 1s), (Strings{"gone"}));
  EXPECT_EQ(delay.next_deadline(), t0 + 20s);
}

TEST(RebalanceDelay, a_return_cancels_the_window_at_once) {
  RebalanceDelay delay(20s);
  delay.departed("gone", t0);
  delay.returned("gone");
  EXPECT_FALSE(delay.withheld("gone", t0 + 1s));
  EXPECT_TRUE(delay.take_expired(t0 + 60s).empty());  // nothing to reassign or clean up
  EXPECT_EQ(delay.next_deadline(), std::nullopt);
  delay.returned("never-departed");  // ignored
}

TEST(RebalanceDelay, ended_windows_are_taken_once_in_id_order) {
  RebalanceDelay delay(10s);
  delay.departed("b", t0);
  delay.departed("a", t0 + 2s);
  delay.departed("c", t0 + 30s);
  EXPECT_TRUE(delay.take_expired(t0 + 9s).empty());
  EXPECT_EQ(delay.take_expired(t0 + 12s), (Strings{"a", "b"}));
  EXPECT_TRUE(delay.take_expired(t0 + 12s).empty());
  EXPECT_EQ(delay.withheld_instances(t0 + 12s), (Strings{"c"}));
  EXPECT_EQ(delay.next_deadline(), t0 + 40s);
}

TEST(RebalanceDelay, a_repeated_departure_does_not_extend_the_window) {
  RebalanceDelay delay(10s);
  delay.departed("gone", t0);
  delay.departed("gone", t0 + 5s);
  EXPECT_FALSE(delay.withheld("gone", t0 + 10s));
  EXPECT_EQ(delay.next_deadline(), t0 + 10s);
}

TEST(RebalanceDelay, a_huge_delay_saturates_instead_of_wrapping) {
  RebalanceDelay delay(Clock::duration::max());
  delay.departed("gone", t0);
  EXPECT_TRUE(delay.withheld("gone", t0 + std::chrono::hours(24 * 365)));
  EXPECT_EQ(delay.next_deadline(), Clock::time_point::max());
}

TEST(RebalanceDelay, a_negative_delay_is_a_config_error) {
  EXPECT_THROW(RebalanceDelay(-1ns), ConfigError);
}

TEST(RebalanceDelay, clear_forgets_everything) {
  RebalanceDelay delay(10s);
  delay.departed("gone", t0);
  delay.clear();
  EXPECT_FALSE(delay.withheld("gone", t0));
  EXPECT_EQ(delay.next_deadline(), std::nullopt);
}

}  // namespace
}  // namespace etlc::core
