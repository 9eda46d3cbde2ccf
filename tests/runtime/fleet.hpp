// A deterministic test fleet: several Coordinators in manual mode on one MemoryStore, each behind
// its own FaultInjectingStore, on one ManualClock. No threads, no sleeps.
//
// run_until() steps every running member at the current instant until a whole round changes
// nothing (no store write, no event), then moves the clock to the earliest time any member asked
// to be stepped again. Each member has a Lane policy that answers its events like a well-behaved
// (or deliberately misbehaving) SplitSource would.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/clock.hpp"
#include "etlc/coordinator.hpp"
#include "etlc/fault_injecting_store.hpp"
#include "etlc/kv_store_wrapper.hpp"
#include "etlc/memory_store.hpp"
#include "etlc/metrics.hpp"
#include "runtime/coordinator_access.hpp"
#include "runtime/member.hpp"

namespace etlc::testing {

using namespace std::chrono_literals;

class TestPlanner : public Planner {
 public:
  explicit TestPlanner(std::vector<SplitSpec> splits, std::string fingerprint = "test-job",
                       PlanFinality finality = PlanFinality::final)
      : splits_(std::move(splits)), fingerprint_(std::move(fingerprint)), finality_(finality) {}

  std::string fingerprint() const override { return fingerprint_; }
  Plan plan(const PlanContext&) override {
    ++calls;
    if (fail_next > 0) {
      --fail_next;
      throw std::runtime_error("planner failure injected by the test");
    }
    Plan p;
    p.finality = finality_;
    for (const auto& s : splits_) p.splits.push_back(PlannedSplit{s, std::nullopt});
    return p;
  }
  void set_splits(std::vector<SplitSpec> s) { splits_ = std::move(s); }

  int calls = 0;
  int fail_next = 0;

 private:
  std::vector<SplitSpec> splits_;
  std::string fingerprint_;
  PlanFinality finality_;
};

inline std::vector<SplitSpec> make_splits(std::size_t n, std::uint64_t weight = 1,
                                          const std::string& prefix = "s") {
  std::vector<SplitSpec> out;
  for (std::size_t i = 0; i < n; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%03zu", prefix.c_str(), i);
    out.push_back(SplitSpec{buf, "descriptor-" + std::string(buf), weight});
  }
  return out;
}

// How a node's user code answers events.
struct LanePolicy {
  bool drain_cooperatively = true;  // on RevokeRequested: commit then release_drained
  bool decline = false;             // on RevokeRequested: decline_revoke
  bool wedge = false;               // on RevokeRequested: do nothing (a wedged drain)
};

struct Node {
  std::string id;
  std::shared_ptr<FaultInjectingStore> store;
  std::unique_ptr<Coordinator> coord;
  LanePolicy policy;
  bool running = true;   // stepped by the fleet
  bool crashed = false;  // abandoned
  Clock::time_point next_due{};
  std::vector<Event> events;                   // every event seen, in order
  std::map<std::string, SplitProgress> lanes;  // open lanes: split -> progress emitted so far
  std::set<std::string> ever_granted;

  runtime::Member& member() { return runtime::member_of(*coord); }
  std::set<std::string> held() const {
    auto v = coord->held_splits();
    return {v.begin(), v.end()};
  }
  template <typename T>
  std::size_t count() const {
    return static_cast<std::size_t>(std::count_if(
        events.begin(), events.end(), [](const Event& e) { return std::holds_alternative<T>(e); }));
  }
  template <typename T>
  std::vector<T> all() const {
    std::vector<T> out;
    for (const auto& e : events) {
      if (auto* p = std::get_if<T>(&e)) out.push_back(*p);
    }
    return out;
  }
};

class Fleet {
 public:
  explicit Fleet(std::shared_ptr<TestPlanner> planner) : planner_(std::move(planner)) {}

  // If set, add() puts the store a member uses behind this decorator (above its
  // FaultInjectingStore).
  std::function<std::shared_ptr<KvStore>(const std::string& id, std::shared_ptr<KvStore>)>
      wrap_store;

  static CoordinatorConfig default_config(const std::string& id) {
    CoordinatorConfig c;
    c.instance_id = id;
    c.lease_duration = 3000ms;
    c.op_timeout = 500ms;
    c.rebalance_delay = 2000ms;
    c.drain_deadline = 1000ms;
    c.max_in_flight = 8;
    c.max_attempts = 3;
    c.assignment_interval = 0ms;
    return c;
  }

  Node& add(const std::string& id, std::function<void(CoordinatorConfig&)> tweak = {},
            std::shared_ptr<Planner> planner = nullptr) {
    CoordinatorConfig c = default_config(id);
    if (tweak) tweak(c);
    auto node = std::make_unique<Node>();
    node->id = id;
    node->store = std::make_shared<FaultInjectingStore>(mem);
    std::shared_ptr<KvStore> store = node->store;
    if (wrap_store) store = wrap_store(id, store);
    node->coord =
        std::make_unique<Coordinator>(c, store, planner ? planner : planner_, clock, metrics);
    node->next_due = clock.now();
    nodes_.push_back(std::move(node));
    return *nodes_.back();
  }

  Node& node(const std::string& id) {
    for (auto& n : nodes_) {
      if (n->id == id && !n->crashed) return *n;
    }
    throw std::runtime_error("no such node " + id);
  }
  std::vector<Node*> live() {
    std::vector<Node*> out;
    for (auto& n : nodes_) {
      if (!n->crashed) out.push_back(n.get());
    }
    return out;
  }

  // Crash: the process dies, nothing is released.
  void crash(const std::string& id) {
    Node& n = node(id);
    n.coord->abandon();
    n.crashed = true;
    n.running = false;
  }

  // One round at the current instant; returns true if anything happened.
  bool round() {
    const auto rev_before = mem->last_revision();
    bool progressed = false;
    for (auto& n : nodes_) {
      if (!n->running) continue;
      if (n->next_due <= clock.now() || pending_wake_) n->next_due = n->coord->step();
      progressed |= handle_events(*n);
    }
    pending_wake_ = false;
    return progressed || mem->last_revision() != rev_before;
  }

  // Steps until `done` holds or `max_virtual` of virtual time passes. Returns whether done held.
  bool run_until(const std::function<bool()>& done, Clock::duration max_virtual = 60s) {
    const auto deadline = clock.now() + max_virtual;
    for (int guard = 0; guard < 200000; ++guard) {
      if (done()) return true;
      pending_wake_ = true;  // watch events may be pending for everyone
      bool busy = false;
      for (int r = 0; r < 50 && (r == 0 || busy); ++r) {
        busy = round();
        pending_wake_ = busy;
        if (done()) return true;
      }
      // Quiescent at this instant: jump to the next due time.
      Clock::time_point next = deadline;
      for (auto& n : nodes_) {
        if (n->running) next = std::min(next, n->next_due);
      }
      if (next <= clock.now()) next = clock.now() + 1ms;
      if (next > deadline) {
        clock.advance_to(deadline);
        round();
        return done();
      }
      clock.advance_to(next);
    }
    return done();
  }

  // Runs for exactly `d` of virtual time.
  // (run_until with a condition that never holds ends at its deadline, exactly.)
  void run_for(Clock::duration d) {
    run_until([] { return false; }, d);
  }

  // Every live member holds exactly its published assignment, and the leader has nothing to do.
  bool converged() {
    Node* leader = nullptr;
    for (Node* n : live()) {
      if (n->running && n->coord->is_leader()) leader = n;
    }
    if (leader == nullptr) return false;
    auto plan = plan_record();
    if (!plan || !plan->planned) return false;
    auto published = leader->member().published_assignment();
    for (Node* n : live()) {
      if (!n->running) continue;
      auto a = n->member().assignment();
      if (!a) return false;
      auto it = published.find(n->id);
      if (it == published.end() || it->second != *a) return false;
      std::set<std::string> want(a->begin(), a->end());
      if (n->held() != want) return false;
    }
    return true;
  }

  core::SplitRecord split_record(const std::string& id) {
    auto e = mem->get(core::split_key(id));
    if (!e) throw std::runtime_error("no split record " + id);
    return core::decode_split(core::split_key(id), e->value);
  }
  std::optional<core::PlanRecord> plan_record() {
    auto e = mem->get(core::kPlanKey);
    if (!e) return std::nullopt;
    return core::decode_plan(core::kPlanKey, e->value);
  }
  std::string leader_id() {
    for (Node* n : live()) {
      if (n->running && n->coord->is_leader()) return n->id;
    }
    return {};
  }

  ManualClock clock;
  std::shared_ptr<MemoryStore> mem = std::make_shared<MemoryStore>();
  std::shared_ptr<MetricsRegistry> metrics = std::make_shared<MetricsRegistry>();
  // Watermark each lane commits per "tick" of work in tests that simulate processing.
  std::uint64_t work_per_commit = 10;

 private:
  bool handle_events(Node& n) {
    bool any = false;
    while (auto e = n.coord->poll()) {
      any = true;
      n.events.push_back(*e);
      if (auto* g = std::get_if<SplitGranted>(&*e)) {
        n.lanes[g->spec.id] = g->progress;
        n.ever_granted.insert(g->spec.id);
      } else if (auto* r = std::get_if<RevokeRequested>(&*e)) {
        if (n.policy.wedge) continue;
        if (n.policy.decline) {
          n.coord->decline_revoke(r->split_id);
        } else if (n.policy.drain_cooperatively) {
          auto it = n.lanes.find(r->split_id);
          if (it != n.lanes.end()) n.coord->commit(r->split_id, it->second);
          n.coord->release_drained(r->split_id);
          n.lanes.erase(r->split_id);
        }
      } else if (auto* l = std::get_if<SplitLost>(&*e)) {
        n.lanes.erase(l->split_id);
      }
    }
    return any;
  }

  std::shared_ptr<TestPlanner> planner_;
  std::vector<std::unique_ptr<Node>> nodes_;
  bool pending_wake_ = true;
};

}  // namespace etlc::testing
