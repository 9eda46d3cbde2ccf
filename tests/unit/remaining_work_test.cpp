// core/remaining_work.hpp: what the leader balances on and reports of a job's progress.
#include "core/remaining_work.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace etlc::core {
namespace {

using std::chrono::milliseconds;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

SplitRecord split(std::uint64_t weight, std::optional<std::uint64_t> done,
                  SplitStatus status = SplitStatus::runnable) {
  SplitRecord r;
  r.id = "s";
  r.weight = weight;
  r.status = status;
  r.progress.done = done;
  return r;
}

TEST(RemainingWork, a_split_that_reports_nothing_weighs_its_plan) {
  EXPECT_EQ(remaining_weight(split(100, std::nullopt)), 100u);
  EXPECT_EQ(done_weight(split(100, std::nullopt)), 0u);
  EXPECT_FALSE(nearly_done(split(100, std::nullopt), 1'000'000));
}

TEST(RemainingWork, done_counts_up_to_the_weight) {
  EXPECT_EQ(remaining_weight(split(100, 30)), 70u);
  EXPECT_EQ(remaining_weight(split(100, 500)), 0u);  // an estimate past the plan: all of it
  EXPECT_EQ(done_weight(split(100, 500)), 100u);
  EXPECT_EQ(remaining_weight(split(kMax, 1)), kMax - 1);
}

TEST(RemainingWork, a_split_that_is_not_runnable_has_nothing_left) {
  EXPECT_EQ(remaining_weight(split(100, 30, SplitStatus::completed)), 0u);
  EXPECT_EQ(done_weight(split(100, 30, SplitStatus::completed)), 100u);
  EXPECT_EQ(remaining_weight(split(100, 30, SplitStatus::quarantined)), 0u);
  EXPECT_EQ(done_weight(split(100, 30, SplitStatus::quarantined)), 30u);
  EXPECT_FALSE(nearly_done(split(100, 100, SplitStatus::completed), 1'000'000));
}

TEST(RemainingWork, nearly_done_is_exact_at_the_boundary) {
  EXPECT_TRUE(nearly_done(split(100, 90), 100'000));   // 10 left of 100: 10 %
  EXPECT_FALSE(nearly_done(split(100, 89), 100'000));  // 11 left
  EXPECT_TRUE(nearly_done(split(100, 100), 0));        // nothing left: pinned even at 0
  EXPECT_FALSE(nearly_done(split(100, 99), 0));
  EXPECT_FALSE(nearly_done(split(0, 0), 1'000'000));  // weightless: never moved anyway
  // Large weights: no overflow in remaining * 10^6.
  EXPECT_TRUE(nearly_done(split(kMax, kMax - kMax / 10), 100'000));
  EXPECT_FALSE(nearly_done(split(kMax, kMax - kMax / 10 - 2), 100'000));
}

TEST(WeightTally, add_and_remove_keep_exact_sums) {
  WeightTally t;
  const SplitRecord a = split(kMax, 10), b = split(kMax, std::nullopt);
  const SplitRecord c = split(50, 5, SplitStatus::completed),
                    q = split(40, 4, SplitStatus::quarantined);
  t.add(a);
  t.add(b);
  EXPECT_EQ(t.weights().planned, kMax);  // saturated on read
  t.add(c);
  t.add(q);
  t.remove(a);
  t.remove(b);
  EXPECT_EQ(t.weights(), (JobWeights{90, 54, 0}));  // the sum is exact again below 2^64
  t.remove(c);
  t.add(split(50, 20));
  EXPECT_EQ(t.weights(), (JobWeights{90, 24, 30}));
}

TEST(RateWindow, needs_two_samples_and_spans_the_window) {
  RateWindow w(milliseconds(10'000));
  EXPECT_FALSE(w.per_second());
  w.observe(milliseconds(1'000), 0);
  EXPECT_FALSE(w.per_second());
  w.observe(milliseconds(1'000), 5);
  EXPECT_FALSE(w.per_second());  // no time has passed
  w.observe(milliseconds(3'000), 200);
  EXPECT_EQ(w.per_second(), 100u);
  // Samples older than the window drop: the rate is the recent one.
  for (int s = 4; s <= 30; ++s) w.observe(milliseconds(s * 1'000), 200 + (s - 3) * 10);
  EXPECT_EQ(w.per_second(), 10u);
}

TEST(RateWindow, done_going_down_restarts_the_window) {
  RateWindow w(milliseconds(10'000));
  w.observe(milliseconds(0), 100);
  w.observe(milliseconds(1'000), 200);
  w.observe(milliseconds(2'000), 50);  // a split rebuilt: never a negative rate
  EXPECT_FALSE(w.per_second());
  w.observe(milliseconds(3'000), 60);
  EXPECT_EQ(w.per_second(), 10u);
}

TEST(RateWindow, keeps_a_bounded_number_of_samples) {
  RateWindow w(milliseconds(1'000'000));
  for (int i = 0; i < 1000; ++i) w.observe(milliseconds(i), static_cast<std::uint64_t>(i));
  // 64 samples, 1 per ms: 63 weight over 63 ms.
  EXPECT_EQ(w.per_second(), 1000u);
}

}  // namespace
}  // namespace etlc::core

namespace etlc::core {
namespace {

TEST(RemainingWork, a_split_within_two_commits_of_its_end_is_nearly_done) {
  EXPECT_TRUE(nearly_done(split(1000, 800), 0, 100));             // 200 left, 100 per commit
  EXPECT_FALSE(nearly_done(split(1000, 799), 0, 100));            // 201 left
  EXPECT_FALSE(nearly_done(split(1000, 800), 0, 0));              // pace unknown
  EXPECT_FALSE(nearly_done(split(1000, std::nullopt), 0, 1000));  // never reported done
  EXPECT_TRUE(nearly_done(split(kMax, 0), 0, kMax));              // no overflow in 2 x step
}

}  // namespace
}  // namespace etlc::core
