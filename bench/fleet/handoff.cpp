// Handoff latency: release_drained() of a revoked split -> the assignee's claim CAS acknowledged.
//
// Two members, A (started first: the leader) and B. An operator cordon of one member makes the
// leader assign all its splits to the other; uncordon brings half back. Every revocation is parked
// by the member's user thread and released here one at a time, so each sample is one isolated
// handoff: A's release (record CAS clearing the owner, then the lease delete), B's lease watch
// event, B's control loop waking, and B's claim (record and spec reads, lease create, record CAS).
//
// With two members B is the standby (fleet-wide views, decision 0009). `--plain-workers` starts a
// leader and a standby first and cordons both, so they hold nothing and every handoff is between
// two plain workers A and B: with targeted watches, B learns of the freed lease through the key
// watch it opened on that lease, not through the `lease.*` prefix watch.
#include <fmt/format.h>

#include <array>

#include "core/keys.hpp"
#include "etlc/admin.hpp"
#include "runtime/coordinator_access.hpp"
#include "runtime/member.hpp"
#include "scenarios.hpp"

namespace etlc::bench {

using namespace std::chrono_literals;

namespace {

constexpr std::size_t kTraceEntries = 1 << 20;

struct Sample {
  std::string id;
  MemberSlot* from;
  MemberSlot* to;
  Time t0;  // release_drained called
  Time t1;  // release_drained returned
};

// Where one handoff's time went, from the two members' store traces (ms, relative steps).
struct Steps {
  static constexpr std::size_t kCount = 9;
  static constexpr std::array<const char*, kCount> kNames = {"A: record CAS (owner cleared)",
                                                             "A: lease delete",
                                                             "A lease delete acked -> B notified",
                                                             "B notified -> B polls the event",
                                                             "B polls -> B's first claim op",
                                                             "B: get split record",
                                                             "B: get spec",
                                                             "B: lease create",
                                                             "B: record CAS (claim)"};
  std::array<std::vector<double>, kCount> ms;
};

const TraceEntry* find_first(const std::vector<TraceEntry>& t, TraceEntry::Kind kind,
                             const std::string& key, std::int64_t from_ns) {
  for (const auto& e : t) {
    if (e.kind == kind && e.start_ns >= from_ns && e.key == key) return &e;
  }
  return nullptr;
}

void attribute(const Sample& s, const std::vector<TraceEntry>& from,
               const std::vector<TraceEntry>& to, Steps& out) {
  const std::string skey = core::split_key(s.id);
  const std::string lkey = core::lease_key(s.id);
  const std::string pkey = core::spec_key(s.id);
  const std::int64_t t0 = to_ns(s.t0);
  using K = TraceEntry::Kind;
  const TraceEntry* cas = find_first(from, K::update, skey, t0);
  const TraceEntry* del = find_first(from, K::erase, lkey, t0);
  const TraceEntry* polled = find_first(to, K::watch_erase, lkey, t0);
  if (cas == nullptr || del == nullptr || polled == nullptr) return;
  const TraceEntry* notified = nullptr;
  for (const auto& e : to) {
    // A prefix watch's notify is traced under its prefix, a key watch's under its first key.
    const bool lease_watch = e.key == core::kLeasePrefix || e.key.starts_with(core::kLeasePrefix);
    if (e.kind == K::notify && lease_watch && e.start_ns >= del->start_ns &&
        e.start_ns <= polled->start_ns) {
      notified = &e;
      break;
    }
  }
  const TraceEntry* get_split = find_first(to, K::get, skey, polled->start_ns);
  const TraceEntry* get_spec = find_first(to, K::get, pkey, polled->start_ns);
  const TraceEntry* create = find_first(to, K::create, lkey, polled->start_ns);
  const TraceEntry* claim = find_first(to, K::update, skey, polled->start_ns);
  if (notified == nullptr || get_split == nullptr || create == nullptr || claim == nullptr) return;
  auto ms = [](std::int64_t a, std::int64_t b) { return static_cast<double>(b - a) / 1e6; };
  out.ms[0].push_back(ms(cas->start_ns, cas->end_ns));
  out.ms[1].push_back(ms(del->start_ns, del->end_ns));
  out.ms[2].push_back(ms(del->end_ns, notified->start_ns));
  out.ms[3].push_back(ms(notified->start_ns, polled->start_ns));
  out.ms[4].push_back(ms(polled->start_ns, get_split->start_ns));
  out.ms[5].push_back(ms(get_split->start_ns, get_split->end_ns));
  // Usually prefetched while the previous owner drained it: a later get is another round's.
  if (get_spec != nullptr && get_spec->start_ns < create->start_ns) {
    out.ms[6].push_back(ms(get_spec->start_ns, get_spec->end_ns));
  }
  out.ms[7].push_back(ms(create->start_ns, create->end_ns));
  out.ms[8].push_back(ms(claim->start_ns, claim->end_ns));
}

// Median round trip of sequential gets and CASes on one connection, as the box runs right now.
std::pair<double, double> calibrate(KvStore& store) {
  std::vector<double> get_ms, cas_ms;
  WriteResult w = store.create("fleetbench.calibration", "0");
  Revision rev = w.ok ? w.revision : store.get("fleetbench.calibration")->revision;
  for (int i = 0; i < 200; ++i) {
    Time s = now();
    store.get("fleetbench.calibration");
    get_ms.push_back(ms_between(s, now()));
    s = now();
    WriteResult r = store.update("fleetbench.calibration", std::to_string(i), rev);
    cas_ms.push_back(ms_between(s, now()));
    if (r.ok) rev = r.revision;
  }
  store.erase("fleetbench.calibration", rev);
  return {median(get_ms), median(cas_ms)};
}

// --plain-workers: a leader, then a standby, each cordoned before the next starts (a cordoned
// member keeps its roles but is given no split), so A and B are neither.
void start_bystanders(Fleet& fleet, JobAdmin& admin, KvStore& store,
                      std::vector<MemberSlot*>& out) {
  MemberSlot& leader = fleet.add("handoff-leader");
  admin.cordon(leader.id, "fleet_bench handoff: leader holds nothing");
  fleet.start(leader);
  out.push_back(&leader);
  if (!Fleet::wait_for([&] { return leader.coord->is_leader(); }, 10s))
    throw std::runtime_error("handoff: the first bystander did not become leader");
  MemberSlot& standby = fleet.add("handoff-standby");
  admin.cordon(standby.id, "fleet_bench handoff: standby holds nothing");
  fleet.start(standby);
  out.push_back(&standby);
  // Without targeted watches there is no standby: then this is just a second bystander.
  Fleet::wait_for([&] { return standby_of(store) == standby.id; }, 10s);
}

}  // namespace

Result run_handoff(const BackendOptions& bo, const HandoffOptions& o) {
  auto backend = make_backend(bo);
  FleetOptions fo;
  fo.splits = o.splits;
  fo.base = bench_config();
  fo.base.lease_duration = 3000ms;
  fo.base.op_timeout = 500ms;
  fo.base.rebalance_delay = 0ms;
  fo.base.drain_deadline = 120s;  // parked revocations must never be forced
  fo.base.max_in_flight = static_cast<std::uint32_t>(o.splits);
  fo.revoke = RevokePolicy::queue;
  Fleet fleet(*backend, fo);

  auto admin_store = backend->connect("handoff-admin");
  JobAdmin admin(*admin_store);
  std::vector<MemberSlot*> bystanders;  // --plain-workers: the leader and the standby, cordoned
  if (o.plain_workers) start_bystanders(fleet, admin, *admin_store, bystanders);

  MemberSlot& a = fleet.add("handoff-a");
  MemberSlot& b = fleet.add("handoff-b");
  a.store->enable_trace(kTraceEntries);
  b.store->enable_trace(kTraceEntries);
  fleet.start(a);
  if (!o.plain_workers && !Fleet::wait_for([&] { return a.coord->is_leader(); }, 10s))
    throw std::runtime_error("handoff: the first member did not become leader");
  fleet.start(b);
  if (!Fleet::wait_for([&] { return fleet.held_total() == o.splits && fleet.settled(); }, 60s))
    throw std::runtime_error("handoff: the fleet did not settle");

  std::vector<double> total_ms, release_ms, after_release_ms;
  std::vector<Sample> samples;
  std::size_t missed = 0;
  const Time deadline = now() + std::chrono::seconds(60 + o.handoffs / 2);

  std::vector<MemberSlot*> both = {&a, &b};
  both.insert(both.end(), bystanders.begin(), bystanders.end());
  auto drain_all = [&] {
    for (;;) {
      if (now() > deadline) return;
      bool any = false;
      for (MemberSlot* m : both) {
        while (auto id = fleet.take_revocation(*m, 0ms)) {
          any = true;
          const Time t0 = now();
          CommitResult r = m->coord->release_drained(*id);
          const Time t1 = now();
          if (!r.durable()) {
            ++missed;
            continue;
          }
          auto claim = fleet.timeline().wait_claim(*id, m->id, t0, 5s);
          if (!claim) {
            ++missed;
            continue;
          }
          MemberSlot* to = claim->member == a.id ? &a : &b;
          if (claim->member != a.id && claim->member != b.id) {
            ++missed;  // a bystander claimed: cannot happen while it is cordoned
            continue;
          }
          samples.push_back(Sample{*id, m, to, t0, t1});
          total_ms.push_back(ms_between(t0, claim->at));
          release_ms.push_back(ms_between(t0, t1));
          after_release_ms.push_back(ms_between(t1, claim->at));
        }
      }
      if (!any) {
        if (fleet.settled() && fleet.held_total() == o.splits) return;
        std::this_thread::sleep_for(1ms);
      }
    }
  };

  auto wait_assignment = [&](MemberSlot& m, bool (*ok)(std::size_t)) {
    Fleet::wait_for(
        [&] {
          auto assigned = runtime::member_of(*m.coord).assignment();
          return assigned && ok(assigned->size());
        },
        10s);
  };
  const double cpu0 = process_cpu_seconds();
  const double load0 = load_average();
  const Time started = now();
  for (std::size_t round = 0; total_ms.size() + missed < o.handoffs && now() < deadline; ++round) {
    MemberSlot& x = round % 2 == 0 ? a : b;
    // Drain only once x's assignment shows the change: the fleet is "settled" on the old one
    // until the leader publishes, and a cordon lifted before that publish made the leader hand
    // the released splits straight back to their releaser (counted as handoffs never claimed).
    admin.cordon(x.id, "fleet_bench handoff");
    wait_assignment(x, [](std::size_t n) { return n == 0; });
    drain_all();
    admin.uncordon(x.id);
    wait_assignment(x, [](std::size_t n) { return n > 0; });
    drain_all();
  }
  const double wall = ms_between(started, now()) / 1000.0;
  const double cpu = process_cpu_seconds() - cpu0;
  const auto [rtt_get_ms, rtt_cas_ms] = calibrate(*admin_store);

  Steps steps;
  {
    const auto ta = a.store->trace();
    const auto tb = b.store->trace();
    for (const Sample& s : samples) {
      attribute(s, s.from == &a ? ta : tb, s.to == &a ? ta : tb, steps);
    }
  }

  Result res;
  res.add("handoff_ms_p50", median(total_ms));
  res.add("handoff_ms_p99", percentile(total_ms, 99));
  res.add("release_ms_p50", median(release_ms));
  res.add("claim_after_release_ms_p50", median(after_release_ms));
  res.add("samples", static_cast<double>(total_ms.size()));
  res.add("missed", static_cast<double>(missed));
  const std::string standby_at_end = standby_of(*admin_store);
  const MemberSlot* leader_at_end = fleet.leader();
  res.detail["config"] = {{"members", 2 + bystanders.size()},
                          {"plain_workers", o.plain_workers},
                          {"splits", o.splits},
                          {"lease_ms", fo.base.lease_duration.count()},
                          {"assignment_interval_ms", fo.base.assignment_interval.count()},
                          {"target_p50_ms", bo.store == "nats" ? 2.0 : 1.0}};
  res.detail["leader_at_end"] = leader_at_end != nullptr ? leader_at_end->id : std::string();
  res.detail["standby_at_end"] = standby_at_end;
  res.detail["handoff_ms"] = latency_json(total_ms);
  res.detail["release_drained_ms"] = latency_json(release_ms);
  res.detail["claim_after_release_ms"] = latency_json(after_release_ms);
  res.detail["store_round_trip_ms"] = {{"get_p50", rtt_get_ms}, {"cas_p50", rtt_cas_ms}};
  Json jsteps = Json::array();
  for (std::size_t i = 0; i < Steps::kCount; ++i) {
    jsteps.push_back({{"step", Steps::kNames[i]}, {"ms", latency_json(steps.ms[i])}});
  }
  res.detail["steps"] = jsteps;
  res.detail["cpu_utilisation"] = wall > 0 ? cpu / wall : 0.0;
  res.detail["load_average_start"] = load0;
  res.detail["watches_broken"] = fleet.watches_broken();
  if (const auto wb = fleet.watches_broken(); wb > 0) {
    res.notes.push_back(fmt::format("{} watch(es) broke and were re-opened during the run", wb));
  }
  res.columns = {"phase", "n", "p50 ms", "p90 ms", "p99 ms", "max ms"};
  auto row = [&](const char* name, const std::vector<double>& v) {
    res.rows.push_back({name, std::to_string(v.size()), fmt_num(median(v), 3),
                        fmt_num(percentile(v, 90), 3), fmt_num(percentile(v, 99), 3),
                        fmt_num(percentile(v, 100), 3)});
  };
  row("release_drained -> claim durable", total_ms);
  row("  release_drained call", release_ms);
  row("  release returned -> claim durable", after_release_ms);
  for (std::size_t i = 0; i < Steps::kCount; ++i) {
    row(fmt::format("    {}", Steps::kNames[i]).c_str(), steps.ms[i]);
  }
  res.rows.push_back({"store round trip now: get / CAS (p50)", "200",
                      fmt_num(rtt_get_ms, 3) + " / " + fmt_num(rtt_cas_ms, 3), "", "", ""});
  if (o.plain_workers && (standby_at_end == a.id || standby_at_end == b.id || leader_at_end == &a ||
                          leader_at_end == &b)) {
    res.notes.push_back("a handoff member led or was the standby at the end: not plain workers");
  }
  if (missed > 0)
    res.notes.push_back(fmt::format("{} handoffs missed (no claim within 5 s)", missed));
  return res;
}

}  // namespace etlc::bench
