// coordinator_config_from_env (etlc/env_config.hpp); the NATS part is store/nats/nats_env.cpp.
#include <fmt/format.h>
#include <unistd.h>

#include <array>

#include "env_reader.hpp"
#include "etlc/env_config.hpp"

namespace etlc {

namespace env {

// Applies identity and knobs onto `c` (not validated yet).
void read_coordinator(EnvReader& r, CoordinatorConfig& c) {
  using std::chrono::milliseconds;
  if (auto v = r.text("ETLC_INSTANCE_ID", "instance_id")) {
    c.instance_id = *v;
  } else if (auto p = r.text("POD_NAME", "instance_id")) {
    c.instance_id = *p;
  } else if (c.instance_id.empty()) {
    std::array<char, 256> host{};
    if (gethostname(host.data(), host.size() - 1) == 0 && host[0] != '\0') {
      c.instance_id = host.data();
      r.note("the host name", "instance_id", fmt::format("the host name '{}'", c.instance_id));
    }
  }
  auto ms = [&](std::string_view var, std::string_view field, milliseconds& out) {
    if (auto v = r.int64(var, field)) out = milliseconds(*v);
  };
  ms("ETLC_LEASE_MS", "lease_duration", c.lease_duration);
  ms("ETLC_REBALANCE_DELAY_MS", "rebalance_delay", c.rebalance_delay);
  ms("ETLC_DRAIN_DEADLINE_MS", "drain_deadline", c.drain_deadline);
  ms("ETLC_OP_TIMEOUT_MS", "op_timeout", c.op_timeout);
  ms("ETLC_REPLAN_INTERVAL_MS", "replan_interval", c.replan_interval);
  ms("ETLC_ASSIGNMENT_INTERVAL_MS", "assignment_interval", c.assignment_interval);
  ms("ETLC_STARTUP_WAIT_MS", "startup_wait", c.startup_wait);
  ms("ETLC_PROGRESS_INTERVAL_MS", "progress_interval", c.progress_interval);
  ms("ETLC_REBALANCE_COOLDOWN_MS", "rebalance_cooldown", c.rebalance_cooldown);
  if (auto v = r.boolean("ETLC_BALANCE_ON_REMAINING_WORK", "balance_on_remaining_work")) {
    c.balance_on_remaining_work = *v;
  }
  if (auto v = r.u32("ETLC_PIN_REMAINING_PPM", "pin_remaining_ppm")) c.pin_remaining_ppm = *v;
  if (auto v = r.boolean("ETLC_BALANCE_BY_PACE", "balance_by_pace")) c.balance_by_pace = *v;
  if (auto v = r.u32("ETLC_PACE_GAIN_PPM", "pace_gain_ppm")) c.pace_gain_ppm = *v;
  if (auto v = r.boolean("ETLC_DYNAMIC_SPLITTING", "dynamic_splitting")) c.dynamic_splitting = *v;
  if (auto v = r.u64("ETLC_MIN_RESIDUAL_WEIGHT", "min_residual_weight")) {
    c.min_residual_weight = *v;
  }
  if (auto v = r.u32("ETLC_MAX_CHILDREN_PER_SPLIT", "max_children_per_split")) {
    c.max_children_per_split = *v;
  }
  if (auto v = r.u64("ETLC_MAX_DYNAMIC_SPLITS", "max_dynamic_splits")) c.max_dynamic_splits = *v;
  ms("ETLC_SPLIT_REQUEST_TIMEOUT_MS", "split_request_timeout", c.split_request_timeout);
  if (auto v = r.u64("ETLC_DAMPING_WEIGHT", "damping_weight")) c.damping_weight = *v;
  if (auto v = r.u32("ETLC_DAMPING_PPM_OF_MEAN", "damping_ppm_of_mean")) {
    c.damping_ppm_of_mean = *v;
  }
  if (auto v = r.u32("ETLC_MAX_IN_FLIGHT", "max_in_flight")) c.max_in_flight = *v;
  if (auto v = r.u32("ETLC_MAX_ATTEMPTS", "max_attempts")) c.max_attempts = *v;
  if (auto v = r.u32("ETLC_BULK_OPS_PER_STEP", "bulk_ops_per_step")) c.bulk_ops_per_step = *v;
  if (auto v = r.u32("ETLC_MAX_PLANNER_FAILURES", "max_planner_failures")) {
    c.max_planner_failures = *v;
  }
}

void validate_coordinator(const EnvReader& r, const CoordinatorConfig& c) {
  try {
    c.validate();
  } catch (const ConfigError& e) {
    r.rethrow(e);
  }
}

}  // namespace env

CoordinatorConfig coordinator_config_from_env(const CoordinatorConfig& defaults) {
  env::warn_unknown_etlc_variables();
  return coordinator_config_from_env(defaults, env::process_lookup());
}

CoordinatorConfig coordinator_config_from_env(const CoordinatorConfig& defaults,
                                              const EnvLookup& lookup) {
  env::EnvReader r(lookup);
  CoordinatorConfig c = defaults;
  env::read_coordinator(r, c);
  env::validate_coordinator(r, c);
  return c;
}

}  // namespace etlc
