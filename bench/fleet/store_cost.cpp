// Steady-state store cost: M members with every lane full (or every split held), no commits, no
// membership change. Over a window we count, per member, the writes it sends and the watch events
// its watches deliver to it. The design's claims: heartbeat writes = members x 3 / lease whatever
// the split count, and a non-leader's watch traffic does not grow with the split count. With
// targeted watches (decision 0009) a worker (neither leader nor standby) sees only the leader's
// renewals, 3 / lease at every fleet size; fleet-wide, every renewal reaches every member.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "scenarios.hpp"

namespace etlc::bench {

using namespace std::chrono_literals;

namespace {

struct Cell {
  std::size_t members = 0;
  std::size_t splits = 0;
  bool ok = false;
  std::string failure;
  double setup_s = 0;
  double window_s = 0;
  double writes_per_s = 0;            // all members
  double heartbeat_writes_per_s = 0;  // member.* writes, all members
  double expected_heartbeat_per_s = 0;
  double other_writes_per_s = 0;
  double leader_watch_per_s = 0;
  double standby_watch_per_s = 0;  // the standby keeps fleet-wide views too (decision 0009)
  double worker_watch_p50_per_s = 0;
  double worker_watch_max_per_s = 0;
  double expected_worker_watch_per_s = 0;  // by the watch scope (see the file comment)
  std::size_t workers = 0;
  bool standby_named = false;
  std::array<double, kFamilies> worker_watch_by_family{};  // mean per worker per second
  double gets_per_s = 0;
  std::uint64_t claims_in_window = 0;
  double cpu_utilisation = 0;
  double load_start = 0;
  std::uint64_t watches_broken_in_window = 0;
};

Cell measure(const BackendOptions& bo, const StoreCostOptions& o, std::size_t members,
             std::size_t splits) {
  const bool targeted = effective_targeted_watches(bo);
  Cell c;
  c.members = members;
  c.splits = splits;
  c.load_start = load_average();
  auto backend = make_backend(bo);
  FleetOptions fo;
  fo.splits = splits;
  fo.base = bench_config();
  fo.base.lease_duration = std::chrono::milliseconds(o.lease_ms);
  fo.base.op_timeout = std::chrono::milliseconds(std::min<std::int64_t>(o.lease_ms / 4, 2000));
  fo.base.max_in_flight = o.lanes;
  Fleet fleet(*backend, fo);
  const Time t_setup = now();
  std::vector<MemberSlot*> all;
  for (std::size_t i = 0; i < members; ++i) all.push_back(&fleet.add(fmt::format("cost-{:03}", i)));
  fleet.start(*all.front());  // the first one leads
  Fleet::wait_for([&] { return all.front()->coord->is_leader(); }, 10s);
  fleet.start_all(std::vector<MemberSlot*>(all.begin() + 1, all.end()), 4);
  const std::size_t want = std::min<std::size_t>(splits, members * o.lanes);
  const bool warm = Fleet::wait_for(
      [&] {
        return fleet.timeline().plan_published() && fleet.held_total() == want && fleet.settled();
      },
      std::chrono::milliseconds(static_cast<std::int64_t>(o.setup_timeout_s * 1000)));
  c.setup_s = ms_between(t_setup, now()) / 1000.0;
  if (!warm) {
    c.failure = fmt::format("not warm after {:.0f} s (held {} of {})", o.setup_timeout_s,
                            fleet.held_total(), want);
    return c;
  }
  std::this_thread::sleep_for(
      std::chrono::milliseconds(static_cast<std::int64_t>(o.settle_s * 1000)));

  std::vector<StoreCounts> before;
  for (auto* m : all) before.push_back(m->store->counts());
  const std::uint64_t broken0 = fleet.watches_broken();
  const Time t0 = now();
  const double cpu0 = process_cpu_seconds();
  std::this_thread::sleep_for(
      std::chrono::milliseconds(static_cast<std::int64_t>(o.window_s * 1000)));
  const Time t1 = now();
  const double cpu1 = process_cpu_seconds();
  c.window_s = ms_between(t0, t1) / 1000.0;
  c.claims_in_window = fleet.timeline().claims_since(t0);
  c.watches_broken_in_window = fleet.watches_broken() - broken0;
  MemberSlot* leader = fleet.leader();
  std::string standby_id;
  if (auto sb = all.front()->store->get(core::kStandbyKey)) {
    try {
      standby_id = core::decode_standby(core::kStandbyKey, sb->value).owner;
    } catch (const core::RecordError&) {
      standby_id.clear();
    }
  }
  std::vector<double> worker_watch;
  StoreCounts sum;
  for (std::size_t i = 0; i < all.size(); ++i) {
    StoreCounts d = all[i]->store->counts() - before[i];
    for (std::size_t f = 0; f < kFamilies; ++f) {
      sum.writes[f] += d.writes[f];
      sum.watch_events[f] += d.watch_events[f];
    }
    sum.gets += d.gets;
    const double w = static_cast<double>(d.total_watch_events()) / c.window_s;
    if (all[i] == leader) {
      c.leader_watch_per_s = w;
    } else if (all[i]->id == standby_id) {
      c.standby_watch_per_s = w;
      c.standby_named = true;
    } else {
      worker_watch.push_back(w);
      for (std::size_t f = 0; f < kFamilies; ++f)
        c.worker_watch_by_family[f] += static_cast<double>(d.watch_events[f]);
    }
  }
  const auto member_f = static_cast<std::size_t>(Family::member);
  c.writes_per_s = static_cast<double>(sum.total_writes()) / c.window_s;
  c.heartbeat_writes_per_s = static_cast<double>(sum.writes[member_f]) / c.window_s;
  c.other_writes_per_s = c.writes_per_s - c.heartbeat_writes_per_s;
  c.expected_heartbeat_per_s =
      static_cast<double>(members) * 3.0 / (static_cast<double>(o.lease_ms) / 1000.0);
  // Targeted: a worker watches the leader's session only; fleet-wide: every session.
  c.expected_worker_watch_per_s =
      targeted ? 3.0 / (static_cast<double>(o.lease_ms) / 1000.0) : c.expected_heartbeat_per_s;
  c.workers = worker_watch.size();
  for (auto& f : c.worker_watch_by_family)
    f /= std::max<double>(1.0, static_cast<double>(c.workers)) * c.window_s;
  c.worker_watch_p50_per_s = median(worker_watch);
  c.worker_watch_max_per_s = percentile(worker_watch, 100);
  c.gets_per_s = static_cast<double>(sum.gets) / c.window_s;
  c.cpu_utilisation = (cpu1 - cpu0) / c.window_s;
  c.ok = true;
  return c;
}

}  // namespace

Result run_store_cost(const BackendOptions& bo, const StoreCostOptions& o) {
  Result res;
  res.columns = {"members",
                 "splits",
                 "setup s",
                 "writes/s",
                 "heartbeat/s",
                 "expected/s",
                 "other/s",
                 "leader watch/s",
                 "standby watch/s",
                 "worker watch/s p50",
                 "max",
                 "expected",
                 "gets/s",
                 "cpu"};
  Json cells = Json::array();
  double worst_ratio = 0, worst_worker_p50 = 0, worst_worker_max = 0;
  for (std::size_t m : o.members) {
    for (std::size_t s : o.splits) {
      fmt::print(stderr, "fleet_bench: store-cost {} members x {} splits...\n", m, s);
      Cell c = measure(bo, o, m, s);
      Json j = {{"members", c.members}, {"splits", c.splits}, {"ok", c.ok}};
      if (!c.ok) {
        j["failure"] = c.failure;
        res.rows.push_back({std::to_string(m), std::to_string(s), fmt_num(c.setup_s, 1), "-", "-",
                            "-", "-", "-", "-", "-", "-", "-", "-", "-"});
        res.notes.push_back(fmt::format("{} x {}: {}", m, s, c.failure));
        cells.push_back(j);
        continue;
      }
      j["setup_s"] = c.setup_s;
      j["window_s"] = c.window_s;
      j["writes_per_s"] = c.writes_per_s;
      j["heartbeat_writes_per_s"] = c.heartbeat_writes_per_s;
      j["expected_heartbeat_writes_per_s"] = c.expected_heartbeat_per_s;
      j["other_writes_per_s"] = c.other_writes_per_s;
      j["leader_watch_events_per_s"] = c.leader_watch_per_s;
      j["standby_watch_events_per_s"] = c.standby_watch_per_s;
      j["worker_watch_events_per_s_p50"] = c.worker_watch_p50_per_s;
      j["worker_watch_events_per_s_max"] = c.worker_watch_max_per_s;
      j["expected_worker_watch_events_per_s"] = c.expected_worker_watch_per_s;
      j["workers"] = c.workers;
      j["standby_named"] = c.standby_named;
      Json by_family = Json::object();
      for (std::size_t f = 0; f < kFamilies; ++f) {
        if (c.worker_watch_by_family[f] > 0)
          by_family[std::string(to_string(static_cast<Family>(f)))] = c.worker_watch_by_family[f];
      }
      j["worker_watch_events_per_s_by_family"] = by_family;
      j["gets_per_s"] = c.gets_per_s;
      j["claims_in_window"] = c.claims_in_window;
      j["cpu_utilisation"] = c.cpu_utilisation;
      j["load_average_start"] = c.load_start;
      j["watches_broken_in_window"] = c.watches_broken_in_window;
      cells.push_back(j);
      worst_ratio = std::max(worst_ratio, c.writes_per_s / c.expected_heartbeat_per_s);
      worst_worker_p50 = std::max(worst_worker_p50, c.worker_watch_p50_per_s);
      worst_worker_max = std::max(worst_worker_max, c.worker_watch_max_per_s);
      res.rows.push_back(
          {std::to_string(m), std::to_string(s), fmt_num(c.setup_s, 1), fmt_num(c.writes_per_s, 1),
           fmt_num(c.heartbeat_writes_per_s, 1), fmt_num(c.expected_heartbeat_per_s, 1),
           fmt_num(c.other_writes_per_s, 1), fmt_num(c.leader_watch_per_s, 1),
           c.standby_named ? fmt_num(c.standby_watch_per_s, 1) : std::string("-"),
           fmt_num(c.worker_watch_p50_per_s, 1), fmt_num(c.worker_watch_max_per_s, 1),
           fmt_num(c.expected_worker_watch_per_s, 1), fmt_num(c.gets_per_s, 1),
           fmt_num(c.cpu_utilisation, 2)});
      if (c.claims_in_window > 0)
        res.notes.push_back(fmt::format("{} x {}: {} claims inside the window (not steady)", m, s,
                                        c.claims_in_window));
    }
  }
  res.add("worst_writes_over_heartbeat_ratio", worst_ratio);
  res.add("worst_worker_watch_events_per_s_p50", worst_worker_p50);
  res.add("worst_worker_watch_events_per_s_max", worst_worker_max);
  res.detail["config"] = {{"lanes", o.lanes},
                          {"lease_ms", o.lease_ms},
                          {"window_s", o.window_s},
                          {"commits", 0},
                          {"targeted_watches", effective_targeted_watches(bo)}};
  res.detail["cells"] = cells;
  res.notes.push_back(
      "per second, whole fleet for writes; watch events per member (workers: neither leader nor "
      "standby; '-': no standby record); expected writes = members x 3 / lease (one renewal per "
      "member per lease/3); expected worker events: the same fleet-wide (every renewal reaches "
      "every member), 3 / lease with targeted watches (the leader's renewals only)");
  return res;
}

}  // namespace etlc::bench
