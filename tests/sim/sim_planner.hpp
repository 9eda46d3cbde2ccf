// The simulated job's planner: split i is "s%04d" with a descriptor naming its record count and
// that count as its weight. A final plan lists every split at once; a growing plan lists a few
// more on every re-plan (its cursor is how many it listed) and may turn final once it has listed
// them all. While faults are on, plan() throws at the scenario's planner failure rate.
//
// plan() runs inline on the leader's control loop (the simulator leaves Member's plan runner
// null), so its draws from the fault stream are part of the deterministic run.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "core/protocol_assert.hpp"
#include "etlc/planner.hpp"
#include "history.hpp"
#include "rng.hpp"
#include "scenario.hpp"
#include "trace.hpp"

namespace etlc::sim {

class SimPlanner final : public Planner {
 public:
  SimPlanner(const RunParams& params, Rng& rng, const bool& faults_on, Trace& trace,
             const VirtualTime& time)
      : params_(params), rng_(rng), faults_on_(faults_on), trace_(trace), time_(time) {}

  std::string fingerprint() const override { return "sim-job"; }

  Plan plan(const PlanContext& ctx) override {
    ++calls;
    ETLC_ASSERT(!assert_on_first_call || calls > 1, "planner call {} of term {} (a test)", calls,
                ctx.term);
    if (faults_on_ && rng_.chance(params_.faults.planner_fail)) {
      ++failures;
      trace_.add(time_.now(), TraceKind::fault, -1, "planner-failure",
                 static_cast<std::int64_t>(ctx.term));
      throw std::runtime_error("planner failure (simulated)");
    }
    const std::size_t total = params_.records.size();
    std::size_t listed = total;
    Plan p;
    p.finality = PlanFinality::final;
    if (params_.shape != PlanShape::final_plan) {
      std::size_t before = 0;
      if (ctx.cursor) before = static_cast<std::size_t>(std::stoull(*ctx.cursor));
      listed = before == 0 ? params_.initial_splits : before + params_.growth;
      if (listed > total) listed = total;
      p.cursor = std::to_string(listed);
      const bool all = listed == total;
      p.finality = all && params_.shape == PlanShape::open_grows_then_final ? PlanFinality::final
                                                                            : PlanFinality::open;
    }
    p.splits.reserve(listed);
    for (std::size_t i = 0; i < listed; ++i) {
      SplitSpec spec{History::split_id(i), std::to_string(params_.records[i]), params_.records[i]};
      p.splits.push_back(PlannedSplit{std::move(spec), std::nullopt});
    }
    trace_.add(time_.now(), TraceKind::note, -1,
               fmt::format("planned {} splits ({})", listed,
                           p.finality == PlanFinality::final ? "final" : "open"),
               static_cast<std::int64_t>(ctx.term));
    return p;
  }

  std::uint64_t calls = 0;
  bool assert_on_first_call = false;  // RunOptions::assert_in_planner
  std::uint64_t failures = 0;

 private:
  const RunParams& params_;
  Rng& rng_;
  const bool& faults_on_;
  Trace& trace_;
  const VirtualTime& time_;
};

}  // namespace etlc::sim
