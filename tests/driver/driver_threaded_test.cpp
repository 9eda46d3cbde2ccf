// The Driver in thread mode: run() with its worker pool, against the scripted member, and
// against real Coordinators on a shared MemoryStore (a small fleet in one process, one member
// crashing). Outcomes are asserted, never timings; every wait is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "driver/scripted.hpp"
#include "etlc/driver.hpp"
#include "etlc/memory_store.hpp"

namespace etlc::testing {
namespace {

using namespace std::chrono_literals;

template <typename F>
bool eventually(F&& cond, std::chrono::milliseconds limit = 20s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

TEST(DriverThreadedTest, the_pool_never_steps_more_lanes_at_once_than_it_has_workers) {
  auto member = std::make_shared<ScriptedMember>(/*max_in_flight=*/2);
  auto source = std::make_shared<ScriptedSource>();
  for (int i = 0; i < 6; ++i) {
    source->script("s" + std::to_string(i), lane(20).slow(1ms));
  }
  DriverOptions o;
  o.commit_interval = 5ms;
  Driver driver(member, source, o);
  auto done = std::async(std::launch::async, [&] { return driver.run(); });
  for (int i = 0; i < 6; ++i) member->push(grant("s" + std::to_string(i)));
  ASSERT_TRUE(eventually([&] { return member->calls("complete").size() == 6; }));
  member->push(AllComplete{6});
  ASSERT_EQ(done.wait_for(20s), std::future_status::ready);
  DriverResult r = done.get();
  EXPECT_EQ(r.exit, DriverExit::completed);
  EXPECT_TRUE(member->started());
  EXPECT_LE(source->max_concurrent_steps(), 2);
  EXPECT_GE(source->max_concurrent_steps(), 1);
  for (const auto& c : member->calls("complete")) EXPECT_EQ(c.progress.watermark, 20u);
  EXPECT_EQ(driver.stats().completed, 6u);
  EXPECT_EQ(driver.stats().lanes_open, 0u);
}

TEST(DriverThreadedTest, a_stop_request_from_another_thread_drains_and_returns) {
  auto member = std::make_shared<ScriptedMember>(2);
  auto source = std::make_shared<ScriptedSource>();
  source->script("a", lane(1'000'000).slow(1ms));
  Driver driver(member, source);
  auto done = std::async(std::launch::async, [&] { return driver.run(); });
  member->push(grant("a"));
  ASSERT_TRUE(eventually([&] { return source->count("step a") >= 3; }));
  driver.request_stop();
  ASSERT_EQ(done.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(done.get().exit, DriverExit::stopped);
  auto commits = member->calls("commit");
  ASSERT_FALSE(commits.empty());
  EXPECT_GE(commits.back().progress.watermark, 3u);
  EXPECT_EQ(member->ops().back(), "shutdown");
  EXPECT_EQ(source->journal().back(), "close a shutdown");
}

TEST(DriverThreadedTest, a_member_that_cannot_start_ends_the_run_as_fatal) {
  struct Failing : ScriptedMember {
    void start() override { throw StoreError(StoreErrc::unavailable, "no store here"); }
  };
  auto member = std::make_shared<Failing>();
  Driver driver(member, std::make_shared<ScriptedSource>());
  DriverResult r = driver.run();
  EXPECT_EQ(r.exit, DriverExit::fatal);
  EXPECT_NE(r.message.find("no store here"), std::string::npos);
  EXPECT_THROW(driver.run(), UsageError);
}

// --- a real fleet -------------------------------------------------------------------------------

// Splits are ranges of integers "begin-end"; lanes hand one integer per step to a shared sink.
class RangePlanner final : public Planner {
 public:
  explicit RangePlanner(int splits) : splits_(splits) {}
  std::string fingerprint() const override { return "ranges-" + std::to_string(splits_); }
  Plan plan(const PlanContext&) override {
    Plan p;
    for (int i = 0; i < splits_; ++i) {
      p.splits.push_back(
          {SplitSpec{"r" + std::to_string(i),
                     std::to_string(i * 100) + "-" + std::to_string(i * 100 + 100), 100},
           std::nullopt});
    }
    return p;
  }

 private:
  int splits_;
};

struct Sink {
  std::mutex mu;
  std::multiset<int> seen;
};

class RangeSource final : public SplitSource {
 public:
  explicit RangeSource(Sink& sink) : sink_(sink) {}
  std::unique_ptr<Lane> open(const LaneContext& ctx) override {
    const auto dash = ctx.spec.descriptor.find('-');
    const int begin = std::stoi(ctx.spec.descriptor.substr(0, dash));
    const int end = std::stoi(ctx.spec.descriptor.substr(dash + 1));
    return std::make_unique<RangeLane>(sink_, begin + static_cast<int>(ctx.resume.watermark), begin,
                                       end);
  }

 private:
  class RangeLane final : public Lane {
   public:
    RangeLane(Sink& sink, int next, int begin, int end)
        : sink_(sink), next_(next), begin_(begin), end_(end) {}
    StepResult step() override {
      std::this_thread::sleep_for(2ms);  // slow enough for a crash to land mid-job
      std::lock_guard lk(sink_.mu);
      if (next_ < end_) sink_.seen.insert(next_++);
      return next_ >= end_ ? StepResult::end() : StepResult::more();
    }
    SplitProgress durable_progress() override {
      return {static_cast<std::uint64_t>(next_ - begin_), {}};
    }

   private:
    Sink& sink_;
    int next_, begin_, end_;
  };
  Sink& sink_;
};

CoordinatorConfig fleet_config(const std::string& id) {
  CoordinatorConfig c;
  c.instance_id = id;
  c.lease_duration = 900ms;
  c.op_timeout = 300ms;
  c.rebalance_delay = 0ms;
  c.drain_deadline = 2000ms;
  c.max_in_flight = 2;
  c.assignment_interval = 10ms;
  return c;
}

TEST(DriverFleetTest, three_drivers_complete_a_job_and_one_crash_loses_nothing) {
  auto store = std::make_shared<MemoryStore>();
  auto planner = std::make_shared<RangePlanner>(12);
  Sink sink;
  auto source = std::make_shared<RangeSource>(sink);
  DriverOptions o;
  o.commit_interval = 20ms;
  std::vector<std::unique_ptr<Driver>> drivers;
  for (const char* id : {"m0", "m1", "m2"}) {
    drivers.push_back(std::make_unique<Driver>(fleet_config(id), store, planner, source, o));
  }
  std::vector<std::future<DriverResult>> runs;
  for (auto& d : drivers) {
    runs.push_back(std::async(std::launch::async, [&d] { return d->run(); }));
  }
  // Crash m1 once it has done some work (but, with 12 splits of 100 steps of 2 ms, far from all).
  ASSERT_TRUE(eventually(
      [&] { return drivers[1]->stats().commits >= 2 && drivers[1]->stats().lanes_open > 0; }));
  drivers[1]->abort();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    ASSERT_EQ(runs[i].wait_for(30s), std::future_status::ready) << "member " << i;
  }
  EXPECT_EQ(runs[1].get().exit, DriverExit::aborted);
  EXPECT_EQ(runs[0].get().exit, DriverExit::completed);
  EXPECT_EQ(runs[2].get().exit, DriverExit::completed);
  {
    std::lock_guard lk(sink.mu);
    for (int i = 0; i < 1200; ++i) EXPECT_GE(sink.seen.count(i), 1u) << "integer " << i;
  }
  for (int i = 0; i < 12; ++i) {
    const std::string key = core::split_key("r" + std::to_string(i));
    auto e = store->get(key);
    ASSERT_TRUE(e.has_value());
    auto rec = core::decode_split(key, e->value);
    EXPECT_EQ(rec.status, core::SplitStatus::completed) << key;
    EXPECT_EQ(rec.progress.watermark, 100u) << key;
  }
  EXPECT_GE(drivers[0]->stats().completed + drivers[2]->stats().completed, 1u);
}

}  // namespace
}  // namespace etlc::testing
