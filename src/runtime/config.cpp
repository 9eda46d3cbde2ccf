// CoordinatorConfig::validate: every rule named, so a misconfiguration fails at construction.
#include <fmt/format.h>

#include "core/assignment.hpp"
#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/config.hpp"
#include "etlc/errors.hpp"

namespace etlc {

void CoordinatorConfig::validate() const {
  using std::chrono::milliseconds;
  auto fail = [](const std::string& rule) { throw ConfigError("invalid config: " + rule); };
  if (!instance_id.empty()) core::validate_id(instance_id, "instance_id");
  if (lease_duration < milliseconds(30)) fail("lease_duration must be at least 30 ms");
  if (lease_duration > std::chrono::hours(24)) fail("lease_duration must be at most 24 h");
  if (op_timeout <= milliseconds(0)) fail("op_timeout must be positive");
  if (lease_duration < 3 * op_timeout) {
    fail(fmt::format("lease_duration ({} ms) must be at least 3 x op_timeout ({} ms)",
                     lease_duration.count(), op_timeout.count()));
  }
  if (max_in_flight < 1 || max_in_flight > kMaxLanes) {
    fail(fmt::format("max_in_flight must be in 1..{} (got {})", kMaxLanes, max_in_flight));
  }
  if (rebalance_delay < milliseconds(0)) fail("rebalance_delay must be >= 0 (0 = immediate)");
  if (drain_deadline < op_timeout) {
    fail(
        fmt::format("drain_deadline ({} ms) must be at least op_timeout ({} ms): a shorter one "
                    "would force every revocation before its final commit could land",
                    drain_deadline.count(), op_timeout.count()));
  }
  if (max_attempts < 1 || max_attempts > 1000) fail("max_attempts must be in 1..1000");
  if (replan_interval < milliseconds(100)) fail("replan_interval must be at least 100 ms");
  if (assignment_interval < milliseconds(0)) fail("assignment_interval must be >= 0");
  if (pin_remaining_ppm > 1'000'000) {
    fail(fmt::format("pin_remaining_ppm must be in 0..1000000 (got {})", pin_remaining_ppm));
  }
  if (pace_gain_ppm > core::kMaxPaceGainPpm) {
    fail(fmt::format("pace_gain_ppm must be in 0..10000000 (got {})", pace_gain_ppm));
  }
  if (max_children_per_split < 1 || max_children_per_split > core::kMaxChildrenPerSplit) {
    fail(fmt::format("max_children_per_split must be in 1..{} (got {})", core::kMaxChildrenPerSplit,
                     max_children_per_split));
  }
  if (split_request_timeout < milliseconds(100) || split_request_timeout > std::chrono::hours(1)) {
    fail("split_request_timeout must be in 100 ms .. 1 h");
  }
  if (damping_ppm_of_mean > 1'000'000) {
    fail(fmt::format("damping_ppm_of_mean must be in 0..1000000 (got {})", damping_ppm_of_mean));
  }
  if (rebalance_cooldown < milliseconds(0) || rebalance_cooldown > std::chrono::hours(1)) {
    fail("rebalance_cooldown must be in 0 ms .. 1 h");
  }
  if (progress_interval < milliseconds(10) || progress_interval > std::chrono::hours(1)) {
    fail("progress_interval must be in 10 ms .. 1 h");
  }
  if (bulk_ops_per_step < 2 || bulk_ops_per_step > 100000) {
    fail("bulk_ops_per_step must be in 2..100000");
  }
  if (max_planner_failures < 1 || max_planner_failures > 1000) {
    fail(fmt::format("max_planner_failures must be in 1..1000 (got {})", max_planner_failures));
  }
  if (startup_wait < milliseconds(0) || startup_wait > std::chrono::hours(1)) {
    fail("startup_wait must be in 0 ms .. 1 h");
  }
}

}  // namespace etlc
