// core/lane_pace.hpp: a split's pace as the leader measures it, a member's lane pace, and the
// test one balance move of a split under way must pass.
#include "core/lane_pace.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace etlc::core {
namespace {

using std::chrono::milliseconds;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

milliseconds s(int seconds) {
  return milliseconds(seconds * 1000);
}

TEST(PaceMeter, needs_two_steps_of_time) {
  PaceMeter m;
  EXPECT_FALSE(m.per_kilosecond(s(0)));
  m.observe(s(1), 0);
  m.observe(s(2), 100);
  EXPECT_FALSE(m.per_kilosecond(s(2)));  // one short step: a single delivery may be late
  m.observe(s(2), 100);                  // the same instant: no step of time
  EXPECT_FALSE(m.per_kilosecond(s(2)));
  m.observe(s(3), 200);
  EXPECT_EQ(m.per_kilosecond(s(3)), 100'000u);  // 100 per second
}

TEST(PaceMeter, one_step_of_half_a_window_is_enough) {
  PaceMeter m;  // a slow commit cadence: every 12 s
  m.observe(s(0), 0);
  m.observe(s(12), 1200);
  EXPECT_EQ(m.per_kilosecond(s(12)), 100'000u);
  m.observe(s(24), 2400);
  EXPECT_EQ(m.per_kilosecond(s(24)), 100'000u);
}

TEST(PaceMeter, follows_a_change_within_about_a_window) {
  PaceMeter m;
  std::uint64_t done = 0;
  // 10 per second for 30 s, then 100 per second: after 30 s more the slow part weighs (10/11)^30.
  for (int t = 0; t <= 60; ++t) {
    m.observe(s(t), done);
    done += t < 30 ? 10 : 100;
  }
  const auto pace = m.per_kilosecond(s(60));
  ASSERT_TRUE(pace);
  EXPECT_GT(*pace, 94'000u);
  EXPECT_LT(*pace, 96'000u);
  // A steady pace is kept exactly.
  PaceMeter steady;
  for (int t = 0; t <= 20; ++t) steady.observe(s(t), 7u * static_cast<std::uint64_t>(t));
  EXPECT_EQ(steady.per_kilosecond(s(20)), 7'000u);
}

TEST(PaceMeter, a_stall_longer_than_the_window_lowers_it) {
  PaceMeter m;
  for (int t = 0; t <= 5; ++t) m.observe(s(t), 100u * static_cast<std::uint64_t>(t));
  EXPECT_EQ(m.per_kilosecond(s(10)), 100'000u);  // 5 s since the last commit: a cadence
  EXPECT_EQ(m.per_kilosecond(s(25)), 33'333u);   // 20 s: weighed as 20 s of nothing
}

TEST(PaceMeter, a_done_going_back_restarts_it) {
  PaceMeter m;
  m.observe(s(0), 500);
  m.observe(s(1), 600);
  m.observe(s(2), 700);
  ASSERT_EQ(m.per_kilosecond(s(2)), 100'000u);
  m.observe(s(3), 10);  // rebuilt from its spec, or an estimate revised
  EXPECT_FALSE(m.per_kilosecond(s(3)));
  m.observe(milliseconds(2500), 20);  // time going back restarts it too
  m.observe(milliseconds(3500), 30);
  m.observe(milliseconds(4500), 40);
  EXPECT_EQ(m.per_kilosecond(milliseconds(4500)), 10'000u);
}

TEST(PaceMeter, is_exact_at_the_extremes) {
  PaceMeter m;
  m.observe(milliseconds(0), 0);
  m.observe(milliseconds(1), kMax / 2);
  m.observe(milliseconds(2), kMax);
  EXPECT_EQ(m.per_kilosecond(milliseconds(2)), kMax);  // saturates, never wraps
  PaceMeter stalled;
  for (int t = 0; t < 5; ++t) stalled.observe(s(t), 42);
  EXPECT_EQ(stalled.per_kilosecond(s(5)), 0u);
}

TEST(LanePace, the_history_answers_for_the_load_a_move_would_give) {
  LanePaceHistory h;
  EXPECT_FALSE(h.at(1));
  h.observe(2, 1000);         // two splits, each at 1000: a shared resource halves them
  EXPECT_EQ(h.at(1), 1000u);  // only load 2 seen: the nearest
  h.observe(1, 2000);
  EXPECT_EQ(h.at(1), 2000u);
  EXPECT_EQ(h.at(2), 1000u);
  EXPECT_EQ(h.at(9), 1000u);
  h.observe(3, 600);
  EXPECT_EQ(h.at(2), 1000u);  // exact beats near
  h.observe(2, 900);          // the latest at a load replaces the older
  EXPECT_EQ(h.at(2), 900u);
  LanePaceHistory tie;
  tie.observe(1, 10);
  tie.observe(3, 30);
  EXPECT_EQ(tie.at(2), 30u);  // equally near: the heavier load's
}

TEST(LanePace, the_history_keeps_the_most_recent_loads) {
  LanePaceHistory h;
  for (std::uint32_t load = 1; load <= LanePaceHistory::kMaxLoads + 1; ++load) {
    h.observe(load, 100u * load);
  }
  EXPECT_EQ(h.at(1), 200u);  // load 1, the oldest, was evicted: load 2 is the nearest left
  EXPECT_EQ(h.at(LanePaceHistory::kMaxLoads + 1), 100u * (LanePaceHistory::kMaxLoads + 1));
}

TEST(LanePace, the_median_is_the_lower_middle) {
  EXPECT_FALSE(median_pace({}));
  EXPECT_EQ(median_pace({7}), 7u);
  EXPECT_EQ(median_pace({9, 1}), 1u);
  EXPECT_EQ(median_pace({5, 100, 1}), 5u);
}

TEST(LanePace, a_move_needs_a_lane_faster_by_the_gain) {
  EXPECT_TRUE(pace_admits(std::nullopt, 1, 250'000));    // not under way, or not measured
  EXPECT_TRUE(pace_admits(100, std::nullopt, 250'000));  // a newcomer may be fast
  EXPECT_FALSE(pace_admits(100, 100, 250'000));
  EXPECT_FALSE(pace_admits(100, 124, 250'000));
  EXPECT_TRUE(pace_admits(100, 125, 250'000));  // exactly the gain
  EXPECT_TRUE(pace_admits(100, 100, 0));        // gain 0: as fast is enough
  EXPECT_FALSE(pace_admits(kMax, kMax, 1));     // exact, no overflow
  EXPECT_TRUE(pace_admits(0, 1, 10'000'000));   // a stalled split may move to a lane that reads
  EXPECT_FALSE(pace_admits(0, 0, 0));           // but not to one that reads nothing either
}

}  // namespace
}  // namespace etlc::core
