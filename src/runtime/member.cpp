// Member construction, the step function that sequences the concerns, and the user API glue.
#include "runtime/member.hpp"

#include <fmt/format.h>
#include "log.hpp"

#include <algorithm>

#include "core/keys.hpp"
#include "etlc/metrics.hpp"
#include "store/metered_store.hpp"

namespace etlc::runtime {

namespace {
constexpr auto kStoreBackoff = std::chrono::milliseconds(100);
constexpr auto kIdle = std::chrono::seconds(1);  // upper bound between steps without events
}  // namespace

Member::Member(CoordinatorConfig config, std::shared_ptr<KvStore> store,
               std::shared_ptr<Planner> planner, const Clock& clock, MetricsRegistry& metrics,
               Options options)
    : config_(std::move(config)),
      store_(std::make_shared<MeteredStore>(std::move(store), metrics, clock, config_.instance_id)),
      planner_(std::move(planner)),
      clock_(clock),
      metrics_(metrics, config_.instance_id.empty() ? "" : config_.instance_id),
      options_(std::move(options)),
      instance_(config_.instance_id),
      fingerprint_(planner_ ? planner_->fingerprint() : std::string()),
      delay_(config_.rebalance_delay) {
  nonce_ = options_.nonce.empty() ? fresh_nonce() : options_.nonce;
  leases_.set_owner(instance_);
  if (!options_.plan_runner) options_.plan_runner = std::make_unique<InlinePlanRunner>();
  if (!options_.bulk) options_.bulk = std::make_unique<InlineBulkExecutor>();
}

Member::~Member() = default;

void Member::set_bulk_executor(std::unique_ptr<BulkExecutor> bulk) {
  std::lock_guard lk(mu_);
  options_.bulk = std::move(bulk);
}

void Member::set_plan_runner(std::unique_ptr<PlanRunner> runner) {
  std::lock_guard lk(mu_);
  if (planning_) throw UsageError("cannot replace the plan runner while a plan runs");
  options_.plan_runner = std::move(runner);
}

TimePoint Member::step() {
  std::lock_guard lk(mu_);
  const TimePoint now = clock_.now();
  if (stopped_) return now + kIdle;
  if (now < retry_at_) return retry_at_;
  bool more = false;
  try {
    ensure_session(now);
    if (!session_open_ || stopped_) return stopped_ ? now + kIdle : std::max(now, retry_at_);
    ensure_watches();
    more = drain_watches(now);
    if (stopped_) return now + kIdle;
    // The renewal may be due again if draining took long (it is bounded, but be exact).
    ensure_session(now);
    if (!session_open_) return now;
    retry_lease_erases();
    expire_peers(now);
    lead(now);
    reconcile(now);
    force_due_revocations(now);
    observe_completion();
  } catch (const StoreError& e) {
    if (!e.retryable()) {
      go_fatal(fmt::format("store failure: {}", e.what()));
      return now + kIdle;
    }
    metrics_.store_failure();
    log().debug("etlc: {}: store error, backing off: {}", instance_, e.what());
    retry_at_ = now + kStoreBackoff;
    return retry_at_;
  } catch (const core::RecordError& e) {
    // A record we had to read directly is unreadable: skip this step's work, try again later
    // (healing.cpp repairs what this member owns; the log says so once per lease, not per retry).
    warn_throttled(e.key(), e.what());
    retry_at_ = now + kStoreBackoff;
    return retry_at_;
  }

  {
    std::lock_guard slk(shared_mu_);
    std::size_t draining = 0;
    for (const auto& [id, h] : held_) draining += h->draining ? 1 : 0;
    metrics_.set_draining(draining);
  }
  return next_wake(now, more);
}

// When step() next has something to do. Only deadlines in the future count: anything that is
// due now was attempted in this step, and if it failed it is retried after a backoff, never in a
// busy loop. Work that arrives by itself (watch events, a finished planner, a freed lane) wakes
// the loop through Options::wake instead of being polled for.
TimePoint Member::next_wake(TimePoint now, bool more) {
  if (more || (leader_ && seeding_)) return now;
  const TimePoint retry = now + kStoreBackoff;
  auto later = [&](TimePoint due) { return due > now ? due : retry; };
  TimePoint next = std::min(later(next_renew_), now + kIdle);
  {
    std::lock_guard slk(shared_mu_);
    for (const auto& [id, h] : held_) {
      if (h->draining) next = std::min(next, later(h->declined ? now : h->drain_deadline));
    }
    if (!pending_lease_erases_.empty()) next = std::min(next, retry);
  }
  for (const auto& [id, at] : claim_retry_at_) {
    if (at > now) next = std::min(next, at);
  }
  for (const auto& [id, v] : members_) {
    if (id != instance_) next = std::min(next, later(v.changed_at + expiry_wait(id, v)));
  }
  if (leader_ && w_splits_.caught_up && w_members_.caught_up && w_assigns_.caught_up) {
    if (assignment_dirty_)
      next = std::min(next, later(last_assignment_at_ + config_.assignment_interval));
    if (auto d = delay_.next_deadline()) next = std::min(next, later(*d));
    const bool plan_due = plan_view_ && (!plan_view_->first.planned ||
                                         plan_view_->first.finality == core::Finality::open);
    if (plan_due && !planning_) next = std::min(next, later(next_plan_at_));
  }
  return std::max(next, now);
}

void Member::join_now() {
  std::lock_guard lk(mu_);
  // One scratch key per instance id, reused by its restarts (docs/store-contract.md).
  verify_fencing(*store_, fmt::format("etlc-probe.{}.", core::encode_id(instance_)));
  // Refuse a job planned with another fingerprint before touching anything. An unreadable plan
  // says nothing about the job: the leader rewrites it, and the plan watch checks it then.
  if (auto plan = store_->get(core::kPlanKey)) {
    core::PlanRecord rec;
    try {
      rec = core::decode_plan(core::kPlanKey, plan->value);
    } catch (const core::RecordError& e) {
      log().warn("etlc: {}: joining a job whose plan record is unreadable: {}", instance_,
                 e.what());
      rec.fingerprint = fingerprint_;
    }
    if (rec.fingerprint != fingerprint_) {
      throw ConfigError(fmt::format(
          "job fingerprint mismatch: the job in the store was planned with fingerprint '{}', this "
          "member's planner has '{}' (a different input or configuration?)",
          rec.fingerprint, fingerprint_));
    }
  }
  open_session(clock_.now());
  if (!session_open_) {
    throw StoreError(StoreErrc::unavailable,
                     fmt::format("could not open the session of instance '{}'", instance_));
  }
}

std::optional<Event> Member::poll_event() {
  std::lock_guard lk(shared_mu_);
  if (events_.empty()) return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

std::optional<Event> Member::wait_event(std::chrono::milliseconds timeout) {
  std::unique_lock lk(shared_mu_);
  event_cv_.wait_for(lk, timeout, [&] { return !events_.empty(); });
  if (events_.empty()) return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void Member::shutdown() {
  std::lock_guard lk(mu_);
  if (stopped_) return;
  live_.lapse();
  std::vector<std::shared_ptr<Held>> all;
  {
    std::lock_guard slk(shared_mu_);
    for (auto& [id, h] : held_) all.push_back(h);
  }
  try {
    for (auto& h : all) {
      std::lock_guard io(h->io);
      if (!h->gone) release_locked(*h);
    }
    retry_lease_erases();
    if (leader_ && leader_view_) {
      store_->erase(core::kLeaderKey, leader_view_->second);
      step_down("shutdown");
    }
    if (session_open_) store_->erase(core::member_key(instance_), session_rev_);
  } catch (const StoreError& e) {
    log().warn("etlc: {}: shutdown could not finish cleanly: {}", instance_, e.what());
  }
  // Whatever could not be released is lost to this process; peers reclaim it after expiry.
  for (auto& h : all) {
    std::lock_guard io(h->io);
    if (!h->gone) drop_held(*h, LossReason::shutdown);
  }
  session_open_ = false;
  stopped_ = true;
  close_watches();
}

void Member::abandon() {
  std::lock_guard lk(mu_);
  live_.lapse();
  stopped_ = true;
  {
    std::lock_guard slk(shared_mu_);
    for (auto& [id, h] : held_) h->gone = true;  // no further I/O from user threads
    held_.clear();
    leader_flag_ = false;
  }
  leader_ = false;
  close_watches();
}

std::string Member::nonce() const {
  std::lock_guard lk(shared_mu_);
  return nonce_;
}

bool Member::is_leader() const {
  std::lock_guard lk(shared_mu_);
  return leader_flag_;
}

bool Member::stopped() const {
  std::lock_guard lk(mu_);
  return stopped_;
}

std::vector<std::string> Member::held_ids() const {
  std::lock_guard lk(shared_mu_);
  std::vector<std::string> out;
  for (const auto& [id, h] : held_) out.push_back(id);
  return out;
}

std::optional<std::vector<std::string>> Member::assignment() const {
  std::lock_guard lk(shared_mu_);
  return assignment_mirror_;
}

std::map<std::string, std::vector<std::string>> Member::published_assignment() const {
  std::lock_guard lk(mu_);
  return published_;
}

std::uint64_t Member::publishes() const {
  std::lock_guard lk(mu_);
  return publishes_;
}

}  // namespace etlc::runtime
