// core/split_rules.hpp: which splits the leader asks to split (issue 17, decision 0013).
#include "core/split_rules.hpp"

#include <gtest/gtest.h>

#include "etlc/errors.hpp"

namespace etlc::core {
namespace {

SplitCandidate c(std::string id, std::uint64_t remaining, std::optional<std::uint64_t> pace = {},
                 std::uint32_t children = 0, bool requested = false) {
  return SplitCandidate{std::move(id), remaining, pace, children, requested};
}

SplitLimits limits(std::uint64_t min_residual = 10) {
  return SplitLimits{min_residual, 4, 100, 0};
}

std::vector<std::string> ids(const std::vector<SplitRequest>& rs) {
  std::vector<std::string> out;
  for (const auto& r : rs) out.push_back(r.id);
  return out;
}

TEST(SplitRules, nothing_while_splits_are_queued_or_no_lane_is_free) {
  const std::vector<SplitCandidate> cs = {c("a", 1000, 10)};
  EXPECT_TRUE(split_requests(cs, 4, 1, limits()).empty());
  EXPECT_TRUE(split_requests(cs, 0, 0, limits()).empty());
  EXPECT_EQ(ids(split_requests(cs, 4, 0, limits())), std::vector<std::string>{"a"});
}

TEST(SplitRules, the_split_that_would_end_last_goes_first) {
  // a: 1000 at 100 -> 10 s; b: 600 at 20 -> 30 s; c: stalled; d, e: pace unknown (after all known).
  const std::vector<SplitCandidate> cs = {c("a", 1000, 100), c("b", 600, 20), c("c", 50, 0),
                                          c("d", 5000), c("e", 9000)};
  EXPECT_EQ(ids(split_requests(cs, 10, 0, limits())),
            (std::vector<std::string>{"c", "b", "a", "e", "d"}));
  EXPECT_EQ(ids(split_requests(cs, 2, 0, limits())), (std::vector<std::string>{"c", "b"}));
  EXPECT_EQ(split_requests(cs, 1, 0, limits()).front().fraction_ppm, 500'000u);  // half
}

TEST(SplitRules, never_a_residual_below_the_minimum) {
  const std::vector<SplitCandidate> cs = {c("small", 19, 1), c("fits", 20, 1)};
  EXPECT_EQ(ids(split_requests(cs, 4, 0, limits(10))), std::vector<std::string>{"fits"});
}

TEST(SplitRules, outstanding_requests_and_the_caps_bound_it) {
  // One request outstanding takes one of the two free lanes; b is at its children cap.
  const std::vector<SplitCandidate> cs = {c("a", 1000, 1, 0, true), c("b", 900, 1, 4),
                                          c("c", 800, 1), c("d", 700, 1)};
  EXPECT_EQ(ids(split_requests(cs, 2, 0, limits())), std::vector<std::string>{"c"});
  SplitLimits job = limits();
  job.max_dynamic_splits = 3;
  job.dynamic_splits_so_far = 2;  // 2 done + 1 outstanding = the cap
  EXPECT_TRUE(split_requests(cs, 10, 0, job).empty());
  job.dynamic_splits_so_far = 1;
  EXPECT_EQ(ids(split_requests(cs, 10, 0, job)), std::vector<std::string>{"c"});
}

TEST(SplitRules, bad_input_is_a_config_error) {
  const std::vector<SplitCandidate> twice = {c("a", 100), c("a", 200)};
  EXPECT_THROW(split_requests(twice, 1, 0, limits()), ConfigError);
  const std::vector<SplitCandidate> one = {c("a", 100)};
  EXPECT_THROW(split_requests(one, 1, 0, limits(0)), ConfigError);
}

}  // namespace
}  // namespace etlc::core
