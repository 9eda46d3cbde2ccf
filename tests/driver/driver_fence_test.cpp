// The Driver's two exactly-once mechanisms, in manual mode against a scripted member and a
// scripted sink fence: lanes stop the moment their session may have lapsed (before any step,
// durable_progress or commit, without waiting for the control loop), and a fenced sink is opened
// on every grant, resumes the lane from the larger of the record's and the sink's progress, and
// ends the lane when it refuses.
#include <gtest/gtest.h>

#include <chrono>

#include "driver/scripted.hpp"
#include "etlc/clock.hpp"
#include "etlc/driver.hpp"

namespace etlc::testing {
namespace {

using namespace std::chrono_literals;

class DriverFenceTest : public ::testing::Test {
 protected:
  void make(bool with_sink) {
    DriverOptions o;
    o.commit_interval = 1000ms;
    o.retry_backoff = 200ms;
    if (with_sink) o.sink_fence = sink;
    driver = std::make_unique<Driver>(member, source, o, clock);
  }
  void SetUp() override { make(false); }
  std::optional<DriverResult> steps(int n) {
    std::optional<DriverResult> r;
    for (int i = 0; i < n && !r; ++i) r = driver->step();
    return r;
  }
  std::vector<std::string> journal_for(const std::string& id) {
    std::vector<std::string> out;
    for (auto& line : source->journal()) {
      if (line.find(" " + id) != std::string::npos) out.push_back(line);
    }
    return out;
  }

  ManualClock clock;
  std::shared_ptr<ScriptedMember> member = std::make_shared<ScriptedMember>(4);
  std::shared_ptr<ScriptedSource> source = std::make_shared<ScriptedSource>();
  std::shared_ptr<ScriptedSinkFence> sink = std::make_shared<ScriptedSinkFence>();
  std::unique_ptr<Driver> driver;
};

// --- session lapse ------------------------------------------------------------------------------

TEST_F(DriverFenceTest, a_lapsed_session_stops_the_lane_before_its_next_step_without_a_loss_event) {
  source->script("s1", lane(1000));
  member->push(grant("s1", 1, 0, /*session=*/1));
  steps(3);
  const auto steps_before = source->count("step s1");
  ASSERT_GT(steps_before, 0u);
  member->lapse_session(1);
  clock.advance(1000ms);  // a commit is due: it must not be made
  steps(3);
  EXPECT_EQ(source->count("step s1"), steps_before) << "no step after the lapse";
  EXPECT_EQ(source->count("durable s1"), 0u) << "no durable_progress after the lapse";
  EXPECT_TRUE(member->calls("commit").empty());
  EXPECT_EQ(journal_for("s1").back(), "close s1 lost");
  EXPECT_EQ(driver->stats().lapsed, 1u);
  EXPECT_EQ(driver->stats().lost, 1u);
  // The member's SplitLost arrives later: nothing left to stop, nothing written.
  member->push(SplitLost{"s1", LossReason::starved});
  steps(2);
  EXPECT_TRUE(member->calls().empty());
}

TEST_F(DriverFenceTest, a_lane_checks_its_session_right_before_the_sink_write_of_a_step) {
  // The session lapses while a step is under way (between the Driver's check and the lane's own
  // write): the lane's LaneContext::live check stops the write, and the Driver closes the lane.
  LaneScript script = lane(1000);
  int step_no = 0;
  script.before_write = [&] {
    if (++step_no == 3) member->lapse_session(1);
  };
  source->script("s1", script);
  member->push(grant("s1", 1, 0, 1));
  steps(6);
  auto j = journal_for("s1");
  EXPECT_EQ(std::count(j.begin(), j.end(), "write s1@3"), 0) << "the third write came after the "
                                                                "lapse";
  EXPECT_EQ(std::count(j.begin(), j.end(), "lapsed s1"), 1);
  EXPECT_EQ(j.back(), "close s1 lost");
  EXPECT_EQ(source->count("step s1"), 3u);
  clock.advance(5000ms);
  steps(3);
  EXPECT_TRUE(member->calls("commit").empty());
}

TEST_F(DriverFenceTest, a_lapse_is_per_session_a_lane_of_the_next_session_runs_on) {
  source->script("s1", lane(1000));
  source->script("s2", lane(1000));
  member->push(grant("s1", 1, 0, /*session=*/1));
  steps(2);
  member->lapse_session(1);  // the member rejoins under session 2 and is granted s2
  member->push(grant("s2", 4, 0, /*session=*/2));
  steps(3);
  clock.advance(1000ms);
  steps(2);
  EXPECT_EQ(journal_for("s1").back(), "close s1 lost");
  const auto commits = member->calls("commit");
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(commits[0].id, "s2");
  EXPECT_EQ(commits[0].epoch, 4u);
}

TEST_F(DriverFenceTest, a_lane_that_reached_the_end_after_its_session_lapsed_does_not_complete) {
  LaneScript script = lane(2);
  int step_no = 0;
  script.before_write = [&] {
    if (++step_no == 2) member->lapse_session(1);  // the step that reaches the end
  };
  source->script("s1", script);
  member->push(grant("s1", 1, 0, 1));
  steps(5);
  EXPECT_TRUE(member->calls("complete").empty());
  EXPECT_TRUE(member->calls("commit").empty());
  EXPECT_EQ(journal_for("s1").back(), "close s1 lost");
}

TEST_F(DriverFenceTest, a_lane_granted_by_a_session_that_lapsed_before_it_opened_is_never_opened) {
  sink->set("s1", 0, {});
  make(true);
  member->lapse_session(1);
  member->push(grant("s1", 2, 0, 1));
  steps(3);
  EXPECT_TRUE(source->opened().empty());
  EXPECT_TRUE(sink->opens().empty()) << "opening the sink fence is a write: not after a lapse";
  EXPECT_TRUE(member->calls().empty());
  EXPECT_EQ(driver->stats().lapsed, 1u);
}

// --- sink fence ---------------------------------------------------------------------------------

TEST_F(DriverFenceTest, a_grant_opens_the_sink_fence_and_resumes_from_the_sinks_larger_progress) {
  make(true);
  sink->set("s1", 2, SplitProgress{25, "state@25"});  // a batch landed, its commit did not
  source->script("s1", lane(1000));
  member->push(grant("s1", /*epoch=*/3, /*watermark=*/10));
  steps(1);
  EXPECT_EQ(sink->opens(), (std::vector<std::string>{"s1@3"}));
  EXPECT_EQ(sink->epoch_of("s1"), 3u) << "the fence was raised to the grant's epoch";
  ASSERT_EQ(source->opened().size(), 1u);
  EXPECT_EQ(source->opened()[0].resume.watermark, 25u);
  EXPECT_EQ(source->opened()[0].resume.state, "state@25");
  EXPECT_EQ(driver->stats().sink_resumed, 1u);
  clock.advance(1000ms);
  steps(1);
  ASSERT_EQ(member->calls("commit").size(), 1u);
  EXPECT_EQ(member->calls("commit")[0].progress.watermark, 26u) << "25 from the sink, one step";
  EXPECT_EQ(member->calls("commit")[0].epoch, 3u);
}

TEST_F(DriverFenceTest, a_record_ahead_of_the_sink_keeps_the_records_progress) {
  make(true);
  sink->set("s1", 1, SplitProgress{5, "state@5"});
  source->script("s1", lane(1000));
  member->push(grant("s1", 2, 40));
  steps(1);
  ASSERT_EQ(source->opened().size(), 1u);
  EXPECT_EQ(source->opened()[0].resume.watermark, 40u);
  EXPECT_EQ(driver->stats().sink_resumed, 0u);
}

TEST_F(DriverFenceTest, a_sink_fence_at_a_newer_epoch_fails_the_split_and_opens_no_lane) {
  make(true);
  sink->set("s1", 9, {});
  source->script("s1", lane(1000));
  // The coordination store knows the newer owner: the failure is answered fenced, the lane lost.
  member->set_answer([](const MemberCall& c) {
    return c.op == "fail" ? CommitResult{CommitStatus::fenced, "newer epoch"}
                          : CommitResult{CommitStatus::durable, {}};
  });
  member->push(grant("s1", 4));
  steps(3);
  EXPECT_TRUE(source->opened().empty());
  const auto fails = member->calls("fail");
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].epoch, 4u);
  EXPECT_NE(fails[0].reason.find("stands at epoch 9"), std::string::npos) << fails[0].reason;
  EXPECT_EQ(sink->epoch_of("s1"), 9u) << "a refused open never lowers the fence";
  EXPECT_EQ(driver->stats().sink_refused, 1u);
  EXPECT_EQ(driver->stats().lost, 1u);
  EXPECT_EQ(driver->stats().failed, 0u);
}

TEST_F(DriverFenceTest, a_sink_ahead_of_every_grant_consumes_an_attempt_with_a_named_reason) {
  make(true);
  sink->set("s1", 1000, {});  // an operator's mistake: no grant ever had this epoch
  member->push(grant("s1", 1));
  steps(3);
  const auto fails = member->calls("fail");
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_NE(fails[0].reason.find("sink fence of split 's1' stands at epoch 1000"),
            std::string::npos)
      << fails[0].reason;
  EXPECT_EQ(driver->stats().failed, 1u);
  EXPECT_TRUE(member->calls("commit").empty());
}

TEST_F(DriverFenceTest, a_refused_batch_ends_the_lane_and_nothing_more_is_committed) {
  make(true);
  source->script("s1", lane(1000).fenced(3));
  member->set_answer([](const MemberCall& c) {
    return c.op == "fail" ? CommitResult{CommitStatus::fenced, "newer epoch"}
                          : CommitResult{CommitStatus::durable, {}};
  });
  member->push(grant("s1", 2));
  steps(6);
  EXPECT_EQ(journal_for("s1").back(), "close s1 lost");
  ASSERT_EQ(member->calls("fail").size(), 1u);
  EXPECT_NE(member->calls("fail")[0].reason.find("sink refused a batch"), std::string::npos);
  clock.advance(3000ms);
  steps(3);
  EXPECT_TRUE(member->calls("commit").empty());
  EXPECT_EQ(source->count("step s1"), 4u) << "three writes, then the refused step";
}

TEST_F(DriverFenceTest, an_unreachable_sink_is_retried_after_the_backoff_before_the_lane_opens) {
  make(true);
  sink->unreachable_for(2);
  source->script("s1", lane(1000));
  member->push(grant("s1", 1));
  steps(3);
  EXPECT_TRUE(source->opened().empty());
  EXPECT_EQ(sink->opens().size(), 1u) << "no retry before the backoff";
  clock.advance(200ms);
  steps(1);
  EXPECT_EQ(sink->opens().size(), 2u);
  EXPECT_TRUE(source->opened().empty());
  clock.advance(200ms);
  steps(1);
  EXPECT_EQ(sink->opens().size(), 3u);
  ASSERT_EQ(source->opened().size(), 1u);
  EXPECT_TRUE(member->calls().empty()) << "an unreachable sink is not poison";
}

TEST_F(DriverFenceTest, a_revocation_before_the_sink_answered_releases_without_a_lane) {
  make(true);
  sink->unreachable_for(5);
  member->push(grant("s1", 1));
  steps(2);
  member->push(RevokeRequested{"s1", 10s, 1});
  clock.advance(200ms);
  steps(3);
  EXPECT_EQ(member->ops(), (std::vector<std::string>{"release_drained"}));
  EXPECT_TRUE(source->opened().empty());
}

}  // namespace
}  // namespace etlc::testing
