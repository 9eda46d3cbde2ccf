// A live job for end-to-end tests: Coordinators in thread mode (their own control threads, real
// time), each with a user thread that behaves like a well-mannered source: it commits progress
// when granted a split, drains cooperatively on revocation, and keeps its splits open (the job
// never completes by itself, so operators have something to look at). Splits named in `poison`
// are failed whenever granted.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "etlc/coordinator.hpp"
#include "etlc/metrics.hpp"
#include "runtime/fleet.hpp"

namespace etlc::testing {

struct LiveMember {
  std::unique_ptr<Coordinator> coord;
  std::thread user;
  std::atomic<int> granted{0};
  std::atomic<int> revoked{0};
  std::atomic<int> lost{0};
  std::atomic<int> fatal{0};
};

class LiveJob {
 public:
  using StoreFactory = std::function<std::shared_ptr<KvStore>()>;

  static CoordinatorConfig config(const std::string& id) {
    CoordinatorConfig c;
    c.instance_id = id;
    c.lease_duration = std::chrono::milliseconds(1500);
    c.op_timeout = std::chrono::milliseconds(300);
    c.rebalance_delay = std::chrono::milliseconds(0);
    c.drain_deadline = std::chrono::milliseconds(3000);
    c.max_in_flight = 4;
    c.max_attempts = 3;
    c.assignment_interval = std::chrono::milliseconds(10);
    return c;
  }

  LiveJob(std::vector<std::string> ids, std::size_t splits, StoreFactory stores,
          std::shared_ptr<MetricsRegistry> metrics = nullptr)
      : planner_(std::make_shared<TestPlanner>(make_splits(splits, 10))), metrics_(metrics) {
    for (const auto& id : ids) {
      auto m = std::make_unique<LiveMember>();
      m->coord = std::make_unique<Coordinator>(config(id), stores(), planner_,
                                               SystemClock::instance(), metrics_);
      members_.push_back(std::move(m));
    }
    for (auto& m : members_) m->coord->start();
    for (auto& m : members_) {
      LiveMember* lm = m.get();
      lm->user = std::thread([this, lm] { serve(*lm); });
    }
  }

  ~LiveJob() {
    stop_ = true;
    for (auto& m : members_) {
      if (m->user.joinable()) m->user.join();
    }
    for (auto& m : members_) m->coord->shutdown();
  }

  LiveMember& member(const std::string& id) {
    for (auto& m : members_) {
      if (m->coord->instance_id() == id) return *m;
    }
    throw std::runtime_error("no member " + id);
  }
  std::vector<LiveMember*> members() {
    std::vector<LiveMember*> out;
    for (auto& m : members_) out.push_back(m.get());
    return out;
  }
  std::string leader() {
    for (auto& m : members_) {
      if (m->coord->is_leader()) return m->coord->instance_id();
    }
    return {};
  }
  std::size_t held_total() {
    std::size_t n = 0;
    for (auto& m : members_) n += m->coord->held_splits().size();
    return n;
  }
  void set_poison(std::set<std::string> ids) {
    std::lock_guard lk(mu_);
    poison_ = std::move(ids);
  }

 private:
  void serve(LiveMember& m) {
    Coordinator& c = *m.coord;
    std::map<std::string, SplitProgress> lanes;
    while (!stop_) {
      auto e = c.wait_event(std::chrono::milliseconds(20));
      if (!e) continue;
      if (auto* g = std::get_if<SplitGranted>(&*e)) {
        ++m.granted;
        bool poisoned;
        {
          std::lock_guard lk(mu_);
          poisoned = poison_.count(g->spec.id) > 0;
        }
        if (poisoned) {
          c.fail(g->spec.id, "poison record");
          continue;
        }
        SplitProgress p{std::max<std::uint64_t>(g->progress.watermark, 100), "lane"};
        if (c.commit(g->spec.id, p).durable()) lanes[g->spec.id] = p;
      } else if (auto* r = std::get_if<RevokeRequested>(&*e)) {
        ++m.revoked;
        if (auto it = lanes.find(r->split_id); it != lanes.end()) c.commit(r->split_id, it->second);
        c.release_drained(r->split_id);
        lanes.erase(r->split_id);
      } else if (auto* l = std::get_if<SplitLost>(&*e)) {
        ++m.lost;
        lanes.erase(l->split_id);
      } else if (std::holds_alternative<Fatal>(*e)) {
        ++m.fatal;
        return;
      }
    }
  }

  std::shared_ptr<TestPlanner> planner_;
  std::shared_ptr<MetricsRegistry> metrics_;
  std::vector<std::unique_ptr<LiveMember>> members_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::set<std::string> poison_;
};

// Polls `cond` every 20 ms until it holds or `timeout` passes; returns the last result.
inline bool wait_for(const std::function<bool()>& cond,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

}  // namespace etlc::testing
