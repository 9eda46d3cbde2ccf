// etlc-sim: runs the deterministic simulation over a range of seeds.
//
//   etlc-sim --seeds N --from S --scenario NAME [--faults 'name=value,...'] [--trace]
//            [--stop-on-failure] [--time-limit SECONDS] [--progress N] [--per-run]
//
// Scenarios: calm crash pause store watch stale leader skew open poison chaos operator lone tail
// straggler (and `all`, which picks one per seed; `zombie` is the pause-heavy mix of the
// checker-must-fail test).
// Each run prints nothing unless it fails; a failure prints the invariant, the replay command and
// the last trace events. At the end: runs, failures, runs per second and the virtual-to-real time
// ratio. Exit status 1 if any run failed, 2 on bad arguments.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "scenario.hpp"
#include "world.hpp"

namespace {

struct Args {
  std::uint64_t seeds = 100;
  std::uint64_t from = 1;
  std::string scenario = "all";
  std::string faults;
  bool trace = false;
  bool stop_on_failure = false;
  double time_limit_s = 0;  // 0 = none
  std::uint64_t progress = 0;
  bool per_run = false;  // one summary line per run
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "%s\nusage: etlc-sim [--seeds N] [--from S] [--scenario NAME] [--faults "
               "'name=value,...'] [--trace] [--stop-on-failure] [--time-limit SECONDS] "
               "[--progress N] [--per-run]\n",
               error.c_str());
  std::exit(2);
}

std::uint64_t to_u64(const std::string& flag, const std::string& v) {
  try {
    std::size_t used = 0;
    const unsigned long long x = std::stoull(v, &used);
    if (used != v.size()) throw std::invalid_argument("trailing");
    return x;
  } catch (const std::exception&) {
    usage(fmt::format("{} needs a non-negative integer, got '{}'", flag, v));
  }
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(f + " needs a value");
      return argv[++i];
    };
    if (f == "--seeds") {
      a.seeds = to_u64(f, value());
    } else if (f == "--from") {
      a.from = to_u64(f, value());
    } else if (f == "--scenario") {
      a.scenario = value();
    } else if (f == "--faults") {
      a.faults = value();
    } else if (f == "--trace") {
      a.trace = true;
    } else if (f == "--stop-on-failure") {
      a.stop_on_failure = true;
    } else if (f == "--time-limit") {
      a.time_limit_s = static_cast<double>(to_u64(f, value()));
    } else if (f == "--per-run") {
      a.per_run = true;
    } else if (f == "--progress") {
      a.progress = to_u64(f, value());
    } else if (f == "--help" || f == "-h") {
      usage("etlc-sim: deterministic simulation of etl-coordination under faults");
    } else {
      usage("unknown argument " + f);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace etlc::sim;
  const Args args = parse(argc, argv);
  try {
    (void)make_params(args.from, args.scenario, args.faults);  // validate before running
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }

  const auto start = std::chrono::steady_clock::now();
  std::uint64_t runs = 0, failures = 0;
  double virtual_s = 0, sim_real_s = 0;
  std::map<std::string, std::uint64_t> per_scenario;
  std::map<int, std::uint64_t> per_invariant;
  std::vector<std::string> failed;
  RunStats total;
  double completion_s = 0;  // the completion phase, summed over the runs that completed
  std::uint64_t completions = 0;
  HistoryStats htotal;
  SinkStats stotal;
  for (std::uint64_t k = 0; k < args.seeds; ++k) {
    const std::uint64_t seed = args.from + k;
    const RunParams params = make_params(seed, args.scenario, args.faults);
    RunOptions opts;
    opts.keep_full_trace = args.trace;
    const RunResult r = run_simulation(params, opts);
    ++runs;
    ++per_scenario[params.scenario];
    virtual_s += static_cast<double>(r.virtual_ns) / 1e9;
    sim_real_s += r.real_s;
    total.steps += r.stats.steps;
    total.calls += r.stats.calls;
    total.crashes += r.stats.crashes;
    total.pauses += r.stats.pauses;
    total.zombie_commits += r.stats.zombie_commits;
    total.leader_crashes += r.stats.leader_crashes;
    total.mid_plan += r.stats.mid_plan;
    total.mid_publish += r.stats.mid_publish;
    total.partitions += r.stats.partitions;
    total.watch_drops += r.stats.watch_drops;
    total.slow_watches += r.stats.slow_watches;
    total.stale_episodes += r.stats.stale_episodes;
    total.late_writes += r.stats.late_writes;
    total.planner_failures += r.stats.planner_failures;
    total.fenced += r.stats.fenced;
    total.fatal += r.stats.fatal;
    total.revokes += r.stats.revokes;
    total.revokes_late += r.stats.revokes_late;
    total.revokes_nearly_done += r.stats.revokes_nearly_done;
    total.revokes_late_to_faster += r.stats.revokes_late_to_faster;
    if (r.stats.completed_after >= 0) {
      completion_s += static_cast<double>(r.stats.completed_after) / 1e9;
      ++completions;
    }
    total.stale_grants += r.stats.stale_grants;
    total.stale_anomalies += r.stats.stale_anomalies;
    total.split_requests += r.stats.split_requests;
    total.cuts_refused += r.stats.cuts_refused;
    total.cuts_made += r.stats.cuts_made;
    total.cut_crashes += r.stats.cut_crashes;
    htotal.cuts += r.history.cuts;
    htotal.flips += r.history.flips;
    htotal.orphans += r.history.orphans;
    htotal.claims_takeover += r.history.claims_takeover;
    htotal.claims_reclaim += r.history.claims_reclaim;
    htotal.claims_without_lease += r.history.claims_without_lease;
    htotal.quarantines += r.history.quarantines;
    htotal.expiries += r.history.expiries;
    htotal.duplicates += r.history.duplicates;
    htotal.emitted += r.history.emitted;
    htotal.stale_misreports += r.history.stale_misreports;
    htotal.operator_writes += r.history.operator_writes;
    htotal.rebuilds += r.history.rebuilds;
    htotal.parked += r.history.parked;
    htotal.requeued += r.history.requeued;
    stotal.opens += r.sink.opens;
    stotal.writes += r.sink.writes;
    stotal.records += r.sink.records;
    stotal.refused += r.sink.refused;
    stotal.failed += r.sink.failed;
    stotal.unknown += r.sink.unknown;
    stotal.late += r.sink.late;
    stotal.settled_landed += r.sink.settled_landed;
    stotal.sink_resumes += r.sink.sink_resumes;
    stotal.lapsed_lanes += r.sink.lapsed_lanes;
    stotal.zombie_refusals += r.sink.zombie_refusals;
    if (args.trace) {
      for (const auto& rec : r.full) std::printf("%s\n", Trace::format(rec, r.actors).c_str());
      std::printf("trace hash %016llx, %llu events\n",
                  static_cast<unsigned long long>(r.trace_hash),
                  static_cast<unsigned long long>(r.trace_events));
    }
    if (args.per_run) {
      std::printf(
          "run seed=%llu scenario=%s ok=%d virtual_s=%.1f real_ms=%.1f members=%d splits=%zu "
          "steps=%llu crashes=%llu pauses=%llu takeovers=%llu quarantines=%llu "
          "claims_without_lease=%llu stale_grants=%llu revokes=%llu revokes_late=%llu "
          "revokes_late_to_faster=%llu revokes_nearly_done=%llu completion_s=%.1f cuts=%llu "
          "orphans=%llu cut_crashes=%llu\n",
          static_cast<unsigned long long>(seed), params.scenario.c_str(), r.ok() ? 1 : 0,
          static_cast<double>(r.virtual_ns) / 1e9, r.real_s * 1e3, params.members,
          params.records.size(), static_cast<unsigned long long>(r.stats.steps),
          static_cast<unsigned long long>(r.stats.crashes),
          static_cast<unsigned long long>(r.stats.pauses),
          static_cast<unsigned long long>(r.history.claims_takeover),
          static_cast<unsigned long long>(r.history.quarantines),
          static_cast<unsigned long long>(r.history.claims_without_lease),
          static_cast<unsigned long long>(r.stats.stale_grants),
          static_cast<unsigned long long>(r.stats.revokes),
          static_cast<unsigned long long>(r.stats.revokes_late),
          static_cast<unsigned long long>(r.stats.revokes_late_to_faster),
          static_cast<unsigned long long>(r.stats.revokes_nearly_done),
          static_cast<double>(r.stats.completed_after) / 1e9,
          static_cast<unsigned long long>(r.history.cuts),
          static_cast<unsigned long long>(r.history.orphans),
          static_cast<unsigned long long>(r.stats.cut_crashes));
    }
    if (!r.ok()) {
      ++failures;
      ++per_invariant[r.violation->invariant];
      failed.push_back(fmt::format("{}:{}:inv{}", seed, params.scenario, r.violation->invariant));
      std::printf("%s\n", r.report().c_str());
      std::fflush(stdout);
      if (args.stop_on_failure) break;
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (args.progress > 0 && runs % args.progress == 0) {
      std::printf("progress: %llu runs (seeds %llu..%llu), %llu failures, %.1f runs/s, %.0fx\n",
                  static_cast<unsigned long long>(runs), static_cast<unsigned long long>(args.from),
                  static_cast<unsigned long long>(seed), static_cast<unsigned long long>(failures),
                  static_cast<double>(runs) / elapsed, virtual_s / elapsed);
      std::fflush(stdout);
    }
    if (args.time_limit_s > 0 && elapsed > args.time_limit_s) {
      std::printf("time limit reached after seed %llu\n", static_cast<unsigned long long>(seed));
      break;
    }
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("runs %llu (seeds %llu..%llu), failures %llu\n",
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(args.from),
              static_cast<unsigned long long>(args.from + runs - 1),
              static_cast<unsigned long long>(failures));
  std::printf("wall %.1f s, %.2f runs/s, virtual %.0f s, virtual/real %.0fx\n", elapsed,
              static_cast<double>(runs) / elapsed, virtual_s, virtual_s / elapsed);
  std::string mix;
  for (const auto& [name, n] : per_scenario) mix += fmt::format(" {}={}", name, n);
  std::printf("scenarios:%s\n", mix.c_str());
  fmt::print(
      "exercised: {} steps, {} user calls, {} crashes, {} pauses ({} zombie commits), {} leader "
      "crashes ({} mid-plan, {} mid-publish), {} partitions, {} watch drops, {} slow-watch and {} "
      "stale-read episodes, {} late writes, {} planner failures, {} fenced calls, {} revocations, "
      "{} takeovers, {} reclaims, {} quarantines, {} peer expiries, {} claims without a lease, {} "
      "stale grants, {} stale-read UsageErrors, {} stale-read misreported outcomes, {} duplicate "
      "records of {} emitted, {} fatal\n",
      total.steps, total.calls, total.crashes, total.pauses, total.zombie_commits,
      total.leader_crashes, total.mid_plan, total.mid_publish, total.partitions, total.watch_drops,
      total.slow_watches, total.stale_episodes, total.late_writes, total.planner_failures,
      total.fenced, total.revokes, htotal.claims_takeover, htotal.claims_reclaim,
      htotal.quarantines, htotal.expiries, htotal.claims_without_lease, total.stale_grants,
      total.stale_anomalies, htotal.stale_misreports, htotal.duplicates, htotal.emitted,
      total.fatal);
  fmt::print(
      "tail: {} revocations once 80 % of a job was durable ({} to a faster member), {} of splits "
      "90 % done; completion phase {:.1f} s on average over {} runs\n",
      total.revokes_late, total.revokes_late_to_faster, total.revokes_nearly_done,
      completions == 0 ? 0.0 : completion_s / static_cast<double>(completions), completions);
  fmt::print(
      "splitting: {} split requests to lanes, {} refused, {} cuts made, {} landed (parents naming "
      "a residual), {} residuals made runnable, {} orphans deleted, {} crashes mid-cut\n",
      total.split_requests, total.cuts_refused, total.cuts_made, htotal.cuts, htotal.flips,
      htotal.orphans, total.cut_crashes);
  fmt::print(
      "operator: {} records damaged, {} split records rebuilt, {} splits parked for their spec, "
      "{} requeued\n",
      htotal.operator_writes, htotal.rebuilds, htotal.parked, htotal.requeued);
  fmt::print(
      "sink: {} opens, {} transactions writing {} records, {} refused by the fence ({} lanes then "
      "fenced by the store), {} failed and {} unknown-outcome transactions ({} landing late, {} "
      "found landed), {} grants resumed from the sink's watermark, {} lanes stopped after a "
      "session lapse\n",
      stotal.opens, stotal.writes, stotal.records, stotal.refused, stotal.zombie_refusals,
      stotal.failed, stotal.unknown, stotal.late, stotal.settled_landed, stotal.sink_resumes,
      stotal.lapsed_lanes);
  std::fflush(stdout);
  if (!failed.empty()) {
    std::string list;
    for (const auto& f : failed) list += " " + f;
    std::printf("failed seeds (seed:scenario:invariant):%s\n", list.c_str());
    std::string inv;
    for (const auto& [i, n] : per_invariant) inv += fmt::format(" inv{}={}", i, n);
    std::printf("by invariant:%s\n", inv.c_str());
  }
  return failures == 0 ? 0 : 1;
}
