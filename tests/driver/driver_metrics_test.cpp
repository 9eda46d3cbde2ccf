// The Driver's counters on the metrics registry (etl_coordination_driver_*_total): they move with
// DriverStats in a scripted run, and they land on the registry the member reports into.
#include <gtest/gtest.h>

#include <chrono>

#include "driver/scripted.hpp"
#include "etlc/clock.hpp"
#include "etlc/driver.hpp"
#include "etlc/memory_store.hpp"
#include "etlc/metrics.hpp"

namespace etlc::testing {
namespace {

using namespace std::chrono_literals;

std::uint64_t driver_counter(const MetricsRegistry& r, const std::string& name,
                             const std::string& instance) {
  auto v =
      r.snapshot().counter("etl_coordination_driver_" + name + "_total", {{"instance", instance}});
  EXPECT_TRUE(v.has_value()) << name << " is not registered for " << instance;
  return v.value_or(~std::uint64_t{0});
}

TEST(DriverMetrics, counters_follow_the_lanes_a_scripted_run_opens_steps_commits_drains_and_loses) {
  ManualClock clock;
  auto member = std::make_shared<ScriptedMember>(4);
  auto source = std::make_shared<ScriptedSource>();
  auto registry = std::make_shared<MetricsRegistry>();
  DriverOptions o;
  o.commit_interval = 1000ms;
  Driver driver(member, source, o, clock, registry);
  auto step = [&](int n) {
    for (int i = 0; i < n; ++i) driver.step();
  };
  const std::string me = "scripted-member";
  EXPECT_EQ(driver_counter(*registry, "lanes_opened", me), 0u) << "registered before any lane";

  source->script("drained", lane(1000));
  source->script("declined", lane(1000).declining());
  source->script("lost", lane(1000));
  member->push(grant("drained"));
  member->push(grant("declined"));
  member->push(grant("lost"));
  step(3);
  clock.advance(1000ms);
  step(1);  // a commit of each running lane
  member->push(RevokeRequested{"drained", 10s, 1});
  member->push(RevokeRequested{"declined", 10s, 1});
  member->push(SplitLost{"lost", LossReason::fenced});
  step(3);

  const DriverStats st = driver.stats();
  EXPECT_EQ(st.lanes_opened, 3u);
  EXPECT_EQ(st.drained, 1u);
  EXPECT_EQ(st.declined, 1u);
  EXPECT_EQ(st.lost, 2u) << "the fenced lane and the declined one";
  EXPECT_EQ(st.steps, source->count("step drained") + source->count("step declined") +
                          source->count("step lost"));
  EXPECT_GE(st.commits, 4u) << "three interval commits and the drained lane's final one";
  EXPECT_EQ(driver_counter(*registry, "lanes_opened", me), st.lanes_opened);
  EXPECT_EQ(driver_counter(*registry, "steps", me), st.steps);
  EXPECT_EQ(driver_counter(*registry, "commits", me), st.commits);
  EXPECT_EQ(driver_counter(*registry, "drains", me), st.drained);
  EXPECT_EQ(driver_counter(*registry, "declines", me), st.declined);
  EXPECT_EQ(driver_counter(*registry, "losses", me), st.lost);
  EXPECT_NE(
      registry->render_prometheus().find("# TYPE etl_coordination_driver_steps_total counter"),
      std::string::npos);
}

class OneSplitPlanner final : public Planner {
 public:
  std::string fingerprint() const override { return "driver-metrics-test"; }
  Plan plan(const PlanContext&) override {
    Plan p;
    p.splits.push_back({SplitSpec{"s1", "d", 1}, std::nullopt});
    return p;
  }
};

TEST(DriverMetrics, a_coordinator_member_lends_the_driver_its_registry) {
  CoordinatorConfig c;
  c.instance_id = "m1";
  auto store = std::make_shared<MemoryStore>();
  auto planner = std::make_shared<OneSplitPlanner>();
  auto source = std::make_shared<ScriptedSource>();

  auto registry = std::make_shared<MetricsRegistry>();
  auto coordinator =
      std::make_shared<Coordinator>(c, store, planner, SystemClock::instance(), registry);
  Driver given(coordinator, source);
  EXPECT_EQ(driver_counter(*registry, "steps", "m1"), 0u);

  c.instance_id = "m2";  // built by the driver, with no registry: the Coordinator's private one
  Driver built(c, store, planner, source);
  ASSERT_NE(built.coordinator(), nullptr);
  EXPECT_EQ(driver_counter(built.coordinator()->metrics(), "losses", "m2"), 0u);
  EXPECT_FALSE(registry->snapshot()
                   .counter("etl_coordination_driver_losses_total", {{"instance", "m2"}})
                   .has_value());
}

}  // namespace
}  // namespace etlc::testing
