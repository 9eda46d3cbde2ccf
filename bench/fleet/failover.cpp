// Failover: a member is abandoned (a crash: nothing released, no store write) and we time until
// every split it held has been claimed by a survivor. The protocol's floor is lease_duration (the
// observers' expiry, counted from the last renewal they saw) plus rebalance_delay (the window a
// departed member's splits are withheld); we report the excess over that floor, measured from the
// kill and, more exactly, from the victim's last acknowledged renewal (expiry counts from there).
//
// Leader failover: the leader is abandoned; we also time the new leader's election and its first
// assignment publish (floor: lease_duration).
#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "scenarios.hpp"

namespace etlc::bench {

using namespace std::chrono_literals;

Result run_failover(const BackendOptions& bo, const FailoverOptions& o) {
  auto backend = make_backend(bo);
  FleetOptions fo;
  fo.splits = o.splits;
  fo.base = bench_config();
  fo.base.lease_duration = std::chrono::milliseconds(o.lease_ms);
  fo.base.op_timeout = std::chrono::milliseconds(o.op_timeout_ms);
  fo.base.rebalance_delay = std::chrono::milliseconds(o.rebalance_delay_ms);
  fo.base.drain_deadline = std::chrono::milliseconds(std::max<std::int64_t>(o.op_timeout_ms, 1000));
  fo.base.max_in_flight =
      o.lanes != 0 ? o.lanes : static_cast<std::uint32_t>(o.splits);  // 0: survivors have room
  const std::size_t held_when_settled =
      std::min<std::size_t>(o.splits, o.members * fo.base.max_in_flight);
  fo.base.max_attempts = 1000;  // every kill is a takeover (poison evidence): never quarantine
  Fleet fleet(*backend, fo);

  std::size_t next_id = 0;
  auto add = [&] { return &fleet.add(fmt::format("failover-{:03}", next_id++)); };
  {
    MemberSlot* first = add();
    fleet.start(*first);
    if (!Fleet::wait_for([&] { return first->coord->is_leader(); }, 10s))
      throw std::runtime_error("failover: no leader");
    std::vector<MemberSlot*> rest;
    for (std::size_t i = 1; i < o.members; ++i) rest.push_back(add());
    fleet.start_all(rest, 4);
  }
  auto settle = [&] {
    return Fleet::wait_for(
        [&] { return fleet.held_total() == held_when_settled && fleet.settled(); },
        std::chrono::milliseconds(static_cast<std::int64_t>(o.settle_timeout_s * 1000)));
  };

  const double floor_ms = static_cast<double>(o.lease_ms + o.rebalance_delay_ms);
  std::vector<double> moved_ms, excess_kill, excess_renewal, elect_ms, publish_ms,
      publish_excess_ms;
  std::vector<double> publish_excess_renewal_ms;
  std::mt19937_64 phase(20261129);
  std::size_t missed = 0;
  Json rounds = Json::array();
  for (std::size_t r = 0; r < o.rounds; ++r) {
    if (!settle()) {
      throw std::runtime_error(
          fmt::format("failover: the fleet did not settle within {:.0f} s", o.settle_timeout_s));
    }
    // Kill at a different phase of the victim's renewal cycle each round (fixed seed).
    std::this_thread::sleep_for(std::chrono::milliseconds(
        o.lease_ms / 2 +
        static_cast<std::int64_t>(
            phase() % static_cast<std::uint64_t>(std::max<std::int64_t>(o.lease_ms / 3, 1)))));
    MemberSlot* victim = nullptr;
    if (o.leader) {
      victim = fleet.leader();
    } else {
      for (MemberSlot* m : fleet.live()) {
        if (!m->coord->is_leader() && !m->coord->held_splits().empty()) victim = m;
      }
    }
    if (victim == nullptr) throw std::runtime_error("failover: no victim");
    const std::vector<std::string> held = victim->coord->held_splits();
    const Time t_renew = from_ns(victim->last_renew_ns.load());
    const Time t_kill = now();
    fleet.kill(*victim);
    const auto bound = std::chrono::milliseconds(o.lease_ms * 2 + o.rebalance_delay_ms) + 20s;
    auto done = fleet.timeline().wait_all_claimed(held, victim->id, t_kill, bound);
    Json jr = {{"victim", victim->id}, {"splits", held.size()}};
    if (done) {
      moved_ms.push_back(ms_between(t_kill, *done));
      excess_kill.push_back(ms_between(t_kill, *done) - floor_ms);
      excess_renewal.push_back(ms_between(t_renew, *done) - floor_ms);
      jr["all_claimed_ms"] = moved_ms.back();
      jr["excess_over_floor_ms"] = excess_kill.back();
      jr["excess_from_last_renewal_ms"] = excess_renewal.back();
    } else {
      ++missed;
    }
    if (o.leader) {
      auto elected = fleet.timeline().first_leader_write_after(t_kill, victim->id);
      auto publish = fleet.timeline().first_assign_write_after(t_kill, victim->id);
      if (elected) {
        elect_ms.push_back(ms_between(t_kill, elected->at));
        jr["elected_ms"] = elect_ms.back();
      }
      if (publish) {
        publish_ms.push_back(ms_between(t_kill, publish->at));
        publish_excess_ms.push_back(ms_between(t_kill, publish->at) -
                                    static_cast<double>(o.lease_ms));
        jr["first_publish_ms"] = publish_ms.back();
        publish_excess_renewal_ms.push_back(ms_between(t_renew, publish->at) -
                                            static_cast<double>(o.lease_ms));
        jr["publish_excess_from_last_renewal_ms"] = publish_excess_renewal_ms.back();
      }
    }
    rounds.push_back(jr);
    fleet.start(*add());  // keep the fleet's size
  }

  Result res;
  res.add("excess_ms_p50", median(excess_kill));
  res.add("excess_ms_max", percentile(excess_kill, 100));
  res.add("excess_from_renewal_ms_p50", median(excess_renewal));
  res.add("excess_from_renewal_ms_max", percentile(excess_renewal, 100));
  if (o.leader) {
    res.add("publish_excess_ms_p50", median(publish_excess_ms));
    res.add("publish_excess_ms_max", percentile(publish_excess_ms, 100));
    res.add("publish_excess_from_renewal_ms_p50", median(publish_excess_renewal_ms));
  }
  res.add("rounds", static_cast<double>(moved_ms.size()));
  res.add("missed", static_cast<double>(missed));
  res.detail["config"] = {{"members", o.members},
                          {"splits", o.splits},
                          {"kill", o.leader ? "leader" : "worker"},
                          {"lease_ms", o.lease_ms},
                          {"op_timeout_ms", o.op_timeout_ms},
                          {"rebalance_delay_ms", o.rebalance_delay_ms},
                          {"lanes", fo.base.max_in_flight},
                          {"floor_ms", floor_ms},
                          {"target_excess_ms", 100}};
  res.detail["rounds"] = rounds;
  res.detail["watches_broken"] = fleet.watches_broken();
  if (const auto wb = fleet.watches_broken(); wb > 0) {
    res.notes.push_back(fmt::format("{} watch(es) broke and were re-opened during the run", wb));
  }
  res.columns = {"figure", "n", "p50 ms", "max ms"};
  auto row = [&](const std::string& name, const std::vector<double>& v) {
    res.rows.push_back(
        {name, std::to_string(v.size()), fmt_num(median(v), 1), fmt_num(percentile(v, 100), 1)});
  };
  row("kill -> all its splits claimed", moved_ms);
  row(fmt::format("  excess over lease+delay ({} ms), from kill", floor_ms), excess_kill);
  row("  excess over lease+delay, from last renewal", excess_renewal);
  if (o.leader) {
    row("kill -> new leader elected", elect_ms);
    row("kill -> new leader's first publish", publish_ms);
    row(fmt::format("  excess over lease ({} ms), from kill", o.lease_ms), publish_excess_ms);
    row("  excess over lease, from last renewal", publish_excess_renewal_ms);
  }
  res.notes.push_back(
      "the floor counts from the victim's last renewal (<= lease/3 before the kill), so the "
      "excess from the kill can be negative by up to lease/3");
  return res;
}

}  // namespace etlc::bench
