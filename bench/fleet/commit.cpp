// Commit throughput: fenced progress commits (a CAS on split.{id}) from one member that is not
// the leader. A leader holding one lane is started first; the worker holds `lanes` splits. Then
// one thread commits to one split for `seconds` (sequential), and then `lanes` threads commit to
// their own split each (concurrent). The leader watches split.*, so every commit is also
// delivered to it: that is part of the cost on a shared box.
#include <fmt/format.h>

#include <map>

#include "scenarios.hpp"

namespace etlc::bench {

using namespace std::chrono_literals;

namespace {

struct Run {
  std::uint64_t durable = 0;
  std::uint64_t other = 0;
  double seconds = 0;
  std::vector<double> latency_ms;
  std::map<std::string, std::uint64_t> not_durable;  // status: detail -> count
};

// Watermarks start at `base` (above anything an earlier run committed: they never go back).
Run commit_for(Coordinator& c, const std::vector<std::string>& ids, double seconds,
               const std::string& state, std::uint64_t base) {
  Run out;
  std::mutex mu;
  std::vector<std::thread> threads;
  const Time t0 = now();
  const Time end = t0 + std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
  for (const std::string& id : ids) {
    threads.emplace_back([&, id] {
      std::vector<double> lat;
      std::map<std::string, std::uint64_t> why;
      std::uint64_t ok = 0, bad = 0, wm = base;
      while (now() < end) {
        const Time s = now();
        CommitResult r = c.commit(id, SplitProgress{++wm, state});
        const Time e = now();
        if (r.durable()) {
          ++ok;
          lat.push_back(ms_between(s, e));
        } else {
          ++bad;
          ++why[fmt::format("{}: {}", to_string(r.status), r.detail)];
          if (r.status == CommitStatus::fenced) break;
        }
      }
      std::lock_guard lk(mu);
      out.durable += ok;
      out.other += bad;
      out.latency_ms.insert(out.latency_ms.end(), lat.begin(), lat.end());
      for (const auto& [k, n] : why) out.not_durable[k] += n;
    });
  }
  for (auto& t : threads) t.join();
  out.seconds = ms_between(t0, now()) / 1000.0;
  return out;
}

}  // namespace

Result run_commit(const BackendOptions& bo, const CommitOptions& o) {
  auto backend = make_backend(bo);
  FleetOptions fo;
  fo.splits = o.lanes + 1;
  fo.base = bench_config();
  fo.track_timeline = false;  // no observer work on the commit path
  Fleet fleet(*backend, fo);
  MemberSlot& lead = fleet.add("commit-leader", [](CoordinatorConfig& c) { c.max_in_flight = 1; });
  MemberSlot& work =
      fleet.add("commit-worker", [&](CoordinatorConfig& c) { c.max_in_flight = o.lanes; });
  fleet.start(lead);
  if (!Fleet::wait_for([&] { return lead.coord->is_leader(); }, 10s))
    throw std::runtime_error("commit: no leader");
  fleet.start(work);
  if (!Fleet::wait_for(
          [&] { return work.coord->held_splits().size() == o.lanes && fleet.settled(); }, 60s))
    throw std::runtime_error("commit: the worker did not get its lanes");
  const std::vector<std::string> ids = work.coord->held_splits();
  const std::string state(o.state_bytes, 'x');

  const double load0 = load_average();
  const double cpu0 = process_cpu_seconds();
  Run seq = commit_for(*work.coord, {ids.front()}, o.seconds, state, 1'000'000'000);
  const double cpu1 = process_cpu_seconds();
  Run par = commit_for(*work.coord, ids, o.seconds, state, 2'000'000'000);
  const double cpu2 = process_cpu_seconds();

  auto rate = [](const Run& r) { return static_cast<double>(r.durable) / r.seconds; };
  Result res;
  res.add("sequential_commits_per_s", rate(seq));
  res.add("sequential_commit_ms_p50", median(seq.latency_ms));
  res.add("concurrent_commits_per_s", rate(par));
  res.add("concurrent_commit_ms_p50", median(par.latency_ms));
  res.detail["config"] = {{"lanes", o.lanes},
                          {"seconds", o.seconds},
                          {"state_bytes", o.state_bytes},
                          {"leader", "a second member, not committing"}};
  res.detail["sequential"] = {{"commits", seq.durable},
                              {"not_durable", seq.other},
                              {"latency_ms", latency_json(seq.latency_ms)},
                              {"cpu_utilisation", (cpu1 - cpu0) / seq.seconds}};
  res.detail["concurrent"] = {{"commits", par.durable},
                              {"not_durable", par.other},
                              {"latency_ms", latency_json(par.latency_ms)},
                              {"cpu_utilisation", (cpu2 - cpu1) / par.seconds}};
  res.detail["load_average_start"] = load0;
  res.detail["watches_broken"] = fleet.watches_broken();
  if (const auto wb = fleet.watches_broken(); wb > 0) {
    res.notes.push_back(fmt::format("{} watch(es) broke and were re-opened during the run", wb));
  }
  for (std::size_t i = 0; i < work.lost_by_reason.size(); ++i) {
    if (const auto n = work.lost_by_reason[i].load(); n > 0) {
      res.notes.push_back(
          fmt::format("the worker lost {} split(s): {}", n, to_string(static_cast<LossReason>(i))));
    }
  }
  for (const Run* r : {&seq, &par}) {
    for (const auto& [k, n] : r->not_durable) {
      res.notes.push_back(fmt::format("{} x not durable ({})", n, k));
    }
  }
  res.columns = {"mode", "threads", "commits/s", "p50 ms", "p99 ms", "not durable", "cpu"};
  res.rows = {
      {"sequential (one lane)", "1", fmt_num(rate(seq), 0), fmt_num(median(seq.latency_ms), 3),
       fmt_num(percentile(seq.latency_ms, 99), 3), std::to_string(seq.other),
       fmt_num((cpu1 - cpu0) / seq.seconds, 2)},
      {"concurrent (all lanes)", std::to_string(ids.size()), fmt_num(rate(par), 0),
       fmt_num(median(par.latency_ms), 3), fmt_num(percentile(par.latency_ms, 99), 3),
       std::to_string(par.other), fmt_num((cpu2 - cpu1) / par.seconds, 2)},
  };
  return res;
}

}  // namespace etlc::bench
