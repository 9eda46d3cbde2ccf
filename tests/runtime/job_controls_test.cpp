// Issue 19's runtime controls, in manual mode on virtual time: the operator's pause (job.pause),
// the bounded planner-failure policy, and (thread mode) the start-up wait for the store.
#include <gtest/gtest.h>

#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

void pause_job(MemoryStore& store, const std::string& reason) {
  ASSERT_TRUE(store.create(core::kPauseKey, core::encode(core::PauseRecord{reason, "test", 1})).ok);
}

void resume_job(MemoryStore& store) {
  auto e = store.get(core::kPauseKey);
  ASSERT_TRUE(e.has_value());
  ASSERT_TRUE(store.erase(core::kPauseKey, e->revision).ok);
}

std::size_t held_total(Fleet& f) {
  std::size_t n = 0;
  for (Node* node : f.live()) n += node->held().size();
  return n;
}

std::size_t leases(MemoryStore& store) {
  return store.list(core::kLeasePrefix).size();
}

TEST(JobControls, a_paused_job_is_drained_and_released_then_resumes_from_committed_progress) {
  Fleet f(std::make_shared<TestPlanner>(make_splits(12, 10)));
  f.add("a");
  f.add("b");
  ASSERT_TRUE(f.run_until([&] { return f.converged() && held_total(f) == 12; }));
  // Commit progress on every held split, so the resume can be checked against it.
  for (Node* n : f.live()) {
    for (const std::string& id : n->held()) {
      ASSERT_TRUE(n->coord->commit(id, SplitProgress{42, "st"}).durable());
      n->lanes[id] = SplitProgress{42, "st"};
    }
  }

  pause_job(*f.mem, "maintenance");
  ASSERT_TRUE(f.run_until([&] { return held_total(f) == 0 && leases(*f.mem) == 0; }))
      << "a paused job must be drained and every split released";
  for (Node* n : f.live()) {
    EXPECT_EQ(n->count<SplitLost>(), 0u) << n->id << ": the drain is cooperative, not forced";
    EXPECT_GT(n->count<RevokeRequested>(), 0u) << n->id;
  }
  f.run_for(10s);
  EXPECT_EQ(held_total(f), 0u) << "nothing is claimed while paused";
  for (const auto& s : make_splits(12)) {
    const auto rec = f.split_record(s.id);
    EXPECT_EQ(rec.attempts, 0u) << s.id << ": a pause consumes no delivery attempt";
    EXPECT_FALSE(rec.owner.has_value()) << s.id;
  }

  std::map<std::string, std::size_t> grants_before;
  for (Node* n : f.live()) grants_before[n->id] = n->all<SplitGranted>().size();
  resume_job(*f.mem);
  ASSERT_TRUE(f.run_until([&] { return f.converged() && held_total(f) == 12; }));
  std::size_t resumed = 0, regranted = 0;
  for (Node* n : f.live()) {
    const auto grants = n->all<SplitGranted>();
    for (std::size_t i = grants_before[n->id]; i < grants.size(); ++i) {
      ++regranted;
      if (grants[i].progress.watermark == 42 && grants[i].progress.state == "st") ++resumed;
    }
  }
  EXPECT_EQ(regranted, 12u);
  EXPECT_EQ(resumed, 12u) << "every split resumes from the progress committed before the pause";
}

TEST(JobControls, an_unreadable_pause_record_counts_as_absent) {
  Fleet f(std::make_shared<TestPlanner>(make_splits(4, 10)));
  f.add("a");
  ASSERT_TRUE(f.mem->create(core::kPauseKey, "garbage").ok);
  ASSERT_TRUE(f.run_until([&] { return f.converged() && held_total(f) == 4; }))
      << "garbage under job.pause must not stop the job";
}

TEST(JobControls, a_planner_failing_max_planner_failures_times_ends_the_job_failed) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  planner->fail_next = 1'000'000;
  Fleet f(planner);
  auto tweak = [](CoordinatorConfig& c) { c.max_planner_failures = 3; };
  f.add("a", tweak);
  f.add("b", tweak);
  auto stalled = [&](Node& n) { return n.count<Stalled>() == 1; };
  ASSERT_TRUE(f.run_until([&] { return stalled(f.node("a")) && stalled(f.node("b")); }, 120s));
  EXPECT_EQ(planner->calls, 3) << "the leader stops calling the planner once it gave up";
  const auto plan = f.plan_record();
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->verdict, core::Verdict::failed);
  ASSERT_TRUE(plan->message.has_value());
  EXPECT_NE(plan->message->find("planner failure injected by the test"), std::string::npos)
      << *plan->message;
  EXPECT_NE(plan->message->find("3 times"), std::string::npos) << *plan->message;
  for (const char* id : {"a", "b"}) {
    const Stalled s = f.node(id).all<Stalled>().front();
    EXPECT_EQ(s.message, *plan->message) << id << " reports the planner's message";
  }
  f.run_for(60s);
  EXPECT_EQ(planner->calls, 3) << "the verdict is sticky";

  // An operator clears the verdict (what `etlc resume` does): the leader plans again.
  planner->fail_next = 0;
  auto e = f.mem->get(core::kPlanKey);
  auto rec = core::decode_plan(core::kPlanKey, e->value);
  rec.verdict = core::Verdict::running;
  rec.message.reset();
  ASSERT_TRUE(f.mem->update(core::kPlanKey, core::encode(rec), e->revision).ok);
  ASSERT_TRUE(f.run_until([&] { return f.converged() && held_total(f) == 4; }));
  EXPECT_EQ(planner->calls, 4);
}

TEST(JobControls, a_planner_that_recovers_before_the_limit_resets_the_count) {
  auto planner = std::make_shared<TestPlanner>(make_splits(4, 10));
  planner->fail_next = 2;
  Fleet f(planner);
  f.add("a", [](CoordinatorConfig& c) { c.max_planner_failures = 3; });
  ASSERT_TRUE(f.run_until([&] { return f.converged() && held_total(f) == 4; }, 120s));
  EXPECT_EQ(f.plan_record()->verdict, core::Verdict::running);
  EXPECT_EQ(f.node("a").count<Stalled>(), 0u);
}

TEST(JobControls, max_planner_failures_and_startup_wait_are_validated) {
  CoordinatorConfig c;
  c.max_planner_failures = 0;
  EXPECT_THROW(c.validate(), ConfigError);
  c.max_planner_failures = 1001;
  EXPECT_THROW(c.validate(), ConfigError);
  c.max_planner_failures = 10;
  c.startup_wait = std::chrono::milliseconds(-1);
  EXPECT_THROW(c.validate(), ConfigError);
  c.startup_wait = std::chrono::hours(2);
  EXPECT_THROW(c.validate(), ConfigError);
  c.startup_wait = std::chrono::milliseconds(0);
  EXPECT_NO_THROW(c.validate());
}

// Thread mode: start() retries the join while the store is unavailable.
TEST(JobControls, start_waits_for_a_store_that_is_not_reachable_yet) {
  auto mem = std::make_shared<MemoryStore>();
  auto faulty = std::make_shared<FaultInjectingStore>(mem);
  faulty->fail_next(3, StoreErrc::unavailable);
  CoordinatorConfig c;
  c.instance_id = "late";
  c.startup_wait = 30s;
  Coordinator member(c, faulty, std::make_shared<TestPlanner>(make_splits(1)));
  EXPECT_NO_THROW(member.start());
  EXPECT_TRUE(mem->get(core::member_key("late")).has_value()) << "the session was opened";
  member.shutdown();
}

TEST(JobControls, start_gives_up_after_startup_wait) {
  auto mem = std::make_shared<MemoryStore>();
  auto faulty = std::make_shared<FaultInjectingStore>(mem);
  faulty->fail_next(1'000'000, StoreErrc::unavailable);
  CoordinatorConfig c;
  c.instance_id = "never";
  c.startup_wait = 600ms;
  Coordinator member(c, faulty, std::make_shared<TestPlanner>(make_splits(1)));
  try {
    member.start();
    FAIL() << "joined an unavailable store";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::unavailable);
    EXPECT_NE(std::string(e.what()).find("startup_wait is 600 ms"), std::string::npos) << e.what();
  }
}

TEST(JobControls, a_zero_startup_wait_fails_on_the_first_attempt) {
  auto faulty = std::make_shared<FaultInjectingStore>(std::make_shared<MemoryStore>());
  faulty->fail_next(1, StoreErrc::unavailable);
  CoordinatorConfig c;
  c.instance_id = "once";
  c.startup_wait = 0ms;
  Coordinator member(c, faulty, std::make_shared<TestPlanner>(make_splits(1)));
  EXPECT_THROW(member.start(), StoreError);
}

}  // namespace
}  // namespace etlc::testing
