// Cold start: an empty store, `members` members started at once (from a few threads), a final
// plan of `splits` splits. Timed from the first start() call to (a) every lane filled (the leader
// publishes assignments while it seeds, so lanes fill long before the last split is seeded) and
// (b) the plan published (seeded: every spec and split record created, plan header written).
// Store connections are opened before the clock starts (a process connects before it joins).
// The process's resident memory is read before the fleet exists and when the run ends (all
// members live in this process: with --members 1 the growth is the leader's, its views of a
// plan of `splits` and the plan itself).
#include <fmt/format.h>

#include <algorithm>

#include "scenarios.hpp"

namespace etlc::bench {

using namespace std::chrono_literals;

Result run_cold_start(const BackendOptions& bo, const ColdStartOptions& o) {
  const MemoryUse mem0 = process_memory();
  auto backend = make_backend(bo);
  FleetOptions fo;
  fo.splits = o.splits;
  fo.base = bench_config();
  fo.base.max_in_flight = o.lanes;
  if (o.bulk_ops_per_step != 0) fo.base.bulk_ops_per_step = o.bulk_ops_per_step;
  if (o.assignment_interval_ms >= 0)
    fo.base.assignment_interval = std::chrono::milliseconds(o.assignment_interval_ms);
  Fleet fleet(*backend, fo);

  const Time t_conn = now();
  std::vector<MemberSlot*> all;
  for (std::size_t i = 0; i < o.members; ++i)
    all.push_back(&fleet.add(fmt::format("cold-{:03}", i)));
  const double connect_s = ms_between(t_conn, now()) / 1000.0;
  if (o.trace) {
    for (auto* m : all) m->store->enable_trace(std::size_t{1} << 21);
  }

  const double cpu0 = process_cpu_seconds();
  const double load0 = load_average();
  const Time t0 = now();
  fleet.start_all(all, o.start_threads);
  const Time t_joined = now();
  const std::size_t lanes_total = std::min<std::size_t>(o.splits, o.members * o.lanes);
  std::optional<Time> t_filled;
  const bool done = Fleet::wait_for(
      [&] {
        if (!t_filled && fleet.held_total() == lanes_total) t_filled = now();
        return t_filled && fleet.timeline().plan_published();
      },
      std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000)));
  const Time t_end = now();
  const double cpu = process_cpu_seconds() - cpu0;
  const MemoryUse mem1 = process_memory();

  Timeline& tl = fleet.timeline();
  auto since = [&](std::optional<Time> t) { return t ? ms_between(t0, *t) / 1000.0 : NAN; };
  const auto elected = tl.first_leader_write_after(t0, "");
  const auto first_assign = tl.first_assign_write_after(t0, "");
  const double seeding_s = tl.first_create() && tl.last_split_create()
                               ? ms_between(*tl.first_create(), *tl.last_split_create()) / 1000.0
                               : NAN;
  const double creates = static_cast<double>(tl.split_creates() + tl.spec_creates());
  const double total_s = done ? std::max(since(t_filled), since(tl.plan_published())) : NAN;

  Result res;
  // The figure is "every lane filled" (assignment is published while seeding goes on);
  // the fully seeded plan is reported next to it.
  res.add("lanes_filled_s", since(t_filled));
  res.add("plan_published_s", since(tl.plan_published()));
  res.add("filled_and_seeded_s", total_s);
  res.add("seeding_creates_per_s", seeding_s > 0 ? creates / seeding_s : NAN);
  res.add("rss_growth_mib", mem1.rss_mib - mem0.rss_mib);
  res.add("rss_peak_mib", mem1.peak_mib);
  res.detail["config"] = {{"members", o.members},
                          {"splits", o.splits},
                          {"lanes", o.lanes},
                          {"lanes_total", lanes_total},
                          {"bulk_ops_per_step", fo.base.bulk_ops_per_step},
                          {"assignment_interval_ms", fo.base.assignment_interval.count()},
                          {"target_s", 10}};
  res.detail["connect_s"] = connect_s;
  res.detail["all_joined_s"] = ms_between(t0, t_joined) / 1000.0;
  res.detail["elected_s"] = elected ? since(elected->at) : NAN;
  res.detail["first_create_s"] = since(tl.first_create());
  res.detail["last_split_create_s"] = since(tl.last_split_create());
  res.detail["first_assign_s"] = first_assign ? since(first_assign->at) : NAN;
  res.detail["split_creates"] = tl.split_creates();
  res.detail["spec_creates"] = tl.spec_creates();
  res.detail["seeding_s"] = seeding_s;
  res.detail["completed"] = done;
  res.detail["cpu_utilisation"] = cpu / std::max(1e-9, ms_between(t0, t_end) / 1000.0);
  res.detail["load_average_start"] = load0;
  res.detail["watches_broken"] = fleet.watches_broken();
  res.detail["rss_mib_before"] = mem0.rss_mib;
  res.detail["rss_mib_end"] = mem1.rss_mib;
  res.detail["rss_mib_peak"] = mem1.peak_mib;
  res.columns = {"step", "at s (from first start)"};
  res.rows = {
      {"connections opened (before t0, took)", fmt_num(connect_s, 3)},
      {"all members joined", fmt_num(ms_between(t0, t_joined) / 1000.0, 3)},
      {"leader elected", fmt_num(elected ? since(elected->at) : NAN, 3)},
      {"first seed write", fmt_num(since(tl.first_create()), 3)},
      {"first assignment published", fmt_num(first_assign ? since(first_assign->at) : NAN, 3)},
      {fmt::format("every lane filled ({} lanes)", lanes_total), fmt_num(since(t_filled), 3)},
      {"last split record created", fmt_num(since(tl.last_split_create()), 3)},
      {"plan published (seeded)", fmt_num(since(tl.plan_published()), 3)},
      {fmt::format("seeding rate, creates/s ({} creates)", creates),
       fmt_num(seeding_s > 0 ? creates / seeding_s : NAN, 0)},
      {"resident MiB: before the fleet / at the end / peak", fmt_num(mem0.rss_mib, 0) + " / " +
                                                                 fmt_num(mem1.rss_mib, 0) + " / " +
                                                                 fmt_num(mem1.peak_mib, 0)},
  };
  if (const auto wb = fleet.watches_broken(); wb > 0) {
    res.notes.push_back(fmt::format("{} watch(es) broke and were re-opened during the run", wb));
  }
  if (o.trace) {
    // Seeding breakdown from the traces: create latency, and how much of the seeding span had
    // no create in flight at all (the leader's control loop between bulk slices).
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    std::vector<double> create_ms;
    for (auto* m : all) {
      for (const auto& e : m->store->trace()) {
        if (e.kind != TraceEntry::Kind::create) continue;
        const Family f = family_of(e.key);
        if (f != Family::split && f != Family::spec) continue;
        spans.emplace_back(e.start_ns, e.end_ns);
        create_ms.push_back(static_cast<double>(e.end_ns - e.start_ns) / 1e6);
      }
    }
    std::sort(spans.begin(), spans.end());
    std::int64_t busy = 0, gaps = 0, cur_end = 0;
    std::vector<double> gap_ms;
    for (const auto& [s, e] : spans) {
      if (cur_end != 0 && s > cur_end) {
        gaps += s - cur_end;
        gap_ms.push_back(static_cast<double>(s - cur_end) / 1e6);
      }
      if (s >= cur_end) {
        busy += e - s;
        cur_end = e;
      } else if (e > cur_end) {
        busy += e - cur_end;
        cur_end = e;
      }
    }
    res.detail["seed_create_ms"] = latency_json(create_ms);
    res.detail["seed_busy_s"] = static_cast<double>(busy) / 1e9;
    res.detail["seed_idle_s"] = static_cast<double>(gaps) / 1e9;
    res.detail["seed_idle_gap_ms"] = latency_json(gap_ms);
    res.rows.push_back(
        {"seed create latency p50 / p99 ms",
         fmt_num(median(create_ms), 3) + " / " + fmt_num(percentile(create_ms, 99), 3)});
    res.rows.push_back({"seeding: s with a create in flight / s with none",
                        fmt_num(static_cast<double>(busy) / 1e9, 2) + " / " +
                            fmt_num(static_cast<double>(gaps) / 1e9, 2)});
    res.rows.push_back({fmt::format("idle gaps: n / p50 ms / max ms"),
                        fmt::format("{} / {} / {}", gap_ms.size(), fmt_num(median(gap_ms), 2),
                                    fmt_num(percentile(gap_ms, 100), 2))});
  }
  if (!done) res.notes.push_back(fmt::format("did not finish within {} s", o.timeout_s));
  return res;
}

}  // namespace etlc::bench
