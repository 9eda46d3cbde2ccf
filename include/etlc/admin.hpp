// JobAdmin: the operator's view of a job, the interventions the protocol leaves to operators
// (returning quarantined splits to the pool, cordoning a member for maintenance) and the job's
// lifecycle (pause, resume, reset, seek; deleting a bucket is the store's: NatsStore).
//
// It reads and writes the job's records through the same KvStore the members use; it is not a
// member (it holds no session, never leads, never claims). The `etlc` command-line tool is built
// on this class alone.
//
// Reads (job_exists, status, splits) are point-in-time listings of the job's records. Nothing in
// them can crash: a record that cannot be decoded (hand-written garbage, an alien version, a key
// whose id does not decode) is reported in `garbage` with its key and the reason, and otherwise
// ignored, exactly as the members ignore it. A status is assembled from several listings taken
// one after another, so on a busy job it may mix moments (a split may appear both leased and
// released); the next status converges.
//
// Writes are compare-and-swaps on the records the protocol already defines, so they race safely
// with the members:
//  * requeue   split.{id}: quarantined -> runnable, attempts reset to 0, owner cleared (epoch,
//              progress and last_error kept). Anything not quarantined is refused. The leader sees
//              the split become runnable and assigns it like any other.
//  * cordon    creates (or rewrites) cordon.{instance} {instance, reason}. The leader treats a
//              cordoned member as having a lane budget of zero: it assigns it nothing and moves
//              its splits away by cooperative revocation (drain to a final commit, release, no
//              replay), so the member can then be stopped with nothing left to take over. The
//              member itself keeps running and renewing its session; removing the record
//              (uncordon) gives it its lanes back.
//  * pause     creates job.pause {reason, by, since}. While it exists the leader assigns nothing:
//              every member drains and releases what it holds (no attempt consumed, no replay)
//              and claims nothing. resume deletes it; work continues from the committed progress.
//              resume also clears a plan the leader gave up on (verdict failed: the planner failed
//              max_planner_failures times), so the leader plans again.
//  * reset     forgets all progress: deletes every split, spec, lease, assignment, session, the
//              standby record and the leader record, and rewrites the plan record unplanned (same
//              fingerprint), so the next leader re-plans from scratch. Cordons and a pause are
//              kept. The plan record keeps the highest term the job had (the term floor): a later
//              leader's term is above every term before the reset, so a deposed leader's late
//              writes stay fenced. Refused while any member's session is live.
//  * seek      sets one split's progress (watermark and state) back or forward by CAS on its
//              record, bumping its epoch (fencing any lane of an earlier tenancy, and making a
//              member that held it before resume from the new progress). A completed split
//              becomes runnable again (its plan goes back to running). Refused while a live
//              member holds the split.
//  Liveness (reset, seek, check_sessions): the store keeps no timestamps, so a session is live
//  when its record is seen to change (members renew every lease/3); JobAdmin watches for up to
//  the sessions' lease (bounded by the caller's max_wait) before it decides. A session that does
//  not change within its own lease is silent: its process is gone and nobody expired it.
//
// Errors: StoreError from the store propagates out of job_exists, status, splits, cordon and
// uncordon (unavailable / unknown_outcome: retry; closed; ...). requeue reports a store failure
// per split instead (RequeueOutcome::failed) and skips the rest, so the caller learns what was
// already done. Invalid arguments (an id that is empty, not UTF-8 or too long; an over-long
// reason; too many ids) throw ConfigError naming the rule, before anything is written. pause,
// resume, check_sessions, reset and seek let StoreError propagate; a record that kept changing
// under pause or resume is an Error saying so (nothing half-done: each is one CAS), and reset
// is resumable (run it again) if a store failure interrupts its deletes.
//
// Ownership and thread safety: the store and the clock are borrowed and must outlive the JobAdmin.
// Every method may be called from any thread; calls are independent except for the observation
// memory behind the `observed_for` / `unchanged_for` durations (guarded by an internal mutex).
// The clock is read only to measure those durations.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/clock.hpp"
#include "etlc/detail/mutex.hpp"
#include "etlc/planner.hpp"
#include "etlc/split.hpp"
#include "etlc/store.hpp"

namespace etlc {

// Limits of the operator API.
inline constexpr std::size_t kMaxCordonReasonBytes = 1024;
inline constexpr std::size_t kMaxRequeueIds = 10'000;
// Reports are bounded: at most this many garbage records and moves are listed (totals are
// always counted exactly).
inline constexpr std::size_t kMaxGarbageReported = 100;
inline constexpr std::size_t kMaxMovesReported = 1'000;

// The state of a split's durable record.
// pending: a residual cut from a split under way (dynamic splitting) that is not claimable yet.
enum class SplitState : std::uint8_t { runnable, completed, quarantined, pending };
std::string_view to_string(SplitState s) noexcept;
// "runnable" / "completed" / "quarantined" / "pending", or nullopt.
std::optional<SplitState> parse_split_state(std::string_view text) noexcept;

// The completion verdict of a plan.
// failed: the leader gave up on the planner (max_planner_failures); PlanStatus::message says why.
enum class PlanVerdict : std::uint8_t { running, complete, stalled, failed };
std::string_view to_string(PlanVerdict v) noexcept;
// "open" / "final".
std::string_view finality_name(PlanFinality f) noexcept;

// A record that could not be read, and why.
struct RecordProblem {
  std::string key;
  std::string error;
};

struct LeaderStatus {
  std::string instance;
  std::string nonce;
  std::uint64_t term = 0;
  // The leader's instance has a session record with the same process nonce. False means the
  // leader record outlived its session (peers expire it after one lease).
  bool has_session = false;
  // How long this JobAdmin has seen this very leader record (instance, nonce, term): 0 on the
  // first look. The store keeps no timestamps, so a single look cannot tell more.
  std::chrono::milliseconds observed_for{0};
};

// The member that keeps the leader's views warm for a failover (job.standby; decision 0009).
struct StandbyStatus {
  std::string instance;
  std::string nonce;
  // Its instance has a session record with the same nonce; false: the leader removes the record.
  bool has_session = false;
};

struct PlanStatus {
  std::string fingerprint;
  std::uint64_t term = 0;  // term of the leader that last wrote the plan
  PlanFinality finality = PlanFinality::final;
  bool planned = false;  // the leader has seeded the plan
  std::uint64_t planned_splits = 0;
  std::uint64_t completed = 0;  // tallies as the leader last wrote them
  std::uint64_t quarantined = 0;
  PlanVerdict verdict = PlanVerdict::running;
  std::string message;  // why the verdict is failed (empty otherwise)
};

// Counts over the split records themselves (not the leader's tallies).
struct SplitCounts {
  std::uint64_t total = 0;
  std::uint64_t runnable = 0;
  std::uint64_t owned = 0;  // runnable splits whose record names an owner
  std::uint64_t completed = 0;
  std::uint64_t quarantined = 0;
  std::uint64_t pending = 0;       // residuals not claimable yet (dynamic splitting)
  std::uint64_t residuals = 0;     // records cut from a split under way, in any status
  std::uint64_t total_weight = 0;  // over every split record (saturating)
};

struct MemberStatus {
  std::string instance;
  // A session record (member.{instance}) exists. A member without one is listed because it
  // still holds leases, has an assignment record or is named owner by a split record: it
  // departed (or was expired) recently.
  bool has_session = false;
  std::string nonce;  // the session's process nonce (empty without a session)
  // The session's job fingerprint equals the plan's (true when there is no plan yet). A member
  // of another configuration is given no lanes.
  bool fingerprint_matches = true;
  std::uint32_t max_in_flight = 0;  // the lane budget the member advertises
  // The lane budget the leader balances against: max_in_flight, or 0 when cordoned, without a
  // session or with a foreign fingerprint.
  std::uint32_t lane_budget = 0;
  bool cordoned = false;
  std::string cordon_reason;
  std::uint64_t held = 0;  // splits whose lease names this instance
  // Splits in its assignment record; nullopt when it has none (it then holds what it has and
  // claims nothing).
  std::optional<std::uint64_t> assigned;
  std::uint64_t assignment_term = 0;
  std::uint64_t draining = 0;     // held but no longer assigned: revocations in progress
  std::uint64_t weight_held = 0;  // total weight of the splits it holds (saturating)
  // What remains to do of the runnable splits whose record names it as owner: the sum of
  // weight - min(done, weight) (saturating). What the leader balances on.
  std::uint64_t weight_remaining = 0;
  double weight_share = 0.0;           // weight_held / the weight held by all members (0..1)
  std::uint64_t renewals = 0;          // the session record's renewal counter
  std::chrono::milliseconds lease{0};  // the member's lease duration
  // renewals x lease / 3 (one renewal per third of a lease): how long this instance id has had
  // a session record, across restarts that adopted it. An estimate: retried renewals make it
  // run slow, it never runs fast by more than one renewal.
  std::chrono::milliseconds session_age_estimate{0};
  // How long this JobAdmin has seen this session (instance and nonce); 0 on the first look.
  std::chrono::milliseconds observed_for{0};
  // How long the session record has not changed, as far as this JobAdmin saw (nullopt on the
  // first look). A value above `lease` means the member has stopped renewing.
  std::optional<std::chrono::milliseconds> unchanged_for;
};

// A move in flight: the split is assigned to `to` but its lease is still held by `from`
// (draining, or waiting for `from`'s session to expire).
struct SplitMove {
  std::string split;
  std::string from;
  std::string to;
};

// Balance of the weight held, over members with a session and a lane budget above zero.
struct BalanceStatus {
  std::size_t members = 0;
  std::uint64_t max_load = 0;  // the largest weight_held among them
  double mean_load = 0.0;
  double max_over_mean = 0.0;  // 1.0 is perfect balance; 0 when nothing is held
};

// The job's progress by weight (issue 16): how much of the planned weight is done, from the
// leader's job.progress record when it can be read, else counted over the split records (which
// carry no rate). Weight is in the planner's units (bytes of a file backfill, rows of a range).
enum class ProgressSource : std::uint8_t {
  leader_record,  // job.progress, as the leader of `term` last wrote it (at most once a
                  // progress_interval, so it may lag the split records by that much)
  split_records,  // no readable, current job.progress: summed over this status's split records
};
std::string_view to_string(ProgressSource s) noexcept;

// What became of the job.progress record. stale: written by a leader of an earlier term than the
// current leader record's (a release that does not write it leads now, or the new leader has not
// written yet): not used, the figures are counted instead.
enum class ProgressRecordState : std::uint8_t { ok, absent, unreadable, stale };
std::string_view to_string(ProgressRecordState s) noexcept;

struct WeightProgress {
  ProgressSource source = ProgressSource::split_records;
  ProgressRecordState record = ProgressRecordState::absent;
  std::uint64_t term = 0;       // the term of the leader that wrote job.progress (0: none readable)
  std::uint64_t planned = 0;    // weight of every split
  std::uint64_t done = 0;       // completed, plus what runnable splits reported done
  std::uint64_t remaining = 0;  // weight of runnable splits not yet done (quarantined: neither)
  // Done weight per second, recently (leader_record only); nullopt when unknown.
  std::optional<std::uint64_t> rate_per_s;

  // done / planned in 0..1; nullopt when nothing is planned.
  std::optional<double> fraction_done() const noexcept;
  // remaining / rate, rounded up to the millisecond; nullopt without a rate or at rate 0.
  std::optional<std::chrono::milliseconds> eta() const noexcept;
};

// The operator's pause (job.pause), as recorded by whoever paused.
struct PauseStatus {
  std::string reason;
  std::string by;              // "user@host" of whoever paused (free text)
  std::uint64_t since_ms = 0;  // Unix time in ms by the pauser's clock
};

struct JobStatus {
  // False when the store holds nothing of a job: no plan, no leader, no session.
  bool found = false;
  std::optional<PauseStatus> paused;  // set while the job is paused
  std::optional<LeaderStatus> leader;
  std::optional<StandbyStatus> standby;  // none: no member stands by (the leader is alone, or
                                         // targeted watches are off, or it just failed over)
  std::optional<PlanStatus> plan;
  SplitCounts splits;
  WeightProgress progress;
  // Remaining weight of runnable splits whose record names no owner: queued work.
  std::uint64_t unowned_remaining = 0;
  std::vector<MemberStatus> members;  // sorted by instance id
  std::vector<SplitMove> moves;       // sorted by split id; at most kMaxMovesReported
  std::uint64_t moves_total = 0;
  BalanceStatus balance;
  std::vector<RecordProblem> garbage;  // sorted by key; at most kMaxGarbageReported
  std::uint64_t garbage_total = 0;
};

struct SplitFilter {
  std::optional<SplitState> status;
  std::optional<std::string> owner;  // the instance named by the split record
  std::size_t limit = 0;             // rows returned at most; 0 = all
};

struct SplitRow {
  std::string id;
  SplitState status = SplitState::runnable;
  std::optional<std::string> owner;        // the record's owner (the fence)
  std::optional<std::string> lease_owner;  // the instance whose lease exists, if any
  std::uint64_t epoch = 0;
  std::uint32_t attempts = 0;
  std::uint64_t weight = 0;
  std::uint64_t watermark = 0;
  std::optional<std::string> last_error;
  std::optional<std::string> parent;  // the split it was cut from (dynamic splitting), if any
  std::uint32_t children = 0;         // residuals cut from it
};

struct SplitListing {
  std::vector<SplitRow> rows;          // sorted by split id (bytewise)
  std::uint64_t matched = 0;           // rows that matched the filter, before the limit
  std::vector<RecordProblem> garbage;  // at most kMaxGarbageReported
  std::uint64_t garbage_total = 0;
};

enum class RequeueOutcome : std::uint8_t {
  requeued,         // the record is runnable again with attempts 0
  not_quarantined,  // refused: the split is runnable or completed (see `status`)
  not_found,        // no split record with this id
  unreadable,       // the record cannot be decoded; nothing written
  conflict,         // the record kept changing under us; nothing written, try again
  failed,           // the store failed (see `detail`); the outcome of this id is unknown only
                    // if `detail` says so
  skipped,          // not attempted because an earlier id failed
};
std::string_view to_string(RequeueOutcome o) noexcept;

struct RequeueResult {
  std::string split;
  RequeueOutcome outcome = RequeueOutcome::skipped;
  std::optional<SplitState> status;  // the state found (before the write)
  std::uint32_t attempts_before = 0;
  std::string detail;  // why, for anything but requeued
};

enum class CordonOutcome : std::uint8_t {
  cordoned,   // the record was created
  updated,    // it existed with another reason (or was unreadable) and was rewritten
  unchanged,  // it existed with the same reason
};
std::string_view to_string(CordonOutcome o) noexcept;

struct CordonResult {
  CordonOutcome outcome = CordonOutcome::cordoned;
  // The instance has a session record right now. Cordoning an absent instance is allowed (it
  // takes effect when it joins); the caller may want to warn about a typo.
  bool has_session = false;
};

enum class UncordonOutcome : std::uint8_t { uncordoned, not_cordoned };
std::string_view to_string(UncordonOutcome o) noexcept;

// Limits of the lifecycle API.
inline constexpr std::size_t kMaxPauseReasonBytes = 1024;
inline constexpr std::size_t kMaxPausedByBytes = 256;

enum class PauseOutcome : std::uint8_t { paused, already_paused };
std::string_view to_string(PauseOutcome o) noexcept;
struct PauseResult {
  PauseOutcome outcome = PauseOutcome::paused;
  PauseStatus pause;  // the record as it stands (for already_paused: the earlier one)
};

enum class ResumeOutcome : std::uint8_t { resumed, not_paused };
std::string_view to_string(ResumeOutcome o) noexcept;
struct ResumeResult {
  ResumeOutcome outcome = ResumeOutcome::resumed;
  // The plan's failed verdict was cleared (the leader plans again); its message.
  bool plan_failure_cleared = false;
  std::string plan_failure;
};

// Which sessions are live (see "Liveness" at the top of this file).
struct SessionCheck {
  std::vector<std::string> live;      // changed while watched, or not judged within max_wait
  std::vector<std::string> silent;    // unchanged for their own lease: no process behind them
  std::vector<std::string> departed;  // removed while watched (a graceful exit, an expiry)
  std::chrono::milliseconds watched{0};
  bool any_live() const { return !live.empty(); }
};

enum class ResetOutcome : std::uint8_t { reset, refused_live };
std::string_view to_string(ResetOutcome o) noexcept;
struct ResetResult {
  ResetOutcome outcome = ResetOutcome::reset;
  SessionCheck sessions;
  std::uint64_t term_floor = 0;    // the plan record's term after the reset
  std::uint64_t deleted_keys = 0;  // records removed
  std::uint64_t splits_forgotten = 0;
};

enum class SeekOutcome : std::uint8_t {
  moved,       // the record carries the new progress (and a new epoch)
  held,        // refused: a live member holds the split (see `holder`)
  not_found,   // no split record with this id
  unreadable,  // the record cannot be decoded; nothing written
  conflict,    // the record kept changing; nothing written, try again
};
std::string_view to_string(SeekOutcome o) noexcept;
struct SeekResult {
  std::string split;
  SeekOutcome outcome = SeekOutcome::moved;
  std::optional<SplitState> status_before;
  std::optional<SplitState> status_after;
  std::uint64_t watermark_before = 0;
  std::uint64_t watermark_after = 0;
  std::uint64_t epoch_after = 0;
  std::string holder;  // held: the instance whose lease names the split
  std::string detail;
};

enum class RepairOutcome : std::uint8_t {
  rebuilt,   // the record was unreadable or missing and is rebuilt from the split's spec
  readable,  // nothing to repair: the record decodes
  held,      // refused: a live member holds the split (see `holder`)
  no_spec,   // refused: the spec is missing or unreadable too (`detail` says which)
  conflict,  // the record kept changing; nothing written, try again
};
std::string_view to_string(RepairOutcome o) noexcept;
struct RepairResult {
  std::string split;
  RepairOutcome outcome = RepairOutcome::rebuilt;
  std::uint64_t epoch_after = 0;  // rebuilt: the new epoch (above every earlier tenancy's)
  std::string holder;
  std::string detail;
};

class JobAdmin {
 public:
  explicit JobAdmin(KvStore& store, const Clock& clock = SystemClock::instance());
  JobAdmin(const JobAdmin&) = delete;
  JobAdmin& operator=(const JobAdmin&) = delete;

  // True if the store holds a plan record, a leader record or a session record. Three reads.
  bool job_exists();

  // The whole picture: leader, plan, split counts, members, moves in flight, balance. Lists the
  // job's leader/plan, member, lease, assign, cordon and split records: O(splits) work and memory.
  JobStatus status() ETLC_EXCLUDES(mu_);

  // The leader's job.progress record alone (one get), as status() reports it: nullopt when it
  // is absent or unreadable (status() then counts over the split records). Cheap enough for a
  // progress display to poll.
  std::optional<WeightProgress> job_progress();

  // Split records (and their leases) matching `filter`, sorted by id.
  SplitListing splits(const SplitFilter& filter = {});

  // Returns each quarantined split among `split_ids` to the pool (see the top of this file).
  // One result per distinct id, in the order given. At most kMaxRequeueIds ids.
  std::vector<RequeueResult> requeue(std::span<const std::string> split_ids);

  // Cordons `instance` (see the top of this file). `reason` is free UTF-8 text for other
  // operators, at most kMaxCordonReasonBytes. Idempotent.
  CordonResult cordon(std::string_view instance, std::string_view reason);
  // Removes the cordon record. Idempotent.
  UncordonOutcome uncordon(std::string_view instance);

  // Pauses the job (see the top of this file). `reason` and `by` are free UTF-8 text (at most
  // kMaxPauseReasonBytes / kMaxPausedByBytes); `since_ms` is the caller's wall-clock time.
  // Idempotent: an existing pause is kept as it is (already_paused).
  PauseResult pause(std::string_view reason, std::string_view by, std::uint64_t since_ms);
  // Deletes the pause record and clears a failed plan verdict. Idempotent.
  ResumeResult resume();

  // Watches the job's sessions for up to their lease (at most `max_wait`, real time: this
  // blocks) and says which are live.
  SessionCheck check_sessions(std::chrono::milliseconds max_wait = std::chrono::seconds(60));

  // Forgets all progress (see the top of this file). Refused (nothing written) while a session
  // is live. Blocks for check_sessions(max_wait), then O(records) deletes.
  ResetResult reset(std::chrono::milliseconds max_wait = std::chrono::seconds(60));

  // Sets a split's progress (see the top of this file). `progress.state` at most
  // kMaxProgressStateBytes. Blocks up to max_wait when a lease names the split (to tell a live
  // holder from a dead one).
  // Rebuilds an unreadable or missing split record from its spec: runnable, no progress (the
  // split replays from its start), at an epoch above every earlier tenancy's
  // (core/repair_rules.hpp). Refused while a live member holds the split (blocks up to max_wait
  // to tell, like seek) and when the spec cannot be read either. A live leader rebuilds damaged
  // records by itself; this is for a job no member runs, or one that cannot wait.
  RepairResult repair(std::string_view split_id,
                      std::chrono::milliseconds max_wait = std::chrono::seconds(60));

  SeekResult seek(std::string_view split_id, const SplitProgress& progress,
                  std::chrono::milliseconds max_wait = std::chrono::seconds(60));

 private:
  void reopen_plan();  // seek of a completed split: the plan is running again
  struct SeenSession {
    std::string nonce;
    Clock::time_point first_seen{};
    Revision revision = 0;
    Clock::time_point changed_at{};
  };
  struct SeenLeader {
    std::string instance;
    std::string nonce;
    std::uint64_t term = 0;
    Clock::time_point first_seen{};
  };

  KvStore& store_;
  const Clock& clock_;
  Mutex mu_;  // guards the observation memory below
  std::optional<SeenLeader> seen_leader_ ETLC_GUARDED_BY(mu_);
  std::map<std::string, SeenSession, std::less<>> seen_sessions_ ETLC_GUARDED_BY(mu_);
};

}  // namespace etlc
