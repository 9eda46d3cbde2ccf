// Member: one coordinated member, as a steppable object, and the sequencer of its roles.
//
// step() does everything the protocol needs at one instant and returns when it next wants to
// run; it never sleeps and reads time only through the Clock, so a test or the simulator drives
// many members on one thread on virtual time and production wraps the very same object in a
// thread (Coordinator). Its collaborators, one owner each (docs/architecture.md, "The member"):
//
//   Session       session.hpp      member.{me}: open, renew, starvation, twins
//   FleetViews    fleet_views.hpp  the watches every member keeps, folded into views
//   Liveness      liveness.hpp     expiring silent peers, dead leases and leader records
//   Worker        worker.hpp       following assign.{me}: claims, revocations, completion
//   Leadership    leadership.hpp   exists only while leading: plan, heal, tallies, publish
//   HeldSplits    held_splits.hpp  held splits, events, and the fenced calls of user threads
//
// The collaborators decide and report; transitions (step down, stop, lose every lane, note a
// departure) are made here, from what they report, in one place each.
//
// Threads and locks. mu_ is the control loop's: step(), join_now(), shutdown() and abandon()
// hold it for their whole duration, store I/O included, and every collaborator but HeldSplits is
// reached only under it (the compiler checks: GUARDED_BY). User threads never take it for the
// split operations: those go to HeldSplits, which has its own locks (held_splits.hpp). The
// introspection calls below take mu_ only where noted (tests and the simulator, which step the
// member themselves). Lock order: mu_, then a split's Held::io, then HeldSplits' own mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/config.hpp"
#include "etlc/detail/mutex.hpp"
#include "etlc/events.hpp"
#include "etlc/planner.hpp"
#include "etlc/store.hpp"
#include "runtime/election.hpp"
#include "runtime/fleet_views.hpp"
#include "runtime/held_splits.hpp"
#include "runtime/leadership.hpp"
#include "runtime/liveness.hpp"
#include "runtime/member_context.hpp"
#include "runtime/member_metrics.hpp"
#include "runtime/plan_runner.hpp"
#include "runtime/session.hpp"
#include "runtime/standby.hpp"
#include "runtime/throttled_log.hpp"
#include "runtime/worker.hpp"

namespace etlc {
class MetricsRegistry;
}

namespace etlc::runtime {

class Member {
 public:
  struct Options {
    // Runs the planner. Null = inline on the control loop (manual mode / simulation).
    std::unique_ptr<PlanRunner> plan_runner;
    // Called (from any thread) when the member wants step() to run soon.
    std::function<void()> wake;
    // Per-process nonce; empty = from nonce_source (or random).
    std::string nonce;
    // Produces the nonce of every new session (the simulator makes them deterministic).
    std::function<std::string()> nonce_source;
    UnsafeTestHooks unsafe;
    // true (the default): a worker watches its own keys and one member stands by (decision
    // 0009). false: every member watches member.*, lease.* and assign.* (the design before issue
    // 14; the tests compare the two).
    bool targeted_watches = true;
  };

  Member(CoordinatorConfig config, std::shared_ptr<KvStore> store, std::shared_ptr<Planner> planner,
         const Clock& clock, MetricsRegistry& metrics, Options options);
  ~Member();
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;

  // Runs one step at clock.now(); returns when the next one is due (now if work is pending).
  TimePoint step() ETLC_EXCLUDES(mu_);

  // Replaces the plan runner (Coordinator::start moves the planner onto its own thread).
  void set_plan_runner(std::unique_ptr<PlanRunner> runner) ETLC_EXCLUDES(mu_);
  // Options::targeted_watches, before the first step (tests of decision 0009). Throws UsageError
  // once the member has stepped.
  void set_targeted_watches(bool on) ETLC_EXCLUDES(mu_);

  // Synchronous first join (thread mode): probe the store, open the session, check the job's
  // fingerprint. Throws ConfigError / StoreError as Coordinator::start documents.
  void join_now() ETLC_EXCLUDES(mu_);

  // --- user API (thread-safe, see Coordinator; none of them takes mu_) ---
  HeldSplits& splits() { return held_; }
  void shutdown() ETLC_EXCLUDES(mu_);  // graceful: release all, step down, leave
  void abandon() ETLC_EXCLUDES(mu_);   // crash: stop without writing anything

  // --- introspection (thread-safe) ---
  const std::string& instance_id() const { return instance_; }
  TimePoint clock_now() const { return clock_.now(); }
  std::string nonce() const { return held_.nonce(); }
  // Session `session` (SplitGranted::session) is provably live by this member's clock (see
  // SessionDeadline); lock-free. session_live_until: until when (min() if not live).
  bool session_live(std::uint64_t session) const { return deadline_.live(session, clock_.now()); }
  TimePoint session_live_until(std::uint64_t session) const { return deadline_.until(session); }
  bool is_leader() const { return held_.leader(); }
  bool stopped() const { return stopped_.load(); }
  std::vector<std::string> held_ids() const { return held_.ids(); }
  // The assignment this member currently follows (nullopt: no record).
  std::optional<std::vector<std::string>> assignment() const { return held_.assignment(); }
  // What this member last published as leader, member -> splits (takes mu_).
  std::map<std::string, std::vector<std::string>> published_assignment() const ETLC_EXCLUDES(mu_);
  // Assignment records written by this member as leader, over every term (takes mu_).
  std::uint64_t publishes() const ETLC_EXCLUDES(mu_);

 private:
  TimePoint step_locked(TimePoint now) ETLC_REQUIRES(mu_);
  void handle_session(const Session::Tick& tick) ETLC_REQUIRES(mu_);
  void apply(const ViewChanges& changes, TimePoint now) ETLC_REQUIRES(mu_);
  void lead(TimePoint now) ETLC_REQUIRES(mu_);
  void become_leader(const Election& e, TimePoint now) ETLC_REQUIRES(mu_);
  void step_down(std::string_view why) ETLC_REQUIRES(mu_);
  // Drops every held split without writing (the session can no longer be trusted), steps down,
  // and ends the session: the next step rejoins under a new nonce.
  void lose_all(LossReason reason) ETLC_REQUIRES(mu_);
  void go_fatal(const std::string& message, LossReason reason) ETLC_REQUIRES(mu_);
  TimePoint next_wake(TimePoint now, bool more) ETLC_REQUIRES(mu_);

  const CoordinatorConfig config_;
  const std::shared_ptr<KvStore> store_;  // metered
  const std::shared_ptr<Planner> planner_;
  const Clock& clock_;
  MemberMetrics metrics_;
  Options options_;
  const std::string instance_;
  const std::string fingerprint_;
  const MemberContext ctx_;

  mutable Mutex mu_;
  HeldSplits held_;  // thread-safe on its own
  Session session_ ETLC_GUARDED_BY(mu_);
  const SessionDeadline& deadline_;  // session_'s, lock-free for lanes
  FleetViews views_ ETLC_GUARDED_BY(mu_);
  Liveness liveness_ ETLC_GUARDED_BY(mu_);
  Standby standby_ ETLC_GUARDED_BY(mu_);
  ThrottledLog warn_ ETLC_GUARDED_BY(mu_);
  Worker worker_ ETLC_GUARDED_BY(mu_);
  std::unique_ptr<Leadership> leadership_ ETLC_GUARDED_BY(mu_);  // non-null exactly while leading
  std::uint64_t publishes_ ETLC_GUARDED_BY(mu_) = 0;
  TimePoint retry_at_ ETLC_GUARDED_BY(mu_){};  // backoff after a store failure of the loop
  std::atomic<bool> stopped_{false};
};

}  // namespace etlc::runtime
