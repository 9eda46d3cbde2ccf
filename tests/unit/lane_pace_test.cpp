// core/lane_pace.hpp: a split's pace as the leader measures it, a member's lane pace, and the
// test one balance move of a split under way must pass.
#include "core/lane_pace.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace etlc::core {
namespace {

using std::chrono::milliseconds;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

TEST(PaceMeter, needs_two_steps_of_time) {
  PaceMeter m;
  EXPECT_FALSE(m.per_kilosecond());
  m.observe(milliseconds(1000), 0);
  m.observe(milliseconds(2000), 100);
  EXPECT_FALSE(m.per_kilosecond());  // one step: a single delivery may be late
  m.observe(milliseconds(2000), 150);  // the same instant: no step of time
  EXPECT_FALSE(m.per_kilosecond());
  m.observe(milliseconds(3000), 200);
  EXPECT_EQ(m.per_kilosecond(), 100'000u);  // 200 over 2 s
}

TEST(PaceMeter, follows_the_recent_window) {
  PaceMeter m;
  std::uint64_t done = 0;
  // 10 per second for 30 s, then 100 per second for 30 s: the window forgets the slow part.
  for (int s = 0; s <= 60; ++s) {
    m.observe(milliseconds(s * 1000), done);
    done += s < 30 ? 10 : 100;
  }
  ASSERT_TRUE(m.per_kilosecond());
  EXPECT_EQ(*m.per_kilosecond(), 100'000u);
}

TEST(PaceMeter, a_done_going_back_restarts_it) {
  PaceMeter m;
  m.observe(milliseconds(0), 500);
  m.observe(milliseconds(1000), 600);
  m.observe(milliseconds(2000), 700);
  ASSERT_EQ(m.per_kilosecond(), 100'000u);
  m.observe(milliseconds(3000), 10);  // rebuilt from its spec, or an estimate revised
  EXPECT_FALSE(m.per_kilosecond());
  m.observe(milliseconds(2500), 20);  // time going back restarts it too
  m.observe(milliseconds(3500), 30);
  m.observe(milliseconds(4500), 40);
  EXPECT_EQ(m.per_kilosecond(), 10'000u);
}

TEST(PaceMeter, is_exact_at_the_extremes) {
  PaceMeter m;
  m.observe(milliseconds(0), 0);
  m.observe(milliseconds(1), kMax / 2);
  m.observe(milliseconds(2), kMax);
  EXPECT_EQ(m.per_kilosecond(), kMax);  // saturates, never wraps
  PaceMeter stalled;
  for (int s = 0; s < 5; ++s) stalled.observe(milliseconds(s * 1000), 42);
  EXPECT_EQ(stalled.per_kilosecond(), 0u);
}

TEST(LanePace, the_median_is_the_lower_middle) {
  EXPECT_FALSE(median_pace({}));
  EXPECT_EQ(median_pace({7}), 7u);
  EXPECT_EQ(median_pace({9, 1}), 1u);
  EXPECT_EQ(median_pace({5, 100, 1}), 5u);
}

TEST(LanePace, a_move_needs_a_lane_faster_by_the_gain) {
  EXPECT_TRUE(pace_admits(std::nullopt, 1, 250'000));  // not under way, or not measured
  EXPECT_TRUE(pace_admits(100, std::nullopt, 250'000));  // a newcomer may be fast
  EXPECT_FALSE(pace_admits(100, 100, 250'000));
  EXPECT_FALSE(pace_admits(100, 124, 250'000));
  EXPECT_TRUE(pace_admits(100, 125, 250'000));  // exactly the gain
  EXPECT_TRUE(pace_admits(100, 100, 0));        // gain 0: as fast is enough
  EXPECT_FALSE(pace_admits(kMax, kMax, 1));     // exact, no overflow
  EXPECT_TRUE(pace_admits(0, 0, 10'000'000));   // a stalled split may move anywhere
}

}  // namespace
}  // namespace etlc::core
