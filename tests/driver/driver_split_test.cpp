// The Driver's part of dynamic splitting: a SplitRequested asks the lane to cut between steps,
// and the cut is committed (MemberApi::split) before the lane steps again, so nothing the lane
// reads or writes after the cut can outrun it. Manual mode, a scripted member and lanes.
#include <gtest/gtest.h>

#include <chrono>

#include "driver/scripted.hpp"
#include "etlc/clock.hpp"
#include "etlc/driver.hpp"
#include "etlc/errors.hpp"

namespace etlc::testing {
namespace {

using namespace std::chrono_literals;

class DriverSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DriverOptions o;
    o.commit_interval = 1000ms;
    o.retry_backoff = 200ms;
    driver = std::make_unique<Driver>(member, source, o, clock);
  }
  void steps(int n) {
    for (int i = 0; i < n; ++i) driver->step();
  }
  // Grants s1 (10 records) and lets its lane read `read` of them.
  void read_some(LaneScript script, int read) {
    source->script("s1", script);
    member->push(grant("s1", 3));
    steps(read);  // one lane step per driver step (the first opens the lane too)
    ASSERT_EQ(source->count("step s1"), static_cast<std::size_t>(read));
  }

  ManualClock clock;
  std::shared_ptr<ScriptedMember> member = std::make_shared<ScriptedMember>(4);
  std::shared_ptr<ScriptedSource> source = std::make_shared<ScriptedSource>();
  std::unique_ptr<Driver> driver;
};

TEST_F(DriverSplitTest, a_request_cuts_the_lane_and_commits_the_cut_before_the_next_step) {
  read_some(lane(10).splittable(), 4);
  std::size_t steps_at_cut = 0;
  member->set_answer([&](const MemberCall& c) {
    if (c.op == "split") steps_at_cut = source->count("step s1");
    return CommitResult{CommitStatus::durable, {}};
  });
  member->push(SplitRequested{"s1", 3, 0.5});
  steps(20);
  const auto cuts = member->calls("split");
  ASSERT_EQ(cuts.size(), 1u);
  EXPECT_EQ(cuts[0].epoch, 3u);
  EXPECT_EQ(cuts[0].reason, "records 7..10") << "keeps half of the 6 left, from record 4";
  EXPECT_EQ(cuts[0].progress.watermark, 4u);
  EXPECT_EQ(cuts[0].progress.state, "state@4 end=7") << "the cut rides with the new end";
  EXPECT_EQ(steps_at_cut, 4u) << "no step between the lane's cut and its commit";
  const auto completes = member->calls("complete");
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_EQ(completes[0].progress.watermark, 7u) << "the parent ends at the cut";
  EXPECT_EQ(source->count("step s1"), 7u);
  EXPECT_EQ(driver->stats().split_asked, 1u);
  EXPECT_EQ(driver->stats().split_cuts, 1u);
}

TEST_F(DriverSplitTest, a_cut_that_does_not_land_holds_the_lane_until_it_does) {
  read_some(lane(10).splittable(), 2);
  int refusals = 2;
  member->set_answer([&](const MemberCall& c) {
    if (c.op == "split" && refusals > 0) {
      --refusals;
      return CommitResult{CommitStatus::retryable, "store down"};
    }
    return CommitResult{CommitStatus::durable, {}};
  });
  member->push(SplitRequested{"s1", 3, 0.5});
  steps(5);
  EXPECT_EQ(member->calls("split").size(), 1u);
  EXPECT_EQ(source->count("step s1"), 2u) << "no step while the cut is not durable";
  for (int i = 0; i < 3; ++i) {
    clock.advance(200ms);
    steps(3);
  }
  const auto cuts = member->calls("split");
  ASSERT_EQ(cuts.size(), 3u) << "retried as a cut, never as a plain commit";
  EXPECT_TRUE(member->calls("commit").empty());
  EXPECT_EQ(cuts[2].reason, cuts[0].reason) << "the same residual each time";
  steps(20);
  ASSERT_EQ(member->calls("complete").size(), 1u);
  EXPECT_EQ(member->calls("complete")[0].progress.watermark, 6u);
}

TEST_F(DriverSplitTest, a_lane_that_cannot_split_declines_and_reads_on) {
  read_some(lane(6), 2);
  member->push(SplitRequested{"s1", 3, 0.5});
  steps(20);
  EXPECT_EQ(source->count("split s1"), 1u) << "the lane was asked";
  EXPECT_TRUE(member->calls("split").empty());
  ASSERT_EQ(member->calls("complete").size(), 1u);
  EXPECT_EQ(member->calls("complete")[0].progress.watermark, 6u);
  EXPECT_EQ(driver->stats().split_cuts, 0u);
}

TEST_F(DriverSplitTest, a_request_for_another_tenancy_is_ignored) {
  read_some(lane(10).splittable(), 2);
  member->push(SplitRequested{"s1", 2, 0.5});
  steps(20);
  EXPECT_EQ(source->count("split s1"), 0u);
  EXPECT_TRUE(member->calls("split").empty());
  ASSERT_EQ(member->calls("complete").size(), 1u);
  EXPECT_EQ(member->calls("complete")[0].progress.watermark, 10u);
}

// A cut the member refuses (UsageError) fails the split: completing it at the cut would drop
// the residual's records, while a failed split is read again from its last commit, whole.
class RefusingMember final : public ScriptedMember {
 public:
  CommitResult split(std::string_view, const SplitProgress&, const SplitResidual&,
                     std::uint64_t) override {
    throw UsageError("the residual exists already as another residual");
  }
};

TEST(DriverSplit, a_refused_cut_fails_the_split_instead_of_completing_it) {
  ManualClock clock;
  auto member = std::make_shared<RefusingMember>();
  auto source = std::make_shared<ScriptedSource>();
  Driver driver(member, source, DriverOptions{}, clock);
  source->script("s1", lane(10).splittable());
  member->push(grant("s1", 3));
  for (int i = 0; i < 3; ++i) driver.step();
  member->push(SplitRequested{"s1", 3, 0.5});
  for (int i = 0; i < 20; ++i) driver.step();
  EXPECT_TRUE(member->calls("complete").empty());
  ASSERT_EQ(member->calls("fail").size(), 1u);
  EXPECT_NE(member->calls("fail")[0].reason.find("split refused"), std::string::npos)
      << member->calls("fail")[0].reason;
}

}  // namespace
}  // namespace etlc::testing
