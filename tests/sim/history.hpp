// History: the simulator's ground truth and its safety checker.
//
// Every write that reaches the shared MemoryStore passes through a RecordingStore, which reports
// it here with the identity of the process that sent it (instance, session nonce, the user call
// it belonged to). History keeps a decoded shadow of the store, the versions each key had (for
// stale reads), what every lane emitted, and checks each write against the invariants of issue 7
// the moment it lands:
//
//   1  durable progress of a split never regresses (watermark, epoch, terminal status)
//   2  every write to split.{id} is a claim that bumps the epoch, or is made by the owner of the
//      split's current epoch (instance and nonce); a call told "fenced" wrote nothing
//   3  no commit covers a record no lane emitted; a completed split covers all its records. Over
//      record ranges: a split covers [lo, end) of its base split's records, where a residual's
//      range is the one its spec names and a split with residuals ends where its last one begins;
//      a cut gives away only records no lane has emitted, from the tail of the split's range
//   4  complete only when every split completed; stalled only with the rest quarantined;
//      quarantine only after max_attempts non-graceful ends, and an attempt is consumed only by a
//      real one (the previous owner's session is gone, or the owner called fail())
//   6  a session is expired by a peer only after its renewals stopped for a lease (judged on the
//      owner's own clock, allowing for the skew bound), and a running member has stopped its
//      lanes by then (self-fencing precedes expiry)
//   9  (end of a run that completes) every planned record was emitted, and the ranges of every
//      planned split's family (itself and its residuals, recursively, all completed) partition
//      its records: no gap, no overlap (re-emission by at-least-once replay is fine)
// Dynamic splitting (issue 17) is checked as it happens: spec.{child} and its pending record are
// written by the owner of the tenancy the child's id names; the parent's CAS naming the child is
// that owner's commit, after the child's record exists; only a named child becomes runnable; only
// a child nobody names is deleted.
//
// Invariant 5 (liveness) is checked by the World, which owns the phases. The first violation is
// kept (later ones are counted).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/records.hpp"
#include "etlc/fault_injecting_store.hpp"
#include "etlc/store.hpp"
#include "scenario.hpp"
#include "sim_clock.hpp"
#include "trace.hpp"

namespace etlc::sim {

struct Violation {
  int invariant = 0;
  std::string message;
  VirtualNs at = 0;
};

// The writer of the simulated operator's damaging writes (an outsider: not a member).
inline constexpr std::int32_t kOperatorInc = -2;

// Who sent a write: one member process (incarnation) and the call it was part of.
struct Writer {
  std::int32_t inc = -1;
  std::string instance;
  std::string nonce;       // the process's session nonce when the write was sent
  std::uint64_t call = 0;  // the simulator's number of the member call that sent it
};

// What History needs to know about the fleet (implemented by the World).
class FleetView {
 public:
  virtual ~FleetView() = default;
  virtual const SimClock* clock_of(std::int32_t inc) const = 0;
  // The incarnation is alive (not crashed, not stopped) and was not paused since virtual time t.
  virtual bool running_since(std::int32_t inc, VirtualNs t) const = 0;
  virtual std::size_t held_count(std::int32_t inc) const = 0;
};

struct SplitTruth {
  std::size_t index = 0;  // the planned split whose records it reads (a residual's base)
  core::SplitRecord rec;
  Revision rev = 0;
  bool exists = false;
  std::uint32_t nongraceful = 0;  // non-graceful ends the checker saw (takeovers, fail())
  // Its records, [lo, hi) of the base split's: all of them for a planned split, the range its
  // spec names for a residual. It ends at hi, or where its last child's range begins.
  std::uint64_t lo = 0, hi = 0;
  std::string parent;           // a residual's: the split it was cut from ("" for a planned one)
  std::uint64_t cut_epoch = 0;  // ... and the tenancy that cut it
  // Who owned each of its tenancies (epoch -> instance, nonce), from the claims.
  std::map<std::uint64_t, std::pair<std::string, std::string>> tenants;
  // The operator overwrote or deleted split.{id}: the next landed write must be a rebuild
  // (above every epoch the split had; `rec` keeps the last readable record meanwhile).
  bool damaged = false;
  bool spec_damaged = false;    // spec.{id} was damaged and not rewritten since
  std::uint64_t max_epoch = 0;  // the highest epoch any record of the split had
};

struct MemberTruth {
  core::MemberRecord rec;
  Revision rev = 0;
  VirtualNs written_at = 0;
  std::int32_t writer_inc = -1;
  bool damaged = false;  // the operator overwrote it: it vouches for nothing until rewritten
};

struct HistoryStats {
  std::uint64_t writes = 0;
  std::uint64_t claims_fresh = 0, claims_released = 0, claims_takeover = 0, claims_reclaim = 0;
  std::uint64_t claims_without_lease = 0;  // claim CAS landed while the claimer held no lease
  std::uint64_t commits = 0, releases = 0, completes = 0, fails = 0, quarantines = 0;
  std::uint64_t expiries = 0;    // sessions deleted by peers
  std::uint64_t duplicates = 0;  // records emitted more than once (at-least-once replays)
  std::uint64_t emitted = 0;
  std::uint64_t stale_misreports = 0;  // 'durable' outcomes a stale read made untrue
  std::uint64_t operator_writes = 0;   // records the simulated operator damaged
  std::uint64_t rebuilds = 0;          // split records rebuilt after damage
  std::uint64_t parked = 0;            // splits parked because their spec was damaged
  std::uint64_t requeued = 0;          // parked splits requeued after their spec was rewritten
  std::uint64_t cuts = 0;              // parents' CASes naming a residual
  std::uint64_t flips = 0;             // residuals made runnable
  std::uint64_t orphans = 0;           // residuals deleted unnamed
};

// A residual's descriptor in the simulated source: "base lo hi", records [lo, hi) of base split
// `base` (a planned split's descriptor is its record count).
struct ResidualRange {
  std::size_t base = 0;
  std::uint64_t lo = 0, hi = 0;
};

class History {
 public:
  History(const RunParams& params, const VirtualTime& time, Trace& trace, const FleetView& fleet);

  // A write that reached the store (create/update/erase) with its result. Non-landed writes
  // (ok == false) only go to the trace.
  void on_write(OpKind kind, std::string_view key, std::string_view value, const WriteResult& r,
                const Writer& w);

  // A lane emitted records [first, first + count) of the base split with this index.
  void on_emit(std::int32_t inc, std::size_t split, std::uint64_t first, std::uint64_t count);

  // A user call (number `call`) returned `fenced` for this split: it must not have written, and
  // nothing it sent may land later.
  void on_fenced(std::uint64_t call, std::string_view split_id);
  // A user call returned `durable`: the store must hold it (epoch still the caller's).
  // With `owner` (a commit), the record must still name it. A member that was served stale
  // reads (outside the store contract) may be misled about its own outcome: with `strict` false a
  // mismatch is counted as a stale-read anomaly instead of a violation.
  void on_durable(std::uint64_t call, std::string_view split_id, std::uint64_t epoch,
                  std::uint64_t watermark, const char* what,
                  const std::optional<std::pair<std::string, std::string>>& owner, bool strict);

  // The keys a call wrote so far (landed writes only).
  std::vector<std::string> keys_in_call(std::uint64_t call) const {
    auto it = call_writes_.find(call);
    return it == call_writes_.end() ? std::vector<std::string>() : it->second;
  }
  // The call ended: forget what it wrote (kept only to judge its outcome).
  void end_call(std::uint64_t call) { call_writes_.erase(call); }

  // An incarnation reported AllComplete / Stalled: the store must back it.
  void on_verdict_event(std::int32_t inc, bool complete);

  // The value `key` had at virtual time t (for stale reads); nullopt if absent then. Exact for
  // t >= now - kMaxStaleNs.
  std::optional<Entry> value_at(std::string_view key, VirtualNs t) const;
  static constexpr VirtualNs kMaxStaleNs = 2 * kNsPerS;

  // --- truth, for the World's liveness checks ---
  const std::unordered_map<std::string, SplitTruth>& splits() const { return splits_; }
  const std::map<std::string, MemberTruth>& members() const { return members_; }
  const std::map<std::string, core::LeaseRecord>& leases() const { return leases_; }
  const std::map<std::string, core::AssignmentRecord>& assigns() const { return assigns_; }
  const std::optional<core::PlanRecord>& plan() const { return plan_; }
  const std::optional<core::LeaderRecord>& leader() const { return leader_; }
  std::uint64_t assign_writes() const { return assign_writes_; }
  bool session_live(const std::string& instance, const std::string& nonce) const;
  // The session record still belongs to this session: not deleted, not taken by another nonce.
  // Unlike session_live, an operator's damage does not end it (its owner replaces the record).
  // Nor does the operator's delete: the session's owner cannot know of it before its next
  // renewal, and nothing but expiry (after a lease without renewals) ends a session by the rules.
  bool session_not_ended(const std::string& instance, const std::string& nonce) const {
    if (operator_ended_.count(instance + '\n' + nonce)) return true;
    auto it = members_.find(instance);
    return it != members_.end() && it->second.rec.nonce == nonce;
  }
  // The base index of a planned split or of a residual whose spec was seen; npos otherwise.
  std::size_t split_index(std::string_view id) const;
  static std::string split_id(std::size_t index);
  static std::string residual_descriptor(const ResidualRange& r);
  static std::optional<ResidualRange> parse_residual(std::string_view descriptor);
  // Where the split's range ends with `rec` (its last child's start, or hi), and its length.
  std::uint64_t end_of(const SplitTruth& t, const core::SplitRecord& rec) const;
  std::uint64_t length(const SplitTruth& t) const { return end_of(t, t.rec) - t.lo; }
  // A split of the job: planned, or a residual its parent's record names.
  bool job_split(const SplitTruth& t) const;
  // How many times each record of base split `index` was emitted.
  const std::vector<std::uint32_t>& emitted(std::size_t index) const { return emitted_[index]; }
  // Invariant 9, at the end of a run that completed.
  void check_final();

  const std::optional<Violation>& violation() const { return violation_; }
  std::uint64_t violation_count() const { return violations_; }
  void fail(int invariant, std::string message);
  const HistoryStats& stats() const { return stats_; }

 private:
  struct Version {
    VirtualNs at = 0;
    bool live = false;
    std::string value;
    Revision rev = 0;
  };

  void record_version(std::string_view key, bool live, std::string_view value, Revision rev);
  void check_split_write(OpKind kind, const std::string& id, std::string_view value, Revision rev,
                         const Writer& w);
  void check_split_update(SplitTruth& t, const core::SplitRecord& old,
                          const core::SplitRecord& next, const Writer& w);
  void check_covered(const SplitTruth& t, const core::SplitRecord& rec, const char* what);
  // Dynamic splitting: the residual's spec and record, the parent's cut, the leader's flip and
  // orphan deletes (see the top of this file).
  void on_child_spec(OpKind kind, const std::string& id, std::string_view value, const Writer& w);
  bool check_child_write(SplitTruth& t, OpKind kind, const core::SplitRecord* next,
                         const Writer& w);
  void check_cut(const SplitTruth& t, const core::SplitRecord& old, const core::SplitRecord& next,
                 const Writer& w);
  bool owned_tenancy(const SplitTruth& parent, std::uint64_t epoch, const Writer& w) const;
  bool named(const std::string& child) const;  // a residual its parent's record names
  void check_family(std::size_t base);
  void check_member_write(OpKind kind, const std::string& id, std::string_view value, Revision rev,
                          const Writer& w);
  void on_operator_write(OpKind kind, std::string_view key);
  // The write to a damaged split record (the rebuild) or around a damaged spec (park, requeue).
  bool check_repair(SplitTruth& t, OpKind kind, const core::SplitRecord& next, const Writer& w);
  void check_plan_write(std::string_view value);
  void check_verdict(const core::PlanRecord& plan, const char* who, bool tallies_carried = false);

  const RunParams& params_;
  const VirtualTime& time_;
  Trace& trace_;
  const FleetView& fleet_;

  std::unordered_map<std::string, SplitTruth> splits_;
  std::vector<std::vector<std::uint32_t>> emitted_;  // per base split, per record
  std::map<std::string, MemberTruth> members_;
  std::set<std::string> operator_ended_;  // "instance\nnonce" of sessions the operator deleted
  std::map<std::string, core::LeaseRecord> leases_;
  std::map<std::string, core::AssignmentRecord> assigns_;
  std::optional<core::PlanRecord> plan_;
  std::optional<core::LeaderRecord> leader_;
  std::uint64_t max_plan_term_ = 0;
  std::uint64_t assign_writes_ = 0;
  std::unordered_map<std::string, std::deque<Version>> versions_;
  std::map<std::uint64_t, std::vector<std::string>> fenced_calls_;  // call -> split ids
  std::map<std::uint64_t, std::vector<std::string>> call_writes_;   // call -> keys written

  std::optional<Violation> violation_;
  std::uint64_t violations_ = 0;
  HistoryStats stats_;
};

}  // namespace etlc::sim
