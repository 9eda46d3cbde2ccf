// The metrics a member reports (names etl_coordination_*), bound once to a MetricsRegistry so the
// control loop only touches pre-registered series. Every series carries an `instance` label, so
// several members may share one registry (one process, several members).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "etlc/events.hpp"

namespace etlc {
class MetricsRegistry;
class Counter;
class Gauge;
class Histogram;
}  // namespace etlc

namespace etlc::runtime {

class MemberMetrics {
 public:
  MemberMetrics(MetricsRegistry& registry, std::string_view instance);

  void set_owned(std::size_t n);
  void set_draining(std::size_t n);
  void set_leader(bool leader);
  void set_live_workers(std::size_t n);
  void set_job_tallies(std::uint64_t planned, std::uint64_t completed, std::uint64_t quarantined);
  // The job's weight, planned / done / remaining (core/remaining_work.hpp; leader only).
  void set_job_weights(std::uint64_t planned, std::uint64_t done, std::uint64_t remaining);
  // kind: fresh, released, reclaim, takeover
  void acquired(std::string_view kind);
  void lost(LossReason reason);
  // outcome: cooperative, declined, timed_out
  void revocation(std::string_view outcome);
  void quarantined_split();
  void assignment_computed(double seconds, std::uint64_t moves, std::uint64_t records_written);
  void store_failure();
  void unreadable_record();
  // Watch events this member's views received (the store's deliveries to it).
  void watch_events(std::uint64_t n);
  void record_repaired();  // a damaged record rewritten (healing.cpp)
  void residual_added();   // a residual made runnable (dynamic_splits.cpp)

 private:
  MetricsRegistry& registry_;
  std::string instance_;
  Gauge* owned_;
  Gauge* draining_;
  Gauge* leader_;
  Gauge* live_workers_;
  Gauge* planned_;
  Gauge* completed_;
  Gauge* quarantined_;
  Gauge* weight_planned_;
  Gauge* weight_done_;
  Gauge* weight_remaining_;
  Counter* quarantined_total_;
  Counter* store_failures_;
  Counter* unreadable_;
  Counter* watch_events_;
  Counter* repaired_;
  Counter* residuals_;
  Histogram* assignment_seconds_;
  Histogram* moves_per_publish_;
  Counter* records_published_;
};

}  // namespace etlc::runtime
