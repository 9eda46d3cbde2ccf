// Member: construction, the step that sequences the roles, and the transitions between them.
//
//   step(now):
//     1. session     open, or renew by CAS if due; starved / expired / twin end the session
//     2. views       fold pending watch events (bounded per watch), act on what changed
//     3. session     renew again if folding took long
//     4. liveness    expire peers' sessions unchanged for a lease; retry lease deletes
//     5. leadership  elect, or lead: heal, plan and seed, tallies, publish, clean up
//     6. worker      follow assign.{me}: claim, keep, revoke; force due revocations
//     7. completion  AllComplete / Stalled from the plan record
#include "runtime/member.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/metrics.hpp"
#include "log.hpp"
#include "runtime/election.hpp"
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
      metrics_(metrics, config_.instance_id),
      options_(std::move(options)),
      instance_(config_.instance_id),
      fingerprint_(planner_ ? planner_->fingerprint() : std::string()),
      ctx_{config_,   *store_,      clock_,        metrics_,
           instance_, fingerprint_, options_.wake, options_.unsafe},
      held_(ctx_),
      session_(ctx_, options_.nonce, options_.nonce_source),
      deadline_(session_.deadline()),
      views_(ctx_),
      liveness_(ctx_, views_),
      standby_(ctx_, views_),
      warn_(ctx_),
      worker_(ctx_, views_, held_, session_, liveness_, warn_) {
  held_.set_nonce(session_.nonce());
  if (!options_.targeted_watches) views_.set_scope(ViewScope::fleet);
  if (!options_.plan_runner) options_.plan_runner = std::make_unique<InlinePlanRunner>();
}

Member::~Member() = default;

void Member::set_plan_runner(std::unique_ptr<PlanRunner> runner) {
  MutexLock lk(mu_);
  if (leadership_ && leadership_->planning()) {
    throw UsageError("cannot replace the plan runner while a plan runs");
  }
  options_.plan_runner = std::move(runner);
}

void Member::set_targeted_watches(bool on) {
  MutexLock lk(mu_);
  if (views_.caught_up() || leadership_) {
    throw UsageError("targeted watches are chosen before the member's first step");
  }
  options_.targeted_watches = on;
  views_.set_scope(on ? ViewScope::worker : ViewScope::fleet);
}

TimePoint Member::step() {
  MutexLock lk(mu_);
  const TimePoint now = clock_.now();
  if (stopped_) return now + kIdle;
  if (now < retry_at_) return retry_at_;
  try {
    return step_locked(now);
  } catch (const StoreError& e) {
    if (!e.retryable()) {
      go_fatal(fmt::format("store failure: {}", e.what()), LossReason::twin);
      return now + kIdle;
    }
    metrics_.store_failure();
    log().debug("etlc: {}: store error, backing off: {}", instance_, e.what());
  } catch (const core::RecordError& e) {
    // A record we had to read directly is unreadable: skip this step's work, try again later
    // (healing.cpp repairs what this member owns; the log says so once per lease, not per retry).
    warn_.warn(e.key(), e.what());
  }
  retry_at_ = now + kStoreBackoff;
  return retry_at_;
}

TimePoint Member::step_locked(TimePoint now) {
  handle_session(session_.tick(now));
  if (stopped_) return now + kIdle;
  if (!session_.is_open()) return std::max(now, session_.next_due());
  views_.ensure_watches();
  const ViewChanges changes = views_.drain(now);
  bool more = changes.more;
  more |= leadership_ ? leadership_->drain(now) : standby_.drain(now);
  apply(changes, now);
  if (stopped_) return now + kIdle;
  // The renewal may be due again if folding took long (it is bounded, but be exact).
  handle_session(session_.tick(now));
  if (stopped_ || !session_.is_open()) return now;
  held_.retry_lease_erases();
  if (views_.caught_up()) {
    const auto expired = liveness_.expire_peers(now, leadership_ != nullptr, session_.nonce());
    if (leadership_) leadership_->departed(expired, now);
  }
  lead(now);
  if (stopped_) return now + kIdle;
  worker_.reconcile(now);
  worker_.force_due_revocations(now);
  worker_.observe_completion();
  metrics_.set_draining(held_.draining());
  return next_wake(now, more);
}

void Member::handle_session(const Session::Tick& tick) {
  switch (tick.status) {
    case Session::Status::live:
    case Session::Status::joining:
      return;
    case Session::Status::starved:
      lose_all(LossReason::starved);
      return;
    case Session::Status::expired:
      lose_all(LossReason::session_expired);
      return;
    case Session::Status::twin:
      go_fatal(tick.message, LossReason::twin);
      return;
  }
}

// What the views changed: the transitions it forces, then what the roles need to know.
void Member::apply(const ViewChanges& c, TimePoint now) {
  if (c.foreign_fingerprint) {
    go_fatal(fmt::format("job fingerprint mismatch: job.plan was planned with fingerprint '{}', "
                         "this member's planner has '{}' (another input or configuration? run "
                         "it under another job, or `etlc reset` the job first)",
                         *c.foreign_fingerprint, fingerprint_),
             LossReason::twin);
    return;
  }
  worker_.leases_freed(c.leases_freed);
  worker_.leases_freed(c.leases_known);  // a claim that waited for the lease's snapshot
  worker_.sessions_known(c.sessions_known);
  if (!leadership_) return;
  const auto& leader = views_.leader_view();
  if (c.leader_deleted) {
    step_down("leader record deleted");
  } else if (c.leader_changed && leader &&
             (leader->first.owner != instance_ || leader->first.nonce != session_.nonce())) {
    step_down("leader record moved");
  } else if (c.plan_changed && views_.plan_view() &&
             views_.plan_view()->first.term > leadership_->term()) {
    step_down("a newer term took the plan");
  }
  if (leadership_) leadership_->on_changes(c, now);
}

void Member::lead(TimePoint now) {
  if (!leadership_) {
    standby_.step(now, session_.nonce(), options_.targeted_watches && !held_.draining());
    if (standby_.defer_election(now, session_.nonce())) return;
    const Election e = run_election(ctx_, views_, session_.nonce());
    if (e.kind == Election::Kind::fatal) go_fatal(e.message, LossReason::twin);
    if (e.kind != Election::Kind::elected) return;
    become_leader(e, now);
  }
  const Leadership::Outcome out = leadership_->step(now);
  if (out.kind == Leadership::Outcome::Kind::step_down) step_down(out.why);
  if (out.kind == Leadership::Outcome::Kind::fatal) go_fatal(out.why, LossReason::twin);
}

void Member::become_leader(const Election& e, TimePoint now) {
  std::optional<LeaderViews> warm = standby_.hand_over(session_.nonce());
  const bool was_standby = warm.has_value();
  leadership_ = std::make_unique<Leadership>(
      ctx_, Leadership::Deps{views_, *options_.plan_runner, planner_, publishes_}, session_.nonce(),
      e.term, e.leader_rev, now, std::move(warm));
  views_.set_scope(ViewScope::fleet);  // the leader's step waits until these views caught up
  held_.set_leader(true);
  metrics_.set_leader(true);
  log().info("etlc: {}: elected leader for term {}{}", instance_, e.term,
             was_standby ? " (from the standby's warm views)" : "");
}

void Member::step_down(std::string_view why) {
  if (!leadership_) return;
  log().info("etlc: {}: stepping down as leader of term {} ({})", instance_, leadership_->term(),
             why);
  leadership_.reset();  // its views and every leader-only state go with it
  if (options_.targeted_watches) views_.set_scope(ViewScope::worker);
  held_.set_leader(false);
  metrics_.set_leader(false);
}

void Member::lose_all(LossReason reason) {
  session_.end(reason);  // first: lanes checking their session stop writing before anything else
  held_.drop_all(reason);
  step_down("session lost");
  held_.set_nonce(session_.nonce());
}

void Member::go_fatal(const std::string& message, LossReason reason) {
  log().error("etlc: {}: {}", instance_, message);
  lose_all(reason);
  stopped_ = true;
  held_.push_event(Fatal{message});
}

// When step() next has something to do. Only deadlines in the future count: anything that is
// due now was attempted in this step, and if it failed it is retried after a backoff, never in a
// busy loop. Work that arrives by itself (watch events, a finished planner, a freed lane) wakes
// the loop through Options::wake instead of being polled for.
TimePoint Member::next_wake(TimePoint now, bool more) {
  if (more) return now;
  const TimePoint retry = now + kStoreBackoff;
  auto later = [&](TimePoint due) { return due > now ? due : retry; };
  TimePoint next = std::min(later(session_.next_due()), now + kIdle);
  if (auto r = held_.next_revocation_due(now)) next = std::min(next, later(*r));
  if (held_.lease_erases_pending()) next = std::min(next, retry);
  if (auto r = worker_.next_retry(now)) next = std::min(next, *r);
  if (!views_.members().empty()) {
    next = std::min(next, later(liveness_.next_expiry(now, leadership_ != nullptr)));
  }
  if (leadership_) next = std::min(next, leadership_->next_due(now));
  if (auto d = standby_.election_due(); d && !leadership_) next = std::min(next, later(*d));
  return std::max(next, now);
}

void Member::join_now() {
  MutexLock lk(mu_);
  // One scratch key per instance id, reused by its restarts (docs/store-contract.md).
  verify_fencing(*store_, fmt::format("etlc-probe.{}.", core::encode_id(instance_)));
  // Refuse a job planned with another fingerprint before touching anything. An unreadable plan
  // says nothing about the job: the leader rewrites it, and the plan watch checks it then.
  if (auto plan = store_->get(core::kPlanKey)) {
    try {
      const core::PlanRecord rec = core::decode_plan(core::kPlanKey, plan->value);
      if (rec.fingerprint != fingerprint_) {
        throw ConfigError(fmt::format(
            "job fingerprint mismatch: the job in the store was planned with fingerprint '{}', "
            "this member's planner has '{}' (a different input or configuration?)",
            rec.fingerprint, fingerprint_));
      }
    } catch (const core::RecordError& e) {
      log().warn("etlc: {}: joining a job whose plan record is unreadable: {}", instance_,
                 e.what());
    }
  }
  if (!session_.open(clock_.now())) {
    throw StoreError(StoreErrc::unavailable,
                     fmt::format("could not open the session of instance '{}'", instance_));
  }
  held_.set_nonce(session_.nonce());
}

void Member::shutdown() {
  MutexLock lk(mu_);
  if (stopped_) return;
  session_.lapse();  // first: lanes checking their session stop writing before anything else
  std::vector<std::shared_ptr<Held>> all = held_.all();
  try {
    for (auto& h : all) {
      MutexLock io(h->io);
      if (!h->gone) held_.release_locked(*h);
    }
    held_.retry_lease_erases();
    if (leadership_) {
      leadership_->resign();
      step_down("shutdown");
    }
    standby_.resign(session_.nonce());
    session_.leave();
  } catch (const StoreError& e) {
    log().warn("etlc: {}: shutdown could not finish cleanly: {}", instance_, e.what());
  }
  // Whatever could not be released is lost to this process; peers reclaim it after expiry.
  held_.drop_all(LossReason::shutdown);
  stopped_ = true;
  views_.close_watches();
}

void Member::abandon() {
  MutexLock lk(mu_);
  session_.abandon();
  stopped_ = true;
  held_.abandon();
  leadership_.reset();
  views_.close_watches();
}

std::map<std::string, std::vector<std::string>> Member::published_assignment() const {
  MutexLock lk(mu_);
  return leadership_ ? leadership_->published() : std::map<std::string, std::vector<std::string>>{};
}

std::uint64_t Member::publishes() const {
  MutexLock lk(mu_);
  return publishes_;
}

}  // namespace etlc::runtime
