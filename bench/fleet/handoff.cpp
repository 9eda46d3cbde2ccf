// Handoff latency: release_drained() of a revoked split -> the assignee's claim CAS acknowledged.
//
// Two members, A (started first: the leader) and B. An operator cordon of one member makes the
// leader assign all its splits to the other; uncordon brings half back. Every revocation is parked
// by the member's user thread and released here one at a time, so each sample is one isolated
// handoff: A's release (record CAS clearing the owner, then the lease delete), B's lease watch
// event, B's control loop waking, and B's claim (record and spec reads, lease create, record CAS).
#include <fmt/format.h>

#include "etlc/admin.hpp"
#include "scenarios.hpp"

namespace etlc::bench {

using namespace std::chrono_literals;

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

  MemberSlot& a = fleet.add("handoff-a");
  MemberSlot& b = fleet.add("handoff-b");
  fleet.start(a);
  if (!Fleet::wait_for([&] { return a.coord->is_leader(); }, 10s))
    throw std::runtime_error("handoff: the first member did not become leader");
  fleet.start(b);
  if (!Fleet::wait_for([&] { return fleet.held_total() == o.splits && fleet.settled(); }, 60s))
    throw std::runtime_error("handoff: the fleet did not settle");

  auto admin_store = backend->connect("handoff-admin");
  JobAdmin admin(*admin_store);

  std::vector<double> total_ms, release_ms, after_release_ms;
  std::size_t missed = 0;
  const Time deadline = now() + std::chrono::seconds(60 + o.handoffs / 2);

  MemberSlot* both[] = {&a, &b};
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

  const double cpu0 = process_cpu_seconds();
  const double load0 = load_average();
  const Time started = now();
  for (std::size_t round = 0; total_ms.size() + missed < o.handoffs && now() < deadline; ++round) {
    MemberSlot& x = round % 2 == 0 ? a : b;
    admin.cordon(x.id, "fleet_bench handoff");
    drain_all();
    admin.uncordon(x.id);
    drain_all();
  }
  const double wall = ms_between(started, now()) / 1000.0;
  const double cpu = process_cpu_seconds() - cpu0;

  Result res;
  res.add("handoff_ms_p50", median(total_ms));
  res.add("handoff_ms_p99", percentile(total_ms, 99));
  res.add("release_ms_p50", median(release_ms));
  res.add("claim_after_release_ms_p50", median(after_release_ms));
  res.add("samples", static_cast<double>(total_ms.size()));
  res.add("missed", static_cast<double>(missed));
  res.detail["config"] = {{"members", 2},
                          {"splits", o.splits},
                          {"lease_ms", fo.base.lease_duration.count()},
                          {"assignment_interval_ms", fo.base.assignment_interval.count()},
                          {"target_p50_ms", bo.store == "nats" ? 2.0 : 1.0}};
  res.detail["handoff_ms"] = latency_json(total_ms);
  res.detail["release_drained_ms"] = latency_json(release_ms);
  res.detail["claim_after_release_ms"] = latency_json(after_release_ms);
  res.detail["cpu_utilisation"] = wall > 0 ? cpu / wall : 0.0;
  res.detail["load_average_start"] = load0;
  res.columns = {"phase", "n", "p50 ms", "p90 ms", "p99 ms", "max ms"};
  auto row = [&](const char* name, const std::vector<double>& v) {
    res.rows.push_back({name, std::to_string(v.size()), fmt_num(median(v), 3),
                        fmt_num(percentile(v, 90), 3), fmt_num(percentile(v, 99), 3),
                        fmt_num(percentile(v, 100), 3)});
  };
  row("release_drained -> claim durable", total_ms);
  row("  release_drained call", release_ms);
  row("  release returned -> claim durable", after_release_ms);
  if (missed > 0)
    res.notes.push_back(fmt::format("{} handoffs missed (no claim within 5 s)", missed));
  return res;
}

}  // namespace etlc::bench
