// Workers watch their own keys (docs/decisions/0009-workers-watch-their-own-keys.md): a worker's
// watch traffic does not grow with the fleet, the standby keeps warm views and leads at once when
// the leader dies, and a dead standby is replaced.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "etlc/kv_store_wrapper.hpp"
#include "fleet.hpp"

namespace etlc::testing {
namespace {

// Adds a member that watches its own keys (Member::Options::targeted_watches, the default).
Node& add_targeted(Fleet& fleet, const std::string& id) {
  Node& n = fleet.add(id);
  n.member().set_targeted_watches(true);
  return n;
}

std::uint64_t watch_events(Fleet& fleet, const std::string& id) {
  return fleet.metrics->snapshot()
      .counter("etl_coordination_watch_events_total", {{"instance", id}})
      .value_or(0);
}

std::optional<core::StandbyRecord> standby(Fleet& fleet) {
  auto e = fleet.mem->get(core::kStandbyKey);
  if (!e) return std::nullopt;
  return core::decode_standby(core::kStandbyKey, e->value);
}

// Steady state for `window` after convergence: the most watch events any plain worker (neither
// leader nor standby) received.
std::uint64_t busiest_worker(std::size_t members, Clock::duration window, bool targeted) {
  // Splits that never end (a watermark far away) keep the fleet in steady state.
  auto planner = std::make_shared<TestPlanner>(make_splits(4 * members, 1'000'000));
  Fleet fleet(planner);
  for (std::size_t i = 0; i < members; ++i) {
    Node& n = fleet.add(fmt::format("m{:02}", i));
    n.member().set_targeted_watches(targeted);
  }
  EXPECT_TRUE(
      fleet.run_until([&] { return fleet.converged() && (!targeted || standby(fleet)); }, 60s));
  std::map<std::string, std::uint64_t> before;
  for (Node* n : fleet.live()) before[n->id] = watch_events(fleet, n->id);
  fleet.run_for(window);
  const std::string leader = fleet.leader_id();
  const auto sb = standby(fleet);
  std::uint64_t busiest = 0;
  for (Node* n : fleet.live()) {
    if (n->id == leader || (sb && sb->owner == n->id)) continue;
    busiest = std::max(busiest, watch_events(fleet, n->id) - before[n->id]);
  }
  return busiest;
}

TEST(TargetedWatches, a_workers_watch_traffic_does_not_grow_with_the_fleet) {
  const Clock::duration window = 30s;  // ten leases of 3 s
  const std::uint64_t small = busiest_worker(4, window, true);
  const std::uint64_t large = busiest_worker(16, window, true);
  const std::uint64_t wide_small = busiest_worker(4, window, false);
  const std::uint64_t wide_large = busiest_worker(16, window, false);
  std::printf(
      "busiest plain worker over 30 s: targeted %llu events at 4 members, %llu at 16; "
      "fleet-wide %llu at 4, %llu at 16\n",
      static_cast<unsigned long long>(small), static_cast<unsigned long long>(large),
      static_cast<unsigned long long>(wide_small), static_cast<unsigned long long>(wide_large));
  EXPECT_GE(wide_large, 3 * wide_small) << "the fleet-wide baseline did not grow with the fleet";
  // The leader's renewals (three a lease) are what a worker follows in steady state, plus the
  // plan's tally updates; a fleet-wide watch would see every peer's renewals too (4x more here).
  EXPECT_LE(large, small + 6) << "4 members: " << small << ", 16 members: " << large;
  EXPECT_LE(large, 3u * 10u + 10u) << "more than the leader's renewals over ten leases";
}

TEST(TargetedWatches, one_member_besides_the_leader_becomes_the_standby) {
  auto planner = std::make_shared<TestPlanner>(make_splits(12, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c", "d"}) add_targeted(fleet, id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && standby(fleet); }));
  const auto sb = standby(fleet);
  EXPECT_NE(sb->owner, fleet.leader_id());
}

TEST(TargetedWatches, the_standby_leads_when_the_leader_dies) {
  auto planner = std::make_shared<TestPlanner>(make_splits(12, 1'000'000));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c", "d"}) add_targeted(fleet, id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && standby(fleet); }));
  const std::string old_leader = fleet.leader_id();
  const std::string heir = standby(fleet)->owner;
  fleet.crash(old_leader);
  ASSERT_TRUE(fleet.run_until([&] { return !fleet.leader_id().empty(); }, 30s));
  EXPECT_EQ(fleet.leader_id(), heir) << "a worker won the election the standby should have";
  // The new leader gives the record up, and another member takes the role.
  ASSERT_TRUE(fleet.run_until(
      [&] {
        const auto s = standby(fleet);
        return s && s->owner != heir && s->owner != old_leader;
      },
      30s));
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }, 60s));
}

TEST(TargetedWatches, a_dead_standby_is_replaced) {
  auto planner = std::make_shared<TestPlanner>(make_splits(12, 1'000'000));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c"}) add_targeted(fleet, id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && standby(fleet); }));
  const std::string dead = standby(fleet)->owner;
  fleet.crash(dead);
  ASSERT_TRUE(fleet.run_until(
      [&] {
        const auto s = standby(fleet);
        return s && s->owner != dead;
      },
      30s));
  EXPECT_NE(standby(fleet)->owner, fleet.leader_id());
}

TEST(TargetedWatches, garbage_in_the_standby_record_is_removed) {
  auto planner = std::make_shared<TestPlanner>(make_splits(8, 10));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c"}) add_targeted(fleet, id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && standby(fleet); }));
  auto cur = fleet.mem->get(core::kStandbyKey);
  ASSERT_TRUE(fleet.mem->update(core::kStandbyKey, "{garbage", cur->revision).ok);
  ASSERT_TRUE(fleet.run_until(
      [&] {
        auto e = fleet.mem->get(core::kStandbyKey);
        if (!e) return false;
        try {
          core::decode_standby(core::kStandbyKey, e->value);
          return true;
        } catch (const core::RecordError&) {
          return false;
        }
      },
      30s));
  for (Node* n : fleet.live()) EXPECT_FALSE(n->member().stopped()) << n->id;
}

// A rebalance that revokes one of the standby's splits must not move the role: every move would
// cost the next standby a cold load of every record (the bench's membership change found it).
TEST(TargetedWatches, the_standby_keeps_its_role_while_it_drains_a_revocation) {
  auto planner = std::make_shared<TestPlanner>(make_splits(12, 1'000'000));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c"}) add_targeted(fleet, id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && standby(fleet); }));
  const std::string keeper = standby(fleet)->owner;
  const Revision rev = fleet.mem->get(core::kStandbyKey)->revision;
  const std::size_t held_before = fleet.node(keeper).held().size();
  fleet.node(keeper).policy.wedge = true;  // its drain lasts until drain_deadline forces it
  add_targeted(fleet, "d");                // 12 splits over 4 members: every member gives one up
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }, 60s));
  EXPECT_LT(fleet.node(keeper).held().size(), held_before) << "the standby drained nothing";
  ASSERT_TRUE(standby(fleet));
  EXPECT_EQ(standby(fleet)->owner, keeper);
  EXPECT_EQ(fleet.mem->get(core::kStandbyKey)->revision, rev) << "the role moved and came back";
}

// A plain worker takes over a dead member's split as soon as it is assigned: the snapshots of the
// lease and session watches it opens for the claim say "absent", which delivers no event, and the
// claim must not wait for its retry timer (100 ms) to notice. (The memory store delivers those
// snapshots within the step, so this harness passed before the fix too; on NATS, where they come
// a round trip later, `fleet_bench failover` measured the 100 ms: docs/performance.md.)
TEST(TargetedWatches, a_takeover_waits_for_no_timer_once_its_watches_caught_up) {
  auto planner = std::make_shared<TestPlanner>(make_splits(12, 1'000'000));
  Fleet fleet(planner);
  for (const char* id : {"a", "b", "c"}) add_targeted(fleet, id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && standby(fleet); }));
  const std::string leader = fleet.leader_id();
  const std::string dead = standby(fleet)->owner;
  std::string worker;
  for (Node* n : fleet.live()) {
    if (n->id != leader && n->id != dead) worker = n->id;
  }
  const std::set<std::string> orphaned = fleet.node(dead).held();
  ASSERT_FALSE(orphaned.empty());
  fleet.crash(dead);
  auto assigned_orphan = [&]() -> std::optional<std::string> {
    auto e = fleet.mem->get(core::assign_key(worker));
    if (!e) return std::nullopt;
    for (const std::string& id : core::decode_assignment(e->key, e->value).splits) {
      if (orphaned.count(id)) return id;
    }
    return std::nullopt;
  };
  ASSERT_TRUE(fleet.run_until([&] { return assigned_orphan().has_value(); }, 60s));
  const std::string split = *assigned_orphan();
  const auto assigned_at = fleet.clock.now();
  ASSERT_TRUE(fleet.run_until([&] { return fleet.node(worker).held().count(split) > 0; }, 10s));
  EXPECT_LT(fleet.clock.now() - assigned_at, 100ms) << "the takeover waited for a timer";
}

// Counts a member's lease-key deletes and reads.
class LeaseOps final : public KvStoreWrapper {
 public:
  using KvStoreWrapper::KvStoreWrapper;
  WriteResult erase(std::string_view key, Revision expected) override {
    if (key.starts_with("lease.")) ++erases[std::string(key)];
    return KvStoreWrapper::erase(key, expected);
  }
  std::optional<Entry> get(std::string_view key) override {
    if (key.starts_with("lease.")) ++reads[std::string(key)];
    return KvStoreWrapper::get(key);
  }
  std::map<std::string, int> erases, reads;
};

// A plain worker's cooperative release is one record write and one lease delete. Its own lease
// must leave its lease view with the delete: no watch tells a worker of it, and a lease of its own
// left there looked like an orphan to give back (a second delete and a read, every release).
TEST(TargetedWatches, a_release_deletes_the_lease_once_and_reads_nothing_back) {
  auto planner = std::make_shared<TestPlanner>(make_splits(12, 1'000'000));
  Fleet fleet(planner);
  std::map<std::string, std::shared_ptr<LeaseOps>> ops;
  fleet.wrap_store = [&](const std::string& id, std::shared_ptr<KvStore> inner) {
    auto w = std::make_shared<LeaseOps>(std::move(inner));
    ops[id] = w;
    return w;
  };
  for (const char* id : {"a", "b", "c"}) add_targeted(fleet, id);
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged() && standby(fleet); }));
  std::string worker;
  for (Node* n : fleet.live()) {
    if (n->id != fleet.leader_id() && n->id != standby(fleet)->owner) worker = n->id;
  }
  ASSERT_FALSE(worker.empty());
  const std::set<std::string> before = fleet.node(worker).held();
  ops[worker]->erases.clear();
  ops[worker]->reads.clear();
  add_targeted(fleet, "d");  // 12 splits over 4 members: every member gives some up
  ASSERT_TRUE(fleet.run_until([&] { return fleet.converged(); }, 60s));
  const std::set<std::string> after = fleet.node(worker).held();
  std::set<std::string> released;
  for (const std::string& id : before) {
    if (!after.count(id)) released.insert(core::lease_key(id));
  }
  ASSERT_FALSE(released.empty()) << "the worker gave nothing up";
  for (const std::string& key : released) {
    EXPECT_EQ(ops[worker]->erases[key], 1) << key;
    EXPECT_EQ(ops[worker]->reads[key], 0) << key;
  }
}

}  // namespace
}  // namespace etlc::testing
