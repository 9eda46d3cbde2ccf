#include "runtime/member_metrics.hpp"

#include <array>

#include "etlc/metrics.hpp"

namespace etlc::runtime {

namespace {
constexpr std::array<double, 12> kSecondsBuckets = {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                    0.025,  0.05,   0.1,   0.25,   1.0,   5.0};
constexpr std::array<double, 10> kMovesBuckets = {0, 1, 2, 5, 10, 50, 100, 1000, 10000, 100000};
}  // namespace

MemberMetrics::MemberMetrics(MetricsRegistry& registry, std::string_view instance)
    : registry_(registry), instance_(instance) {
  const Labels l{{"instance", instance_}};
  owned_ = &registry_.gauge("etl_coordination_splits_owned", "Splits this member holds", l);
  draining_ = &registry_.gauge("etl_coordination_splits_draining",
                               "Held splits with a revocation in progress", l);
  leader_ = &registry_.gauge("etl_coordination_leader", "1 while this member is the leader", l);
  live_workers_ = &registry_.gauge("etl_coordination_live_workers",
                                   "Live members the leader balances across (leader only)", l);
  planned_ =
      &registry_.gauge("etl_coordination_splits_planned", "Splits in the plan (leader only)", l);
  completed_ = &registry_.gauge("etl_coordination_splits_completed",
                                "Splits that committed terminal progress (leader only)", l);
  quarantined_ = &registry_.gauge("etl_coordination_splits_quarantined",
                                  "Splits parked after max_attempts (leader only)", l);
  weight_planned_ = &registry_.gauge("etl_coordination_job_weight_planned",
                                     "Weight of every split of the job (leader only)", l);
  weight_done_ = &registry_.gauge("etl_coordination_job_weight_done",
                                  "Weight completed, plus what runnable splits report done "
                                  "(leader only)",
                                  l);
  weight_remaining_ = &registry_.gauge("etl_coordination_job_weight_remaining",
                                       "Weight of runnable splits not yet done (leader only)", l);
  quarantined_total_ =
      &registry_.counter("etl_coordination_quarantines_total", "Splits this member quarantined", l);
  store_failures_ = &registry_.counter("etl_coordination_store_failures_total",
                                       "Store operations that failed and were retried", l);
  unreadable_ = &registry_.counter("etl_coordination_unreadable_records_total",
                                   "Records in the store this member could not decode", l);
  watch_events_ = &registry_.counter("etl_coordination_watch_events_total",
                                     "Watch events this member's views received", l);
  repaired_ = &registry_.counter("etl_coordination_records_repaired_total",
                                 "Damaged records (unreadable or deleted) this member rewrote", l);
  residuals_ = &registry_.counter("etl_coordination_residuals_total",
                                  "Residuals cut from splits under way that this member, as the "
                                  "leader, made runnable (dynamic splitting)",
                                  l);
  assignment_seconds_ =
      &registry_.histogram("etl_coordination_assignment_seconds",
                           "Time to compute and publish one assignment", kSecondsBuckets, l);
  moves_per_publish_ =
      &registry_.histogram("etl_coordination_moves_per_publish",
                           "Splits whose assignee changed in one publish", kMovesBuckets, l);
  records_published_ = &registry_.counter("etl_coordination_assignment_records_written_total",
                                          "assign.{instance} records written", l);
}

void MemberMetrics::set_owned(std::size_t n) {
  owned_->set(static_cast<double>(n));
}
void MemberMetrics::set_draining(std::size_t n) {
  draining_->set(static_cast<double>(n));
}
void MemberMetrics::set_leader(bool leader) {
  leader_->set(leader ? 1.0 : 0.0);
}
void MemberMetrics::set_live_workers(std::size_t n) {
  live_workers_->set(static_cast<double>(n));
}

void MemberMetrics::set_job_weights(std::uint64_t planned, std::uint64_t done,
                                    std::uint64_t remaining) {
  weight_planned_->set(static_cast<double>(planned));
  weight_done_->set(static_cast<double>(done));
  weight_remaining_->set(static_cast<double>(remaining));
}

void MemberMetrics::set_job_tallies(std::uint64_t planned, std::uint64_t completed,
                                    std::uint64_t quarantined) {
  planned_->set(static_cast<double>(planned));
  completed_->set(static_cast<double>(completed));
  quarantined_->set(static_cast<double>(quarantined));
}

void MemberMetrics::acquired(std::string_view kind) {
  registry_
      .counter("etl_coordination_acquisitions_total", "Splits acquired, by claim kind",
               Labels{{"instance", instance_}, {"kind", std::string(kind)}})
      .inc();
}

void MemberMetrics::lost(LossReason reason) {
  registry_
      .counter("etl_coordination_losses_total", "Splits lost, by reason",
               Labels{{"instance", instance_}, {"reason", std::string(to_string(reason))}})
      .inc();
}

void MemberMetrics::revocation(std::string_view outcome) {
  registry_
      .counter("etl_coordination_revocations_total", "Revocations finished, by outcome",
               Labels{{"instance", instance_}, {"outcome", std::string(outcome)}})
      .inc();
}

void MemberMetrics::quarantined_split() {
  quarantined_total_->inc();
}
void MemberMetrics::store_failure() {
  store_failures_->inc();
}
void MemberMetrics::unreadable_record() {
  unreadable_->inc();
}
void MemberMetrics::watch_events(std::uint64_t n) {
  watch_events_->inc(n);
}
void MemberMetrics::record_repaired() {
  repaired_->inc();
}
void MemberMetrics::residual_added() {
  residuals_->inc();
}

void MemberMetrics::assignment_computed(double seconds, std::uint64_t moves,
                                        std::uint64_t records_written) {
  assignment_seconds_->observe(seconds);
  moves_per_publish_->observe(static_cast<double>(moves));
  records_published_->inc(records_written);
}

}  // namespace etlc::runtime
