// Driver unit tests in manual mode: a scripted member, scripted lanes, a manual clock. Every
// scenario is deterministic: step() runs events and lane turns on the test's thread.
#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "driver/scripted.hpp"
#include "etlc/clock.hpp"
#include "etlc/driver.hpp"
#include "etlc/errors.hpp"

namespace etlc::testing {
namespace {

using namespace std::chrono_literals;

class DriverTest : public ::testing::Test {
 protected:
  DriverOptions options() {
    DriverOptions o;
    o.commit_interval = 1000ms;
    o.retry_backoff = 200ms;
    o.shutdown_timeout = 5000ms;
    return o;
  }
  void make(DriverOptions o) { driver = std::make_unique<Driver>(member, source, o, clock); }
  void SetUp() override { make(options()); }

  // Steps `n` times (or until the driver finishes); returns the result if it finished.
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
  std::unique_ptr<Driver> driver;
};

TEST_F(DriverTest, a_grant_opens_a_lane_that_resumes_from_the_granted_progress) {
  source->script("s1", lane(100));
  member->push(grant("s1", /*epoch=*/7, /*watermark=*/40));
  steps(1);
  auto opened = source->opened();
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0].spec.id, "s1");
  EXPECT_EQ(opened[0].spec.descriptor, "descriptor of s1");
  EXPECT_EQ(opened[0].epoch, 7u);
  EXPECT_EQ(opened[0].resume.watermark, 40u);
  EXPECT_EQ(opened[0].resume.state, "state@40");
  EXPECT_EQ(opened[0].instance_id, "scripted-member");
  EXPECT_EQ(driver->stats().granted, 1u);
  EXPECT_EQ(driver->stats().resumed, 1u);
  EXPECT_EQ(driver->stats().lanes_open, 1u);
  EXPECT_FALSE(member->started()) << "manual mode never starts the member";
}

TEST_F(DriverTest, durable_progress_is_committed_on_the_commit_interval_only) {
  source->script("s1", lane(1000));
  member->push(grant("s1"));
  steps(5);
  EXPECT_TRUE(member->calls("commit").empty()) << "no commit before the interval";
  clock.advance(1000ms);
  steps(1);
  auto commits = member->calls("commit");
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(commits[0].id, "s1");
  EXPECT_EQ(commits[0].progress.watermark, 5u) << "the lane had handed over 5 records";
  EXPECT_EQ(commits[0].progress.state, "state@5");
  steps(3);
  EXPECT_EQ(member->calls("commit").size(), 1u);
  clock.advance(1000ms);
  steps(1);
  commits = member->calls("commit");
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_EQ(commits[1].progress.watermark, 9u);
  EXPECT_EQ(driver->stats().commits, 2u);
}

TEST_F(DriverTest, the_first_commit_covers_what_the_lane_did_past_its_resume_point) {
  source->script("s1", lane(1000));
  member->push(grant("s1", 1, 10));
  steps(1);  // opens and runs one step: progress 11
  clock.advance(1000ms);
  steps(1);
  ASSERT_EQ(member->calls("commit").size(), 1u);
  EXPECT_EQ(member->calls("commit")[0].progress.watermark, 11u);
}

TEST_F(DriverTest, end_of_split_commits_the_final_progress_as_completion) {
  source->script("s1", lane(3));
  member->push(grant("s1"));
  steps(5);
  auto completes = member->calls("complete");
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_EQ(completes[0].progress.watermark, 3u);
  EXPECT_EQ(completes[0].progress.state, "state@3");
  EXPECT_TRUE(member->calls("commit").empty());
  auto j = journal_for("s1");
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j.back(), "close s1 completed");
  EXPECT_EQ(source->count("step s1"), 3u) << "no step after the end of the split";
  EXPECT_EQ(driver->stats().completed, 1u);
  EXPECT_EQ(driver->stats().lanes_open, 0u);
}

TEST_F(DriverTest, a_revocation_drains_commits_the_final_progress_then_releases) {
  source->script("s1", lane(1000));
  member->push(grant("s1", /*epoch=*/5));
  steps(4);
  member->push(RevokeRequested{"s1", 10s});
  steps(2);
  EXPECT_EQ(member->ops(), (std::vector<std::string>{"commit", "release_drained"}));
  EXPECT_EQ(member->calls("commit")[0].progress.watermark, 4u);
  for (const auto& c : member->calls()) EXPECT_EQ(c.epoch, 5u) << c.op << ": the lane's tenancy";
  auto j = journal_for("s1");
  ASSERT_GE(j.size(), 2u);
  EXPECT_EQ(j[j.size() - 2], "drain s1");
  EXPECT_EQ(j.back(), "close s1 drained");
  EXPECT_EQ(driver->stats().drained, 1u);
  const auto steps_before = source->count("step s1");
  clock.advance(5000ms);
  steps(3);
  EXPECT_EQ(source->count("step s1"), steps_before) << "a drained lane is never stepped again";
}

TEST_F(DriverTest, a_declined_drain_declines_the_revocation_and_stops_the_lane) {
  source->script("s1", lane(1000).declining());
  member->push(grant("s1"));
  steps(3);
  member->push(RevokeRequested{"s1", 10s, 1});
  steps(1);
  EXPECT_EQ(member->ops(), (std::vector<std::string>{"decline_revoke"}));
  EXPECT_EQ(member->calls().back().epoch, 1u);  // names the tenancy of the lane that declined
  EXPECT_EQ(journal_for("s1").back(), "close s1 lost");
  // The forced release that follows is reported as a loss; nothing is left to stop.
  member->push(SplitLost{"s1", LossReason::revoked});
  clock.advance(2000ms);
  steps(3);
  EXPECT_EQ(member->ops(), (std::vector<std::string>{"decline_revoke"}));
  EXPECT_EQ(driver->stats().declined, 1u);
  EXPECT_EQ(driver->stats().lost, 1u);
}

TEST_F(DriverTest, a_loss_stops_the_lane_at_once_and_nothing_is_committed_for_it_again) {
  source->script("s1", lane(1000));
  member->push(grant("s1"));
  steps(3);
  auto token = source->stop_of("s1");
  EXPECT_FALSE(token.stop_requested());
  member->push(SplitLost{"s1", LossReason::session_expired});
  clock.advance(1000ms);  // a commit would be due: it must not happen
  steps(1);
  EXPECT_TRUE(token.stop_requested());
  EXPECT_EQ(journal_for("s1").back(), "close s1 lost");
  const auto steps_at_loss = source->count("step s1");
  clock.advance(5000ms);
  steps(5);
  EXPECT_TRUE(member->calls("commit").empty());
  EXPECT_TRUE(member->calls("complete").empty());
  EXPECT_TRUE(member->calls("release_drained").empty());
  EXPECT_EQ(source->count("step s1"), steps_at_loss);
  EXPECT_EQ(source->count("durable s1"), 0u) << "a lost lane is only closed";
  EXPECT_EQ(driver->stats().lost, 1u);
}

TEST_F(DriverTest, a_fenced_commit_stops_the_lane_like_a_loss) {
  source->script("s1", lane(1000));
  member->set_answer([](const MemberCall& c) {
    if (c.op == "commit") return CommitResult{CommitStatus::fenced, "newer epoch"};
    return CommitResult{CommitStatus::durable, {}};
  });
  member->push(grant("s1"));
  steps(2);
  clock.advance(1000ms);
  steps(1);
  EXPECT_EQ(member->calls("commit").size(), 1u);
  EXPECT_EQ(journal_for("s1").back(), "close s1 lost");
  // The member reports the same loss as an event; it must not touch anything.
  member->push(SplitLost{"s1", LossReason::fenced});
  clock.advance(3000ms);
  steps(4);
  EXPECT_EQ(member->calls("commit").size(), 1u);
  EXPECT_EQ(driver->stats().lost, 1u);
  // The split may come back later: a new tenancy gets a new lane.
  member->set_answer({});
  member->push(grant("s1", 2, 0));
  steps(2);
  ASSERT_EQ(source->opened().size(), 2u);
  EXPECT_EQ(source->opened()[1].epoch, 2u);
}

TEST_F(DriverTest, a_retryable_commit_is_retried_after_the_backoff) {
  source->script("s1", lane(1000));
  int failures = 1;
  member->set_answer([&](const MemberCall& c) {
    if (c.op == "commit" && failures > 0) {
      --failures;
      return CommitResult{CommitStatus::retryable, "store down"};
    }
    return CommitResult{CommitStatus::durable, {}};
  });
  member->push(grant("s1"));
  steps(2);
  clock.advance(1000ms);
  steps(1);
  ASSERT_EQ(member->calls("commit").size(), 1u);
  steps(2);
  EXPECT_EQ(member->calls("commit").size(), 1u) << "not before the backoff";
  clock.advance(200ms);
  steps(1);
  auto commits = member->calls("commit");
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_GT(commits[1].progress.watermark, commits[0].progress.watermark);
  EXPECT_EQ(driver->stats().commit_retries, 1u);
  EXPECT_EQ(driver->stats().commits, 1u);
}

TEST_F(DriverTest, a_retryable_completion_is_retried_until_durable) {
  source->script("s1", lane(2));
  int failures = 2;
  member->set_answer([&](const MemberCall& c) {
    if (c.op == "complete" && failures > 0) {
      --failures;
      return CommitResult{CommitStatus::retryable, "store down"};
    }
    return CommitResult{CommitStatus::durable, {}};
  });
  member->push(grant("s1"));
  steps(4);
  EXPECT_EQ(member->calls("complete").size(), 1u);
  for (int i = 0; i < 2; ++i) {
    clock.advance(200ms);
    steps(1);
  }
  EXPECT_EQ(member->calls("complete").size(), 3u);
  EXPECT_EQ(journal_for("s1").back(), "close s1 completed");
  EXPECT_EQ(source->count("step s1"), 2u);
}

TEST_F(DriverTest, poison_fails_the_split_with_the_lanes_reason) {
  source->script("s1", lane(100).poison(3));
  member->push(grant("s1"));
  steps(6);
  auto fails = member->calls("fail");
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_EQ(fails[0].id, "s1");
  EXPECT_EQ(fails[0].reason, "bad record at 3");
  EXPECT_EQ(journal_for("s1").back(), "close s1 failed");
  EXPECT_TRUE(member->calls("complete").empty());
  EXPECT_EQ(driver->stats().failed, 1u);
}

TEST_F(DriverTest, a_lane_that_throws_is_poison) {
  source->script("s1", lane(100).throwing(2));
  member->push(grant("s1"));
  steps(5);
  auto fails = member->calls("fail");
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_NE(fails[0].reason.find("boom"), std::string::npos) << fails[0].reason;
}

TEST_F(DriverTest, a_lane_that_cannot_open_is_poison) {
  source->script("s1", lane(1).unopenable());
  member->push(grant("s1"));
  steps(2);
  auto fails = member->calls("fail");
  ASSERT_EQ(fails.size(), 1u);
  EXPECT_NE(fails[0].reason.find("cannot open s1"), std::string::npos) << fails[0].reason;
  EXPECT_EQ(driver->stats().lanes_open, 0u);
}

TEST_F(DriverTest, all_complete_ends_the_run_and_shuts_the_member_down) {
  source->script("s1", lane(2));
  member->push(grant("s1"));
  steps(3);
  member->push(AllComplete{1});
  auto r = steps(3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit, DriverExit::completed);
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(member->ops().back(), "shutdown");
  EXPECT_EQ(driver->step()->exit, DriverExit::completed) << "a finished driver stays finished";
}

TEST_F(DriverTest, a_stall_fails_by_default) {
  member->push(Stalled{3, 1, {}});
  auto r = steps(2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit, DriverExit::stalled);
  EXPECT_FALSE(r->ok());
  EXPECT_NE(r->message.find("1 quarantined"), std::string::npos) << r->message;
  EXPECT_EQ(member->ops().back(), "shutdown");
}

TEST_F(DriverTest, a_stall_drains_with_a_warning_when_configured) {
  auto o = options();
  o.on_stall = StallPolicy::drain_with_warning;
  make(o);
  member->push(Stalled{3, 1, {}});
  auto r = steps(2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit, DriverExit::stalled_drained);
  EXPECT_TRUE(r->ok());
}

TEST_F(DriverTest, a_planner_failure_fails_even_under_drain_with_warning) {
  auto o = options();
  o.on_stall = StallPolicy::drain_with_warning;
  make(o);
  member->push(Stalled{0, 0, "the planner failed 10 times in a row; last error: bucket gone"});
  auto r = steps(2);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit, DriverExit::stalled);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->exit_code(), exit_codes::stalled);
  EXPECT_NE(r->message.find("bucket gone"), std::string::npos) << r->message;
}

TEST_F(DriverTest, exit_codes_tell_a_supervisor_what_happened) {
  auto code = [](DriverExit e) { return DriverResult{e, {}}.exit_code(); };
  EXPECT_EQ(code(DriverExit::completed), 0);
  EXPECT_EQ(code(DriverExit::stopped), 0) << "a graceful stop is a success";
  EXPECT_EQ(code(DriverExit::stalled_drained), 0);
  EXPECT_EQ(code(DriverExit::fatal), exit_codes::fatal);
  EXPECT_EQ(code(DriverExit::bad_config), exit_codes::bad_config);
  EXPECT_EQ(code(DriverExit::stalled), exit_codes::stalled);
  EXPECT_EQ(code(DriverExit::aborted), exit_codes::aborted);
  const std::set<int> distinct{exit_codes::ok, exit_codes::fatal, exit_codes::bad_config,
                               exit_codes::stalled, exit_codes::aborted};
  EXPECT_EQ(distinct.size(), 5u);
  EXPECT_TRUE((DriverResult{DriverExit::stopped, {}}.ok()));
  EXPECT_EQ(exit_codes::exit_code_for(ConfigError("x")), exit_codes::bad_config);
  EXPECT_EQ(exit_codes::exit_code_for(StoreError(StoreErrc::unavailable, "x")), exit_codes::fatal);
}

// A member whose start() refuses the configuration (what Coordinator::start does when the job
// was planned with another fingerprint).
class RefusingMember final : public ScriptedMember {
 public:
  void start() override { throw ConfigError("job fingerprint mismatch"); }
};

TEST(DriverRun, a_configuration_refused_at_start_is_bad_config) {
  Driver d(std::make_shared<RefusingMember>(), std::make_shared<ScriptedSource>());
  DriverResult r = d.run();
  EXPECT_EQ(r.exit, DriverExit::bad_config);
  EXPECT_EQ(r.exit_code(), exit_codes::bad_config);
  EXPECT_NE(r.message.find("fingerprint"), std::string::npos) << r.message;
}

TEST_F(DriverTest, a_regrant_after_someone_elses_tenancy_resumes_from_the_grant_even_if_lower) {
  // Our lane of epoch 1 commits 3 and is drained. The split is then set back (etlc seek bumps
  // the epoch to 2) and granted to us again at epoch 3 with watermark 1: the grant is the truth.
  source->script("s1", lane(1000));
  member->push(grant("s1", 1));
  steps(3);
  clock.advance(1000ms);
  steps(1);
  ASSERT_EQ(member->calls("commit").size(), 1u);
  member->push(RevokeRequested{"s1", 10s, 1});
  steps(3);
  ASSERT_EQ(journal_for("s1").back(), "close s1 drained");
  member->push(grant("s1", 3, 1));
  steps(2);
  auto j = journal_for("s1");
  EXPECT_NE(std::find(j.begin(), j.end(), "open s1@1"), j.end())
      << "a later tenancy resumes from its grant, not from our older commit";
}

TEST_F(DriverTest, fatal_stops_every_lane_at_once) {
  source->script("s1", lane(1000));
  source->script("s2", lane(1000));
  member->push(grant("s1"));
  member->push(grant("s2"));
  steps(3);
  member->push(Fatal{"twin instance"});
  clock.advance(1000ms);
  auto r = steps(3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit, DriverExit::fatal);
  EXPECT_EQ(r->message, "twin instance");
  EXPECT_TRUE(member->calls("commit").empty());
  EXPECT_EQ(journal_for("s1").back(), "close s1 lost");
  EXPECT_EQ(journal_for("s2").back(), "close s2 lost");
}

TEST_F(DriverTest, a_stop_request_drains_and_commits_every_lane_then_shuts_down) {
  source->script("s1", lane(1000));
  source->script("s2", lane(1000));
  member->push(grant("s1"));
  member->push(grant("s2"));
  steps(3);
  driver->request_stop();
  auto r = steps(3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit, DriverExit::stopped);
  EXPECT_TRUE(r->ok()) << "a requested graceful stop is what the caller wanted";
  EXPECT_EQ(r->exit_code(), 0);
  EXPECT_EQ(member->calls("commit").size(), 2u) << "each lane's final progress is committed";
  EXPECT_TRUE(member->calls("release_drained").empty()) << "the member's shutdown releases";
  EXPECT_EQ(member->ops().back(), "shutdown");
  EXPECT_EQ(journal_for("s1").back(), "close s1 shutdown");
  EXPECT_EQ(journal_for("s2").back(), "close s2 shutdown");
}

TEST_F(DriverTest, grants_during_a_stop_open_no_lane) {
  driver->request_stop();
  member->push(grant("s1"));
  auto r = steps(3);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(source->opened().empty());
}

TEST_F(DriverTest, a_lane_still_busy_at_the_shutdown_deadline_is_closed_without_commit) {
  source->script("s1", lane(1000));
  int failures = 1000;
  member->set_answer([&](const MemberCall& c) {
    if (c.op == "commit" && failures > 0) {
      --failures;
      return CommitResult{CommitStatus::retryable, "store down"};
    }
    return CommitResult{CommitStatus::durable, {}};
  });
  member->push(grant("s1"));
  steps(2);
  driver->request_stop();
  EXPECT_FALSE(steps(3).has_value()) << "the final commit keeps failing";
  clock.advance(5000ms);
  auto r = steps(3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit, DriverExit::stopped);
  EXPECT_EQ(journal_for("s1").back(), "close s1 shutdown");
  EXPECT_EQ(member->ops().back(), "shutdown");
}

TEST_F(DriverTest, abort_commits_and_releases_nothing) {
  source->script("s1", lane(1000));
  member->push(grant("s1"));
  steps(3);
  driver->abort();
  clock.advance(1000ms);
  auto r = steps(3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit, DriverExit::aborted);
  EXPECT_EQ(member->ops(), (std::vector<std::string>{"abandon"}));
  EXPECT_EQ(journal_for("s1").back(), "close s1 aborted");
  EXPECT_TRUE(source->stop_of("s1").stop_requested());
}

TEST_F(DriverTest, a_new_tenancy_waits_until_the_old_lane_of_the_split_has_closed) {
  source->script("s1", lane(1000));
  member->push(grant("s1", 1));
  steps(3);
  clock.advance(1000ms);
  steps(1);  // commits watermark 3, then steps to 4
  ASSERT_EQ(member->calls("commit").size(), 1u);
  EXPECT_EQ(member->calls("commit")[0].progress.watermark, 3u);
  // The loss and a new grant of the same split arrive together; the new grant says 2 (a member
  // that names no epochs, or a custom CoordinatorApi, may issue it before our last commit landed:
  // the driver takes the higher of the two anyway).
  member->push(SplitLost{"s1", LossReason::starved});
  member->push(grant("s1", 2, 2));
  steps(2);
  auto j = journal_for("s1");
  auto close_it = std::find(j.begin(), j.end(), "close s1 lost");
  auto open_it = std::find(j.begin(), j.end(), "open s1@3");
  ASSERT_NE(close_it, j.end());
  ASSERT_NE(open_it, j.end()) << "resumes from the higher of the grant and our own commit";
  EXPECT_LT(close_it - j.begin(), open_it - j.begin()) << "never two lanes for one split";
  clock.advance(1000ms);
  steps(1);
  auto commits = member->calls("commit");
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_EQ(commits[0].epoch, 1u);
  EXPECT_EQ(commits[1].epoch, 2u) << "the new lane commits for the new tenancy";
}

TEST_F(DriverTest, a_revocation_of_a_split_without_a_lane_releases_it) {
  member->push(RevokeRequested{"s9", 10s, /*epoch=*/4});
  steps(1);
  EXPECT_EQ(member->ops(), (std::vector<std::string>{"release_drained"}));
  EXPECT_EQ(member->calls()[0].epoch, 4u) << "the release names the revoked tenancy";
}

TEST_F(DriverTest, a_revocation_of_an_earlier_tenancy_leaves_the_current_lane_alone) {
  source->script("s1", lane(1000));
  member->push(grant("s1", /*epoch=*/3));
  steps(2);
  member->push(RevokeRequested{"s1", 10s, /*epoch=*/2});
  steps(3);
  EXPECT_TRUE(member->calls("release_drained").empty());
  auto j = journal_for("s1");
  EXPECT_EQ(std::count(j.begin(), j.end(), "drain s1"), 0) << "epoch 3 was not revoked";
  member->push(RevokeRequested{"s1", 10s, /*epoch=*/3});
  steps(2);
  ASSERT_EQ(member->calls("release_drained").size(), 1u);
  EXPECT_EQ(member->calls("release_drained")[0].epoch, 3u);
}

TEST_F(DriverTest, quarantine_events_are_counted) {
  member->push(SplitQuarantined{"s1", 4});
  steps(1);
  EXPECT_EQ(driver->stats().quarantined, 1u);
}

TEST(DriverOptionsTest, invalid_options_are_named) {
  auto member = std::make_shared<ScriptedMember>();
  auto source = std::make_shared<ScriptedSource>();
  DriverOptions o;
  o.commit_interval = 0ms;
  try {
    Driver d(member, source, o);
    FAIL() << "accepted a zero commit interval";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("commit_interval"), std::string::npos);
  }
  o = {};
  o.poll_interval = 5000ms;
  EXPECT_THROW(Driver(member, source, o), ConfigError);
  EXPECT_THROW(Driver(nullptr, source), ConfigError);
  EXPECT_THROW(Driver(member, nullptr), ConfigError);
}

}  // namespace
}  // namespace etlc::testing
