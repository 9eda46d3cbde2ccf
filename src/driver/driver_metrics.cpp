#include "driver/driver_metrics.hpp"

namespace etlc::driver {

DriverMetrics::DriverMetrics(MetricsRegistry& registry, const std::string& instance) {
  const Labels l{{"instance", instance}};
  lanes_opened_ = &registry.counter("etl_coordination_driver_lanes_opened_total",
                                    "Lanes the Driver opened (one per grant it acted on)", l);
  steps_ = &registry.counter("etl_coordination_driver_steps_total", "Lane steps the Driver ran", l);
  commits_ = &registry.counter("etl_coordination_driver_commits_total",
                               "Durable progress commits of the Driver's lanes (completions "
                               "not included)",
                               l);
  drains_ = &registry.counter("etl_coordination_driver_drains_total",
                              "Revocations the Driver answered with a drain and release", l);
  declines_ =
      &registry.counter("etl_coordination_driver_declines_total",
                        "Revocations the Driver's lanes declined (the release is forced)", l);
  losses_ = &registry.counter("etl_coordination_driver_losses_total",
                              "Lanes the Driver stopped as lost (lost, fenced, session lapsed, "
                              "revocation declined)",
                              l);
}

void DriverMetrics::lane_ended(LaneEnd end) noexcept {
  if (end == LaneEnd::drained) drains_->inc();
  if (end == LaneEnd::lost) losses_->inc();
}

}  // namespace etlc::driver
