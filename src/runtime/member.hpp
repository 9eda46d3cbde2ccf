// Member: the control loop of one coordinated member, as a steppable object.
//
// step() does everything the protocol needs at one instant: renew the session, fold watch events
// into local views, run leader duties when elected, reconcile toward the published assignment,
// force revocations past their deadline. It never sleeps and never reads time except through the
// Clock, so a test or the simulator can drive many members on one thread on virtual time, and
// production wraps the very same object in a thread (see Coordinator).
//
// The per-concern logic lives in its own file:
//   session.cpp      session liveness: join, renewal, self-fencing, twin detection
//   views.cpp        watches and the local views they feed
//   liveness.cpp     expiring peers' sessions and dead leases (observer-side expiry)
//   leadership.cpp   election, the term fence, planning and seeding, tallies
//   publish.cpp      computing and publishing the desired assignment, rebalance delay
//   reconcile.cpp    the worker's reconciliation table, claims, revocations
//   split_ops.cpp    fenced commits, completion, failure, releases
//
// Locking: mu_ guards the control-loop state and is held by step() for its whole duration
// (store I/O included). User threads never take mu_. Each held split has its own io mutex that
// serialises store I/O on that split between user calls (commit) and the loop (forced release).
// shared_mu_ guards the held-split table and the event queue. Order: mu_ -> Held::io ->
// shared_mu_; nothing takes them in another order.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/rebalance_delay.hpp"
#include "core/records.hpp"
#include "etlc/clock.hpp"
#include "etlc/config.hpp"
#include "etlc/coordinator.hpp"
#include "etlc/events.hpp"
#include "etlc/planner.hpp"
#include "etlc/store.hpp"
#include "runtime/bulk_executor.hpp"
#include "runtime/lease_table.hpp"
#include "runtime/member_metrics.hpp"
#include "runtime/plan_runner.hpp"
#include "runtime/session_deadline.hpp"

namespace etlc::runtime {

using TimePoint = Clock::time_point;
using Duration = Clock::duration;

// A split this member holds.
struct Held {
  std::mutex io;  // serialises store I/O on this split
  // Guarded by io:
  std::string id;
  SplitSpec spec;
  core::SplitRecord record;  // the last durable record as this member wrote or read it
  Revision record_rev = 0;
  Revision lease_rev = 0;
  bool gone = false;       // released or lost: no further I/O, commits report fenced
  int absent_rereads = 0;  // consecutive re-reads that found no record (see write_record)
  // Guarded by Member::shared_mu_:
  bool draining = false;
  bool declined = false;
  TimePoint drain_deadline{};
};

class Member {
 public:
  // Hooks that exist only so the simulator can prove its checker can fail. Never set them in
  // production: each one removes a safety mechanism.
  struct UnsafeTestHooks {
    bool commit_without_fence = false;  // commits overwrite the record whatever its epoch
  };

  struct Options {
    // Runs the planner. Null = inline on the control loop (manual mode / simulation).
    std::unique_ptr<PlanRunner> plan_runner;
    // Runs bulk store work (plan seeding). Null = in order on the control loop.
    std::unique_ptr<BulkExecutor> bulk;
    // Called (from any thread) when the member wants step() to run soon.
    std::function<void()> wake;
    // Per-process nonce; empty = from nonce_source (or random).
    std::string nonce;
    // Produces the nonce of every new session (the simulator makes them deterministic).
    std::function<std::string()> nonce_source;
    UnsafeTestHooks unsafe;
  };

  Member(CoordinatorConfig config, std::shared_ptr<KvStore> store, std::shared_ptr<Planner> planner,
         const Clock& clock, MetricsRegistry& metrics, Options options);
  ~Member();

  // Runs one step at clock.now(); returns when the next one is due (now if work is pending).
  TimePoint step();

  // Replaces the plan runner (Coordinator::start moves the planner onto its own thread).
  void set_plan_runner(std::unique_ptr<PlanRunner> runner);
  void set_bulk_executor(std::unique_ptr<BulkExecutor> bulk);

  // Synchronous first join (thread mode): probe the store, open the session, check the job's
  // fingerprint. Throws ConfigError / StoreError as Coordinator::start documents.
  void join_now();

  // --- user API (thread-safe, see Coordinator) ---
  std::optional<Event> poll_event();
  std::optional<Event> wait_event(std::chrono::milliseconds timeout);
  // `epoch`: the caller's tenancy, or kAnyEpoch (see Coordinator).
  CommitResult commit(std::string_view id, const SplitProgress& progress, std::uint64_t epoch);
  CommitResult complete(std::string_view id, const SplitProgress& progress, std::uint64_t epoch);
  CommitResult fail(std::string_view id, std::string_view reason, std::uint64_t epoch);
  CommitResult release_drained(std::string_view id, std::uint64_t epoch);
  void release(std::span<const std::string> ids);
  void decline_revoke(std::string_view id, std::uint64_t epoch);
  void shutdown();  // graceful: release all, step down, leave (takes mu_)
  void abandon();   // crash: stop without writing anything

  // --- introspection (thread-safe) ---
  const std::string& instance_id() const { return instance_; }
  TimePoint clock_now() const { return clock_.now(); }
  std::string nonce() const;
  // Session `session` (SplitGranted::session) is provably live by this member's clock (see
  // SessionDeadline); lock-free. session_live_until: until when (min() if not live).
  bool session_live(std::uint64_t session) const { return live_.live(session, clock_.now()); }
  TimePoint session_live_until(std::uint64_t session) const { return live_.until(session); }
  bool is_leader() const;
  bool stopped() const;
  std::vector<std::string> held_ids() const;
  // The assignment this member currently follows (nullopt: no record).
  std::optional<std::vector<std::string>> assignment() const;
  // Leader-only view of what it last published, member -> splits.
  std::map<std::string, std::vector<std::string>> published_assignment() const;
  std::uint64_t publishes() const;  // assignment records written by this member as leader

 private:
  struct MemberView {
    core::MemberRecord rec;
    Revision rev = 0;
    TimePoint changed_at{};
  };
  using LeaseView = LeaseTable::Entry;
  struct AssignView {
    core::AssignmentRecord rec;
    Revision rev = 0;
    bool readable = true;  // false: garbage at `rev` (no instruction; the leader rewrites it)
  };
  // A record the protocol never deletes or writes unreadable, found unreadable or deleted: damage
  // from outside (healing.cpp). `rev` is the damaging write's revision (the delete's for a
  // delete), `since` when this member saw it, `last` the last readable record (splits).
  struct Damage {
    Revision rev = 0;
    bool deleted = false;
    TimePoint since{};
    std::string error;
    std::optional<core::SplitRecord> last;
  };
  struct SplitView {
    core::SplitRecord rec;
    Revision rev = 0;
  };
  struct WatchSlot {
    std::string prefix;
    std::unique_ptr<Watch> watch;
    bool caught_up = false;
  };
  struct SeedJob {
    std::vector<PlannedSplit> splits;
    std::size_t next = 0;
    PlanFinality finality = PlanFinality::final;
    std::optional<std::string> cursor;
    bool repair = false;  // a re-plan to rewrite damaged specs and records (healing.cpp)
  };

  // session.cpp
  void ensure_session(TimePoint now);
  void open_session(TimePoint now);
  void renew_session(TimePoint now);
  void check_starvation(TimePoint now);
  TimePoint live_until(TimePoint sent) const;
  void renewed(TimePoint sent);  // sets last_renew_sent_ok_ and the lanes' deadline together
  void lose_all(LossReason reason);
  void go_fatal(const std::string& message, LossReason reason = LossReason::twin);
  std::string fresh_nonce();

  // views.cpp
  void ensure_watches();
  void close_watches();
  void open_watch(WatchSlot& slot);
  bool drain_watches(TimePoint now);  // true if events remain
  void on_job_event(const WatchEvent& e, TimePoint now);
  void on_member_event(const WatchEvent& e, TimePoint now);
  void on_lease_event(const WatchEvent& e);
  void on_assign_event(const WatchEvent& e);
  void on_split_event(const WatchEvent& e, TimePoint now);
  // Sets splits_[id] (leader), keeping the completed/quarantined tallies and the dirty flag.
  void put_split_view(const std::string& id, core::SplitRecord rec, Revision rev);
  void count_split(const core::SplitRecord& r, bool add);
  void on_cordon_event(const WatchEvent& e);
  // A put whose value cannot be decoded: the view stops trusting the key (see healing.cpp).
  void on_unreadable(const WatchEvent& e, const std::string& error, TimePoint now);

  // job_controls.cpp (issue 19): the operator's pause, the planner-failure policy
  void on_pause_event(const WatchEvent& e);
  // Counts a planner failure; at max_planner_failures writes the plan's `failed` verdict and
  // returns true (the caller stops retrying).
  bool give_up_on_planner(const std::string& error, TimePoint now);
  bool session_live(const std::string& instance, const std::string& nonce) const;

  TimePoint next_wake(TimePoint now, bool more);

  // liveness.cpp
  void expire_peers(TimePoint now);
  Duration expiry_wait(const std::string& id, const MemberView& v) const;
  bool erase_dead_lease(const std::string& split_id);
  // Guarded delete of lease.{id} at `rev`; a lost race re-reads the lease and refreshes the view
  // (a wrong revision in the view must not keep a lease alive). True if the lease is now gone.
  bool erase_lease_at(const std::string& split_id, Revision rev);
  bool session_confirmed_live(const std::string& instance, const std::string& nonce);

  // leadership.cpp
  void lead(TimePoint now);
  void try_elect(TimePoint now);
  bool take_term();
  void step_down(const char* why);
  void advance_planning(TimePoint now);
  void seed_slice();
  void finish_seeding();
  void update_tallies(TimePoint now);
  void set_tallies(core::PlanRecord& next);
  // Leader: true while the split view holds fewer records than the plan counts (see .cpp).
  bool split_view_short(TimePoint now);
  bool write_plan(const core::PlanRecord& next);

  // healing.cpp
  void heal(TimePoint now);
  void heal_leader_record(TimePoint now);
  void heal_plan();
  void heal_splits();
  bool heal_split(const std::string& id, Damage& d);
  void find_missing_splits();
  void repair_seeded(const PlannedSplit& s);
  std::uint64_t known_split_count() const;
  std::uint64_t highest_term_seen() const;
  void note_term(std::uint64_t term) { max_term_seen_ = std::max(max_term_seen_, term); }
  // Logs a warning about `key` at most once per lease (a record read directly every retry).
  void warn_throttled(const std::string& key, const std::string& message);

  // publish.cpp
  void publish_assignment(TimePoint now);
  void cleanup_departed(TimePoint now);
  void note_departure(const std::string& instance, TimePoint now);
  void note_arrival(const std::string& instance);

  // reconcile.cpp
  void reconcile(TimePoint now);
  void try_claim(const std::string& id, TimePoint now);
  void claim(const std::string& id, TimePoint now);
  // Reads spec.{id} into spec_cache_ unless cached; the cached spec, or null if it does not exist.
  // The pointer is valid until spec_cache_ changes. Throws store and record errors.
  const SplitSpec* load_spec(const std::string& id);
  void prefetch_spec(const std::string& id);  // load_spec, ignoring retryable store errors
  std::optional<std::string> check_spec(const std::string& id, TimePoint now);
  void begin_revocation(const std::shared_ptr<Held>& h, TimePoint now);
  void force_due_revocations(TimePoint now);
  void observe_completion();

  // split_ops.cpp (Held::io must be held by the caller where noted)
  std::shared_ptr<Held> find_held(std::string_view id) const;
  CommitResult write_record(Held& h, const core::SplitRecord& next, const char* what);  // io held
  CommitResult release_locked(Held& h);                                                 // io held
  void erase_lease(const Held& h);
  void drop_held(Held& h, std::optional<LossReason> reason);  // io held
  void retry_lease_erases();
  void push_event(Event e);

  // Members of this class that step() maintains (guarded by mu_).
  const CoordinatorConfig config_;
  const std::shared_ptr<KvStore> store_;
  const std::shared_ptr<Planner> planner_;
  const Clock& clock_;
  MemberMetrics metrics_;
  Options options_;
  const std::string instance_;
  const std::string fingerprint_;

  mutable std::mutex mu_;
  std::string nonce_;  // guarded by mu_ and shared_mu_ (written with both held)
  bool session_open_ = false;
  bool stopped_ = false;
  Revision session_rev_ = 0;
  core::MemberRecord session_rec_;
  TimePoint last_renew_sent_ok_{};
  SessionDeadline live_;  // thread-safe on its own: read by user threads
  TimePoint next_renew_{};
  TimePoint retry_at_{};  // backoff after a store failure of the loop

  WatchSlot w_job_, w_members_, w_leases_, w_assigns_, w_splits_, w_cordons_;
  std::optional<std::pair<core::LeaderRecord, Revision>> leader_view_;
  std::optional<std::pair<core::PlanRecord, Revision>> plan_view_;
  std::map<std::string, MemberView> members_;
  LeaseTable leases_;
  std::map<std::string, AssignView> assigns_;
  std::unordered_map<std::string, SplitView> splits_;  // leader only
  // Split keys whose latest record could not be decoded, or that were deleted (leader only): they
  // count when the leader checks its view against the plan's split_count, and heal_splits()
  // rebuilds them. A garbage record's last readable version stays in splits_ meanwhile.
  std::map<std::string, Damage> split_damage_;
  std::optional<Damage> leader_damage_;  // job.leader is unreadable
  std::optional<Damage> plan_damage_;    // job.plan is unreadable or was deleted
  std::uint64_t max_term_seen_ = 0;      // in any leader, plan or assignment record read
  bool missing_splits_listed_ = false;   // find_missing_splits ran for this shortness episode
  std::map<std::string, TimePoint> spec_absent_since_;  // claims: spec.{id} read as absent
  std::map<std::string, std::string> peer_warned_;      // instance -> nonce warned about
  bool repair_due_ = false;       // a re-plan is needed to rewrite specs or records (healing.cpp)
  bool planning_repair_ = false;  // the plan running now is such a re-plan
  std::set<std::string> parked_specs_;  // splits_ entries parked for their spec (leader)
  // Parked splits a repair re-plan did not list: they stay parked (the job's named end state).
  std::set<std::string> unrepairable_;
  std::map<std::string, TimePoint> warned_at_;  // warn_throttled, bounded
  std::optional<TimePoint> split_view_short_since_;
  bool split_view_rewatched_ = false;
  std::set<std::string> cordons_;  // leader only
  std::map<std::string, TimePoint> claim_retry_at_;
  std::vector<std::pair<std::string, Revision>> pending_lease_erases_;
  // Specs read for claims in progress (and prefetched while a split's previous owner drains it),
  // pruned to the assignment on every reconcile pass.
  std::unordered_map<std::string, SplitSpec> spec_cache_;
  // Nonces of this member's own earlier sessions that ended without a crash (starved, expired):
  // reclaiming their splits is not poison evidence and consumes no attempt. Bounded.
  std::deque<std::string> benign_nonces_;

  // Leadership (guarded by mu_).
  bool leader_ = false;
  std::uint64_t term_ = 0;
  Revision leader_rev_ = 0;
  core::RebalanceDelay delay_;
  bool assignment_dirty_ = true;
  TimePoint last_assignment_at_{};
  std::optional<SeedJob> seeding_;
  bool planning_ = false;
  TimePoint next_plan_at_{};
  Duration plan_backoff_{};
  std::uint64_t completed_count_ = 0;
  std::uint64_t quarantined_count_ = 0;
  TimePoint last_tally_write_{};
  std::map<std::string, std::vector<std::string>> published_;
  std::uint64_t publishes_ = 0;
  bool seen_complete_ = false;
  bool seen_stalled_ = false;
  // job_controls.cpp: job.pause exists (the leader assigns nothing); consecutive planner failures.
  bool paused_ = false;
  std::uint32_t planner_failures_ = 0;

  // Held splits and events (guarded by shared_mu_).
  mutable std::mutex shared_mu_;
  std::condition_variable event_cv_;
  std::map<std::string, std::shared_ptr<Held>> held_;
  std::deque<Event> events_;
  bool leader_flag_ = false;  // mirror of leader_ for is_leader()
  std::optional<std::vector<std::string>> assignment_mirror_;
};

}  // namespace etlc::runtime
