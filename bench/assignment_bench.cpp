// desired_assignment at 10^3 x 10 ... 10^6 x 10^4 (splits x members), cold / warm / join / leave,
// with Pareto (Zipf-like) weights, and warm / join with every split under way (the pace rule); and,
// in the same run, the straightforward reference improve pass (global best move per step, <= 4,096
// moves) on the same inputs, as long as it finishes within its deadline. Prints Google Benchmark's
// table, then a side-by-side comparison.
//
//   assignment_bench [--benchmark_filter=...]   ETLC_BENCH_REF_DEADLINE_S (default 60)
//                                                ETLC_BENCH_MAX_SPLITS (default 1000000)
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/assignment.hpp"
#include "core/assignment_passes.hpp"
#include "reference_improve.hpp"

namespace {

using etlc::core::Assignment;
using etlc::core::AssignmentInput;
using etlc::core::kNoMember;
using SteadyClock = std::chrono::steady_clock;

struct Scale {
  std::size_t splits;
  std::size_t members;
};
constexpr Scale kScales[] = {{1000, 10}, {10000, 100}, {100000, 1000}, {1000000, 10000}};
constexpr const char* kScenarios[] = {"cold", "warm", "join", "leave"};
// The pace rule's cost (no reference: it knows no paces): every split under way.
constexpr const char* kPacedScenarios[] = {"paced_mixed", "paced_join"};

// Deterministic, platform-independent PRNG (splitmix64).
struct SplitMix {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double unit() { return (static_cast<double>(next() >> 11) + 1.0) / 9007199254740993.0; }
};

// Pareto weights (shape 1.2, minimum 1 MiB, capped at 64 GiB): a few huge splits, many small.
std::uint64_t pareto_weight(SplitMix& rng) {
  constexpr double kMin = 1024.0 * 1024.0;
  constexpr double kCap = 64.0 * 1024 * 1024 * 1024;
  const double w = kMin * std::pow(rng.unit(), -1.0 / 1.2);
  return static_cast<std::uint64_t>(std::min(w, kCap));
}

AssignmentInput cold_input(Scale sc) {
  AssignmentInput in;
  in.seed = 0x5eed;
  const auto lanes = static_cast<std::uint32_t>(2 * sc.splits / sc.members + 1);
  for (std::size_t m = 0; m < sc.members; ++m) {
    in.members.push_back({fmt::format("member-{:05}", m), lanes});
  }
  SplitMix rng{42};
  in.splits.reserve(sc.splits);
  for (std::size_t j = 0; j < sc.splits; ++j) {
    etlc::core::AssignSplit s;
    s.id = fmt::format("split-{:07}", j);
    s.weight = pareto_weight(rng);
    in.splits.push_back(std::move(s));
  }
  return in;
}

AssignmentInput settled(const AssignmentInput& cold) {
  const Assignment out = etlc::core::desired_assignment(cold);
  AssignmentInput in = cold;
  for (std::size_t m = 0; m < out.by_member.size(); ++m) {
    for (std::uint32_t j : out.by_member[m]) {
      in.splits[j].previous = in.splits[j].lease_owner = in.splits[j].record_owner =
          static_cast<std::int32_t>(m);
    }
  }
  return in;
}

AssignmentInput joined(const AssignmentInput& warm) {
  AssignmentInput in = warm;
  in.members.push_back({"member-new", warm.members.front().lanes});
  return in;
}

AssignmentInput left(const AssignmentInput& warm) {
  AssignmentInput in = warm;
  const auto gone = static_cast<std::int32_t>(in.members.size() / 2);
  in.members.erase(in.members.begin() + gone);
  auto remap = [gone](std::int32_t& who, bool& departed) {
    if (who == gone) {
      who = kNoMember;
      departed = true;
    } else if (who > gone) {
      --who;
    }
  };
  for (auto& s : in.splits) {
    remap(s.previous, s.holder_departed);
    remap(s.lease_owner, s.holder_departed);
    remap(s.record_owner, s.holder_departed);
  }
  return in;
}

// Every split under way at its holder's lane pace, half the members reading twice as fast as the
// rest: "paced_mixed" may move only from slow members to fast ones; "paced_join" adds a newcomer
// of unknown pace, which admits every split.
AssignmentInput paced(const AssignmentInput& warm) {
  AssignmentInput in = warm;
  in.pace_gain_ppm = 500'000;
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    in.members[m].lane_pace = m % 2 == 0 ? 1000 : 2000;
  }
  for (auto& s : in.splits) {
    if (s.record_owner != kNoMember) {
      s.pace = in.members[static_cast<std::size_t>(s.record_owner)].lane_pace;
    }
  }
  return in;
}

// Inputs of one scale, built on first use; the previous scale's are dropped to bound memory.
struct Inputs {
  Scale scale;
  std::map<std::string, AssignmentInput> by_scenario;
};
std::unique_ptr<Inputs> g_inputs;

const AssignmentInput& input_for(Scale sc, const std::string& scenario) {
  if (!g_inputs || g_inputs->scale.splits != sc.splits) {
    g_inputs.reset();
    auto fresh = std::make_unique<Inputs>();
    fresh->scale = sc;
    AssignmentInput cold = cold_input(sc);
    AssignmentInput warm = settled(cold);
    fresh->by_scenario["join"] = joined(warm);
    fresh->by_scenario["paced_mixed"] = paced(warm);
    fresh->by_scenario["paced_join"] = joined(fresh->by_scenario["paced_mixed"]);
    fresh->by_scenario["leave"] = left(warm);
    fresh->by_scenario["warm"] = std::move(warm);
    fresh->by_scenario["cold"] = std::move(cold);
    g_inputs = std::move(fresh);
  }
  return g_inputs->by_scenario.at(scenario);
}

struct Balance {
  double max_over_mean = 0;
  double bound = 0;  // max(heaviest split, mean) / mean: no assignment can do better
  // (heaviest member holding 2+ splits - lightest member) / mean: how far from level the
  // members that could give work away are (a giant split alone on a member is excluded).
  double spread = 0;
  long double sum_squares = 0;  // in GiB^2, to stay readable
};

Balance balance_of(const AssignmentInput& in, const Assignment& out) {
  long double total = 0;
  long double max = 0;
  long double min = -1;
  long double max_multi = 0;
  long double heaviest = 0;
  Balance b;
  for (const auto& s : in.splits) {
    heaviest = std::max(heaviest, static_cast<long double>(s.weight));
  }
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    long double load = 0;
    for (std::uint32_t j : out.by_member[m]) load += static_cast<long double>(in.splits[j].weight);
    total += load;
    max = std::max(max, load);
    min = min < 0 ? load : std::min(min, load);
    if (out.by_member[m].size() >= 2) max_multi = std::max(max_multi, load);
    const long double gib = load / (1024.0L * 1024 * 1024);
    b.sum_squares += gib * gib;
  }
  const long double mean =
      in.members.empty() ? 0 : total / static_cast<long double>(in.members.size());
  b.max_over_mean = mean > 0 ? static_cast<double>(max / mean) : 0.0;
  b.spread = mean > 0 ? static_cast<double>((max_multi - min) / mean) : 0.0;
  b.bound = mean > 0 ? static_cast<double>(std::max(heaviest, mean) / mean) : 0.0;
  return b;
}

double cpu_ms_now() {
  return 1000.0 * static_cast<double>(std::clock()) / static_cast<double>(CLOCKS_PER_SEC);
}

struct Row {
  double ours_ms = -1;
  double ours_cpu_ms = -1;
  std::uint64_t ours_moves = 0, ours_changed = 0;
  Balance ours_balance;
  bool ours_bound = false;
  double ref_ms = -1;  // < 0: not run or did not finish
  double ref_cpu_ms = -1;
  bool ref_finished = false, ref_cap_bound = false, ref_ran = false;
  std::uint64_t ref_moves = 0, ref_changed = 0;
  Balance ref_balance;
};
std::map<std::pair<std::size_t, std::string>, Row> g_rows;

double env_double(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v ? std::atof(v) : fallback;
}

void run_ours(benchmark::State& state, Scale sc, std::string scenario) {
  const AssignmentInput& in = input_for(sc, scenario);
  Assignment out;
  std::int64_t iterations = 0;
  const auto start = SteadyClock::now();
  const double cpu_start = cpu_ms_now();
  for (auto _ : state) {
    out = etlc::core::desired_assignment(in);
    benchmark::DoNotOptimize(out.by_member.data());
    ++iterations;
  }
  const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count() /
                    static_cast<double>(std::max<std::int64_t>(iterations, 1));
  Row& row = g_rows[{sc.splits, scenario}];
  row.ours_ms = ms;
  row.ours_cpu_ms =
      (cpu_ms_now() - cpu_start) / static_cast<double>(std::max<std::int64_t>(iterations, 1));
  row.ours_moves = out.stats.improving_moves;
  row.ours_changed = out.stats.changed();
  row.ours_bound = out.stats.backstop_bound;
  row.ours_balance = balance_of(in, out);
  state.counters["moves"] = static_cast<double>(out.stats.improving_moves);
  state.counters["changed"] = static_cast<double>(out.stats.changed());
  state.counters["max/mean"] = row.ours_balance.max_over_mean;
  state.counters["spread"] = row.ours_balance.spread;
}

void run_reference(benchmark::State& state, Scale sc, std::string scenario) {
  const AssignmentInput& in = input_for(sc, scenario);
  Row& row = g_rows[{sc.splits, scenario}];
  row.ref_ran = true;
  const double deadline_s = env_double("ETLC_BENCH_REF_DEADLINE_S", 60);
  for (auto _ : state) {
    const auto start = SteadyClock::now();
    const double cpu_start = cpu_ms_now();
    const auto deadline = start + std::chrono::duration_cast<SteadyClock::duration>(
                                      std::chrono::duration<double>(deadline_s));
    etlc::core::detail::WorkState st = etlc::core::detail::sticky_and_fill(in);
    st.max_improving_moves = etlc::bench::kReferenceMaxMoves;
    const etlc::bench::ReferenceOutcome outcome = etlc::bench::reference_improve(st, deadline);
    if (!outcome.finished) {
      row.ref_finished = false;
      state.SkipWithError("reference did not finish before its deadline");
      break;
    }
    const Assignment out = etlc::core::detail::finish(st);
    row.ref_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
    row.ref_cpu_ms = cpu_ms_now() - cpu_start;
    row.ref_finished = true;
    row.ref_cap_bound = outcome.cap_bound;
    row.ref_moves = outcome.moves;
    row.ref_changed = out.stats.changed();
    row.ref_balance = balance_of(in, out);
    state.counters["moves"] = static_cast<double>(outcome.moves);
    state.counters["max/mean"] = row.ref_balance.max_over_mean;
    state.counters["spread"] = row.ref_balance.spread;
  }
}

std::string balance_text(const Balance& b) {
  return fmt::format("{:.4f} ({:.4f})", b.max_over_mean, b.spread);
}

void print_comparison() {
  fmt::print(
      "\nside by side: wall ms (cpu ms) per computation; moves = improve-pass moves; changed = "
      "splits whose assignee changed; max/mean = heaviest member over the mean load "
      "(spread = heaviest member with 2+ splits minus the lightest, over the mean); bound = the "
      "max/mean the heaviest split alone forces; ssq = sum of squared "
      "loads in GiB^2\n");
  fmt::print(
      "{:>8} {:>6} {:>5} {:>8} | {:>20} {:>6} {:>8} {:>17} {:>12} | {:>22} {:>6} {:>8} "
      "{:>17} {:>12} | {:>9}\n",
      "splits", "members", "case", "bound", "ours ms (cpu)", "moves", "changed",
      "max/mean (spread)", "ssq", "reference ms (cpu)", "moves", "changed", "max/mean (spread)",
      "ssq", "ref/ours");
  for (const auto& [key, row] : g_rows) {
    std::size_t members = 0;
    for (const Scale& s : kScales) {
      if (s.splits == key.first) members = s.members;
    }
    std::string ref_ms = row.ref_ran ? "DNF" : "not run";
    std::string ratio = "-";
    std::string ref_moves = "-", ref_changed = "-", ref_balance = "-", ref_ssq = "-";
    if (row.ref_finished) {
      ref_ms = fmt::format("{:.2f} ({:.2f}){}", row.ref_ms, row.ref_cpu_ms,
                           row.ref_cap_bound ? "*" : "");
      if (row.ours_cpu_ms > 0) ratio = fmt::format("{:.1f}x", row.ref_cpu_ms / row.ours_cpu_ms);
      ref_moves = fmt::format("{}", row.ref_moves);
      ref_changed = fmt::format("{}", row.ref_changed);
      ref_balance = balance_text(row.ref_balance);
      ref_ssq = fmt::format("{:.6Lg}", row.ref_balance.sum_squares);
    }
    fmt::print(
        "{:>8} {:>6} {:>5} {:>8.4f} | {:>20} {:>6} {:>8} {:>17} {:>12.6Lg} | {:>22} "
        "{:>6} {:>8} {:>17} {:>12} | {:>9}\n",
        key.first, members, key.second, row.ours_balance.bound,
        fmt::format("{:.2f} ({:.2f})", row.ours_ms, row.ours_cpu_ms), row.ours_moves,
        row.ours_changed, balance_text(row.ours_balance), row.ours_balance.sum_squares, ref_ms,
        ref_moves, ref_changed, ref_balance, ref_ssq, ratio);
    if (row.ours_bound) fmt::print("   ^ our backstop bound: result not locally optimal\n");
  }
  fmt::print(
      "ratio = reference cpu / ours cpu. * = the reference stopped at its {}-move cap with an "
      "admitted move left; DNF = it did not finish within ETLC_BENCH_REF_DEADLINE_S\n",
      etlc::bench::kReferenceMaxMoves);
}

}  // namespace

int main(int argc, char** argv) {
  const double max_splits = env_double("ETLC_BENCH_MAX_SPLITS", 1e6);
  for (const Scale& sc : kScales) {
    if (static_cast<double>(sc.splits) > max_splits) continue;
    for (const char* scenario : kScenarios) {
      const std::string name = fmt::format("assignment/{}x{}/{}", sc.splits, sc.members, scenario);
      benchmark::RegisterBenchmark(name.c_str(), run_ours, sc, std::string(scenario))
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5);
    }
    for (const char* scenario : kPacedScenarios) {
      const std::string name = fmt::format("assignment/{}x{}/{}", sc.splits, sc.members, scenario);
      benchmark::RegisterBenchmark(name.c_str(), run_ours, sc, std::string(scenario))
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5);
    }
    for (const char* scenario : kScenarios) {
      const std::string name = fmt::format("reference/{}x{}/{}", sc.splits, sc.members, scenario);
      benchmark::RegisterBenchmark(name.c_str(), run_reference, sc, std::string(scenario))
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_comparison();
  return 0;
}
