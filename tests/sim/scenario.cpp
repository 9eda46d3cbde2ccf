#include "scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "rng.hpp"

namespace etlc::sim {

namespace {

struct Named {
  std::string name;
  FaultRates rates;
};

const std::vector<Named>& table() {
  static const std::vector<Named> kTable = [] {
    std::vector<Named> t;
    auto add = [&](std::string name, auto&& set) {
      FaultRates r;
      set(r);
      t.push_back(Named{std::move(name), r});
    };
    add("calm", [](FaultRates&) {});
    add("crash", [](FaultRates& r) {
      r.crash_per_s = 0.15;
      r.leader_crash_per_s = 0.03;
    });
    add("pause", [](FaultRates& r) { r.pause_per_s = 0.12; });
    add("store", [](FaultRates& r) {
      r.op_fail = 0.02;
      r.op_unknown = 0.02;
      r.partition_per_s = 0.04;
      r.sink_fail = 0.02;
      r.sink_unknown = 0.02;
    });
    add("watch", [](FaultRates& r) {
      r.watch_delay_per_s = 0.15;
      r.watch_drop_per_s = 0.06;
    });
    add("stale", [](FaultRates& r) { r.stale_per_s = 0.15; });
    add("leader", [](FaultRates& r) {
      r.leader_crash_per_s = 0.1;
      r.planner_fail = 0.3;
    });
    add("skew", [](FaultRates& r) {
      r.skew_ppm = 30'000;
      r.pause_per_s = 0.03;
      r.partition_per_s = 0.03;
    });
    add("open", [](FaultRates& r) {
      r.grow = true;
      r.crash_per_s = 0.05;
      r.planner_fail = 0.1;
    });
    add("poison", [](FaultRates& r) {
      r.poison = true;
      r.crash_per_s = 0.05;
      r.pause_per_s = 0.03;
    });
    add("chaos", [](FaultRates& r) {
      r.crash_per_s = 0.06;
      r.pause_per_s = 0.05;
      r.leader_crash_per_s = 0.03;
      r.partition_per_s = 0.02;
      r.watch_drop_per_s = 0.03;
      r.watch_delay_per_s = 0.06;
      r.stale_per_s = 0.04;
      r.op_fail = 0.01;
      r.op_unknown = 0.01;
      r.sink_fail = 0.01;
      r.sink_unknown = 0.01;
      r.planner_fail = 0.1;
      r.skew_ppm = 10'000;
      r.grow = false;
      r.poison = true;
      r.operator_per_s = 0.02;
    });
    // Records damaged from outside, on top of a few crashes, pauses and store failures.
    add("operator", [](FaultRates& r) {
      r.operator_per_s = 0.3;
      r.crash_per_s = 0.03;
      r.pause_per_s = 0.03;
      r.partition_per_s = 0.02;
      r.op_fail = 0.005;
    });
    // A job of a single member: nobody else can clean up after its outages.
    add("lone", [](FaultRates& r) {
      r.partition_per_s = 0.12;
      r.pause_per_s = 0.04;
      r.crash_per_s = 0.03;
      r.op_fail = 0.01;
      r.operator_per_s = 0.05;
    });
    // A skewed job (a few splits four times the rest) on members of uneven speed, with a short
    // fault phase of rare crashes: how often the tail of the job moves work (issue 16).
    add("tail", [](FaultRates& r) {
      r.tail = true;
      r.crash_per_s = 0.02;
    });
    // One split ten to twenty times the rest, on a fleet whose lanes cut their range when asked
    // (issue 17), with crashes, pauses and store faults through the fault phase.
    add("straggler", [](FaultRates& r) {
      r.straggler = true;
      r.split = FaultRates::Split::on;
      r.crash_per_s = 0.03;
      r.pause_per_s = 0.03;
      r.op_unknown = 0.005;
      r.sink_unknown = 0.005;
    });
    // Not in `all`: the zombie-heavy mix the checker-must-fail test runs with the fence off.
    add("zombie", [](FaultRates& r) { r.pause_per_s = 0.4; });
    // Splitting on at random wherever faults are injected (not `calm` or `tail`, whose figures
    // docs/performance.md quotes).
    for (Named& n : t) {
      if (n.name != "calm" && n.name != "tail" && n.name != "straggler" && n.name != "zombie") {
        n.rates.split = FaultRates::Split::random;
      }
    }
    return t;
  }();
  return kTable;
}

double parse_double(std::string_view name, std::string_view value) {
  try {
    std::size_t used = 0;
    const std::string s(value);
    const double d = std::stod(s, &used);
    if (used != s.size() || d < 0) throw std::invalid_argument("bad");
    return d;
  } catch (const std::exception&) {
    throw std::invalid_argument(
        fmt::format("--faults: '{}' needs a non-negative number, got '{}'", name, value));
  }
}

bool parse_bool(std::string_view name, std::string_view value) {
  if (value == "1" || value == "true" || value == "on") return true;
  if (value == "0" || value == "false" || value == "off") return false;
  throw std::invalid_argument(fmt::format("--faults: '{}' needs 0 or 1, got '{}'", name, value));
}

}  // namespace

const std::vector<std::string>& scenario_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> n;
    for (const auto& e : table()) {
      if (e.name != "zombie") n.push_back(e.name);
    }
    return n;
  }();
  return kNames;
}

std::optional<FaultRates> scenario_rates(std::string_view name) {
  for (const auto& e : table()) {
    if (e.name == name) return e.rates;
  }
  return std::nullopt;
}

ShapeOverrides parse_overrides(std::string_view text, FaultRates& r) {
  ShapeOverrides shape;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw std::invalid_argument(fmt::format("--faults: '{}' is not name=value", item));
    }
    const std::string_view name = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (name == "crash") {
      r.crash_per_s = parse_double(name, value);
    } else if (name == "restart_same_id") {
      r.restart_same_id = std::min(1.0, parse_double(name, value));
    } else if (name == "pause") {
      r.pause_per_s = parse_double(name, value);
    } else if (name == "leader_crash") {
      r.leader_crash_per_s = parse_double(name, value);
    } else if (name == "partition") {
      r.partition_per_s = parse_double(name, value);
    } else if (name == "watch_drop") {
      r.watch_drop_per_s = parse_double(name, value);
    } else if (name == "watch_delay") {
      r.watch_delay_per_s = parse_double(name, value);
    } else if (name == "stale") {
      r.stale_per_s = parse_double(name, value);
    } else if (name == "operator") {
      r.operator_per_s = parse_double(name, value);
    } else if (name == "op_fail") {
      r.op_fail = std::min(0.5, parse_double(name, value));
    } else if (name == "op_unknown") {
      r.op_unknown = std::min(0.5, parse_double(name, value));
    } else if (name == "planner_fail") {
      r.planner_fail = std::min(0.95, parse_double(name, value));
    } else if (name == "skew_ppm") {
      r.skew_ppm = static_cast<std::int64_t>(
          std::min<double>(static_cast<double>(kMaxSkewPpm), parse_double(name, value)));
    } else if (name == "grow") {
      r.grow = parse_bool(name, value);
    } else if (name == "poison") {
      r.poison = parse_bool(name, value);
    } else if (name == "unsafe") {
      r.unsafe_commit_without_fence = parse_bool(name, value);
    } else if (name == "sink_fail") {
      r.sink_fail = std::min(0.5, parse_double(name, value));
    } else if (name == "sink_unknown") {
      r.sink_unknown = std::min(0.5, parse_double(name, value));
    } else if (name == "unsafe_sink") {
      r.unsafe_sink_without_fence = parse_bool(name, value);
    } else if (name == "unsafe_lapse") {
      r.unsafe_ignore_lapse = parse_bool(name, value);
    } else if (name == "report_done") {
      r.report_done = parse_bool(name, value);
    } else if (name == "remaining_work") {
      r.remaining_work = parse_bool(name, value);
    } else if (name == "damping_ppm") {
      r.damping_ppm = static_cast<std::int64_t>(std::min(1e6, parse_double(name, value)));
    } else if (name == "pin_ppm") {
      r.pin_ppm = static_cast<std::int64_t>(std::min(1e6, parse_double(name, value)));
    } else if (name == "cooldown_ms") {
      r.cooldown_ms = static_cast<std::int64_t>(std::min(3.6e6, parse_double(name, value)));
    } else if (name == "even_pace") {
      r.even_pace = parse_bool(name, value);
    } else if (name == "pace") {
      r.pace = parse_bool(name, value);
    } else if (name == "pace_gain_ppm") {
      r.pace_gain_ppm = static_cast<std::int64_t>(std::min(1e7, parse_double(name, value)));
    } else if (name == "split") {
      r.split = parse_bool(name, value) ? FaultRates::Split::on : FaultRates::Split::off;
    } else if (name == "split_refuse") {
      r.split_refuse = std::min(1.0, parse_double(name, value));
    } else if (name == "unsafe_cut") {
      r.unsafe_cut_below_emitted = parse_bool(name, value);
    } else if (name == "members") {
      shape.members = std::clamp(static_cast<int>(parse_double(name, value)), 1, 12);
    } else if (name == "splits") {
      shape.splits =
          std::clamp<std::size_t>(static_cast<std::size_t>(parse_double(name, value)), 1, 2000);
    } else if (name == "fault_s") {
      shape.fault_s = std::min(3600.0, parse_double(name, value));
    } else {
      throw std::invalid_argument(fmt::format(
          "--faults: unknown name '{}' (crash, restart_same_id, pause, leader_crash, partition, "
          "watch_drop, watch_delay, stale, operator, op_fail, op_unknown, planner_fail, skew_ppm, "
          "grow, poison, unsafe, sink_fail, sink_unknown, unsafe_sink, unsafe_lapse, report_done, "
          "remaining_work, damping_ppm, pin_ppm, cooldown_ms, pace, pace_gain_ppm, even_pace, "
          "split, split_refuse, unsafe_cut, members, splits, fault_s)",
          name));
    }
  }
  return shape;
}

RunParams make_params(std::uint64_t seed, std::string_view scenario, std::string_view overrides) {
  RunParams p;
  p.seed = seed;
  p.overrides = std::string(overrides);
  Rng rng = Rng::stream(seed, 0);  // the shape stream: independent of everything a run draws
  std::string name(scenario);
  // Drawn whatever the scenario, so that replaying a run of `all` under its resolved name draws
  // the very same shape.
  const auto& names = scenario_names();
  const std::uint64_t pick = rng.below(names.size());
  if (name == "all") name = names[pick];
  auto rates = scenario_rates(name);
  if (!rates) throw std::invalid_argument(fmt::format("unknown scenario '{}'", scenario));
  p.scenario = name;
  p.faults = *rates;
  const ShapeOverrides shape = parse_overrides(overrides, p.faults);

  // Fleet: mostly small (cheap and contended), sometimes up to 12.
  const std::uint64_t size_roll = rng.below(10);
  p.members = size_roll < 6   ? static_cast<int>(rng.range(2, 5))
              : size_roll < 9 ? static_cast<int>(rng.range(6, 8))
                              : static_cast<int>(rng.range(9, 12));
  if (name == "lone") p.members = 1;
  if (shape.members) p.members = *shape.members;
  for (int i = 0; i < p.members; ++i) {
    p.max_in_flight.push_back(static_cast<std::uint32_t>(rng.range(1, 5)));
  }
  if (p.faults.tail) {  // uneven speeds: some members take up to four times as long per record
    static const std::uint32_t kPaces[] = {100, 100, 150, 250, 400};
    for (int i = 0; i < p.members; ++i) {
      const std::uint32_t pace = kPaces[rng.below(5)];  // drawn either way: same seeds, same jobs
      p.pace_pct.push_back(p.faults.even_pace ? 100 : pace);
    }
  }
  static const std::int64_t kLeases[] = {1500, 2000, 3000};
  p.lease_ms = kLeases[rng.below(3)];
  static const std::int64_t kTimeoutDiv[] = {6, 4, 3};
  p.op_timeout_ms = p.lease_ms / kTimeoutDiv[rng.below(3)];
  static const std::int64_t kDelays[] = {0, 0, 300, 1000, 2500};
  p.rebalance_delay_ms = kDelays[rng.below(5)];
  p.drain_deadline_ms = rng.range(p.op_timeout_ms, 2 * p.lease_ms);
  p.max_attempts = static_cast<std::uint32_t>(rng.range(2, 4));
  static const std::int64_t kIntervals[] = {0, 0, 50, 200};
  p.assignment_interval_ms = kIntervals[rng.below(4)];
  static const std::uint32_t kBulk[] = {2, 4, 16, 512};
  p.bulk_ops_per_step = kBulk[rng.below(4)];
  p.replan_interval_ms = rng.range(500, 3000);

  // Job.
  std::size_t splits = static_cast<std::size_t>(rng.range(4, 40));
  if (shape.splits) splits = *shape.splits;
  for (std::size_t i = 0; i < splits; ++i) {
    // A few empty splits (weight 0: complete at once), mostly 10..150 records.
    p.records.push_back(rng.chance(0.03) ? 0 : static_cast<std::uint64_t>(rng.range(10, 150)));
    if (p.faults.tail && rng.chance(0.2)) p.records.back() *= 4;  // the skew
  }
  if (p.faults.straggler) {  // drawn only here: the other mixes keep their shapes
    const std::size_t big = static_cast<std::size_t>(rng.below(splits));
    p.records[big] = std::max<std::uint64_t>(p.records[big], 60) * rng.range(10, 20);
  }
  if (p.faults.poison) {
    const std::size_t n = static_cast<std::size_t>(
        rng.range(1, std::min<std::int64_t>(3, static_cast<std::int64_t>(splits / 4 + 1))));
    while (p.poison.size() < n) p.poison.insert(static_cast<std::size_t>(rng.below(splits)));
  }
  if (p.faults.grow) {
    p.shape = rng.chance(0.5) ? PlanShape::open_grows_then_final : PlanShape::open_grows_forever;
    p.initial_splits = splits / 4 + 1;
    p.growth = static_cast<std::size_t>(rng.range(1, 4));
  }
  p.lane_min_pause = rng.range(50, 150) * kNsPerMs;
  p.lane_max_pause = rng.range(300, 800) * kNsPerMs;
  p.lane_max_batch = rng.range(1, 4);
  p.fault_phase = rng.range(10, 35) * kNsPerS;
  if (p.faults.tail) p.fault_phase = rng.range(1, 3) * kNsPerS;  // the job runs to its end after
  if (p.faults.straggler) p.fault_phase = rng.range(3, 10) * kNsPerS;
  if (shape.fault_s) p.fault_phase = static_cast<VirtualNs>(*shape.fault_s * 1e9);
  p.split = p.faults.split == FaultRates::Split::on ||
            (p.faults.split == FaultRates::Split::random && Rng::stream(seed, 6).chance(0.5));

  // Liveness bounds, from the work left: a lane needs about one pause per batch of records, the
  // fleet runs at most min(lanes, splits) lanes, and the longest split bounds the critical path.
  // Three times that, plus a minute for leases, delays, drains and planner backoff (<= 30 s).
  const double per_record_ns = static_cast<double>(p.lane_min_pause + p.lane_max_pause) / 2 /
                               (static_cast<double>(1 + p.lane_max_batch) / 2);
  std::uint64_t total = 0, longest = 0, lanes = 0;
  for (std::uint64_t r : p.records) {
    total += r;
    longest = std::max(longest, r);
  }
  for (std::uint32_t m : p.max_in_flight) lanes += m;
  lanes = std::max<std::uint64_t>(1, std::min<std::uint64_t>(lanes, p.records.size()));
  std::uint32_t slowest = 100;
  for (std::uint32_t pace : p.pace_pct) slowest = std::max(slowest, pace);
  const double work_ns =
      per_record_ns * slowest / 100 *
      (static_cast<double>(total) / static_cast<double>(lanes) + static_cast<double>(longest));
  VirtualNs growth_ns = 0;
  if (p.faults.grow) {
    growth_ns = static_cast<VirtualNs>(splits / std::max<std::size_t>(1, p.growth) + 2) *
                p.replan_interval_ms * kNsPerMs;
  }
  p.converge_bound = 60 * kNsPerS + growth_ns;
  p.complete_bound = 60 * kNsPerS + growth_ns + static_cast<VirtualNs>(3 * work_ns);
  return p;
}

std::string replay_command(const RunParams& p) {
  std::string cmd = fmt::format("etlc-sim --seeds 1 --from {} --scenario {}", p.seed, p.scenario);
  if (!p.overrides.empty()) cmd += fmt::format(" --faults '{}'", p.overrides);
  return cmd + " --trace";
}

}  // namespace etlc::sim
