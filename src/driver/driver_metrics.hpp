// The Driver's own counters, exported as Prometheus counters on the registry its member reports
// into (docs/operations.md, "Metrics"), with the member's `instance` label like the member's own
// series, so one scrape shows both the coordination and the lanes that act on it.
#pragma once

#include <string>

#include "etlc/metrics.hpp"
#include "etlc/split_source.hpp"

namespace etlc::driver {

class DriverMetrics {
 public:
  DriverMetrics(MetricsRegistry& registry, const std::string& instance);

  void lane_opened() noexcept { lanes_opened_->inc(); }
  void stepped() noexcept { steps_->inc(); }
  void committed() noexcept { commits_->inc(); }
  void declined() noexcept { declines_->inc(); }
  // A lane closed: drained (a cooperative revocation) and lost (lost, fenced, lapsed or
  // declined) are counted; the other ends have counters of their own elsewhere.
  void lane_ended(LaneEnd end) noexcept;

 private:
  Counter* lanes_opened_;
  Counter* steps_;
  Counter* commits_;
  Counter* drains_;
  Counter* declines_;
  Counter* losses_;
};

}  // namespace etlc::driver
