// Unit tests of the completion verdict.
#include <gtest/gtest.h>

#include <limits>

#include "core/completion.hpp"

namespace etlc::core {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

TEST(Completion, an_open_plan_never_completes) {
  EXPECT_EQ(completion_verdict(Finality::open, 10, 10, 0), Verdict::running);
  EXPECT_EQ(completion_verdict(Finality::open, 10, 5, 5), Verdict::running);
  EXPECT_EQ(completion_verdict(Finality::open, 0, 0, 0), Verdict::running);
}

TEST(Completion, a_final_plan_completes_only_when_every_split_completed) {
  EXPECT_EQ(completion_verdict(Finality::final, 10, 10, 0), Verdict::complete);
  EXPECT_EQ(completion_verdict(Finality::final, 10, 9, 0), Verdict::running);
  EXPECT_EQ(completion_verdict(Finality::final, 0, 0, 0), Verdict::complete);  // nothing to do
  EXPECT_EQ(completion_verdict(Finality::final, kMax, kMax, 0), Verdict::complete);
}

TEST(Completion, quarantine_stalls_a_final_plan_instead_of_completing_it) {
  EXPECT_EQ(completion_verdict(Finality::final, 10, 9, 1), Verdict::stalled);
  EXPECT_EQ(completion_verdict(Finality::final, 10, 0, 10), Verdict::stalled);
  EXPECT_EQ(completion_verdict(Finality::final, 10, 8, 1), Verdict::running);  // one still runs
}

TEST(Completion, inconsistent_tallies_are_a_config_error) {
  EXPECT_THROW(completion_verdict(Finality::final, 10, 11, 0), ConfigError);
  EXPECT_THROW(completion_verdict(Finality::final, 10, 6, 5), ConfigError);
  EXPECT_THROW(completion_verdict(Finality::open, 10, 6, 5), ConfigError);
  EXPECT_THROW(completion_verdict(Finality::final, kMax, kMax, 1), ConfigError);  // no wrap
  EXPECT_THROW(completion_verdict(Finality::final, kMax - 1, 1, kMax), ConfigError);
}

TEST(Completion, the_plan_record_overload_reads_its_tallies) {
  PlanRecord plan;
  plan.finality = Finality::final;
  plan.split_count = 3;
  plan.completed = 2;
  plan.quarantined = 1;
  EXPECT_EQ(completion_verdict(plan), Verdict::stalled);
  plan.quarantined = 0;
  plan.completed = 3;
  EXPECT_EQ(completion_verdict(plan), Verdict::complete);
}

}  // namespace
}  // namespace etlc::core
