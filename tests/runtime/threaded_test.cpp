// Thread mode: real control threads, real time, user threads committing concurrently. This is the
// test the thread sanitizer preset exercises.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "runtime/fleet.hpp"

namespace etlc::testing {
namespace {

TEST(Threaded, three_members_with_their_own_threads_complete_a_job_together) {
  auto planner = std::make_shared<TestPlanner>(make_splits(24, 10));
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::unique_ptr<Coordinator>> members;
  for (const char* id : {"t1", "t2", "t3"}) {
    CoordinatorConfig c;
    c.instance_id = id;
    c.lease_duration = 900ms;
    c.op_timeout = 100ms;
    c.rebalance_delay = 0ms;
    c.drain_deadline = 300ms;
    c.max_in_flight = 4;
    c.assignment_interval = 5ms;
    members.push_back(std::make_unique<Coordinator>(c, store, planner));
  }
  for (auto& m : members) m->start();

  std::atomic<int> completes{0};
  std::atomic<int> fatal{0};
  std::vector<std::thread> users;
  std::atomic<bool> done{false};
  for (auto& m : members) {
    users.emplace_back([&, coord = m.get()] {
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (!done && std::chrono::steady_clock::now() < deadline) {
        auto e = coord->wait_event(20ms);
        if (!e) continue;
        if (auto* g = std::get_if<SplitGranted>(&*e)) {
          std::uint64_t w = g->progress.watermark;
          for (int i = 0; i < 3; ++i) {
            if (coord->commit(g->spec.id, SplitProgress{++w, "s"}).status != CommitStatus::durable)
              break;
          }
          if (coord->complete(g->spec.id, SplitProgress{w + 1, "done"}).durable()) ++completes;
        } else if (auto* r = std::get_if<RevokeRequested>(&*e)) {
          coord->release_drained(r->split_id);
        } else if (std::holds_alternative<AllComplete>(*e)) {
          return;
        } else if (std::holds_alternative<Fatal>(*e)) {
          ++fatal;
          return;
        }
      }
    });
  }
  for (auto& t : users) t.join();
  done = true;
  EXPECT_EQ(fatal.load(), 0);
  EXPECT_GE(completes.load(), 24);
  auto plan = store->get(core::kPlanKey);
  ASSERT_TRUE(plan.has_value());
  auto rec = core::decode_plan(core::kPlanKey, plan->value);
  EXPECT_EQ(rec.verdict, core::Verdict::complete);
  EXPECT_EQ(rec.completed, 24u);
  for (auto& m : members) m->shutdown();
  EXPECT_EQ(store->list("member.").size(), 0u);  // every member left gracefully
}

}  // namespace
}  // namespace etlc::testing
