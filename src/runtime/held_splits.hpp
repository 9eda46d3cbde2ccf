// HeldSplits: the splits this member holds, the events its user has not taken yet, and the fenced
// operations (commit, complete, fail, release) that lanes run on their own threads.
//
// It is the one part of a member that user threads touch, so it has its own locks and shares
// nothing else with the control loop:
//   * mu_ guards the table of held splits, their revocations, the event queue and the mirrors
//     user threads read (leadership, the followed assignment, the nonce);
//   * each Held::io serialises store I/O on one split between its lane (commit) and the loop
//     (forced release), so lanes of different splits commit in parallel and never wait for the
//     loop.
// Lock order: the Member's loop mutex, then a Held::io, then mu_; never the other way round.
//
// Every write is a CAS on split.{id} at the revision this member last wrote. A conflict is
// resolved by a re-read (core/held_write.hpp): if the record still names this member at the same
// epoch, the write is retried on top of it, keeping what changed there meanwhile (our own earlier
// write whose outcome was unknown, or another writer's change of a field the write does not
// touch); otherwise another member owns a newer epoch and the split is lost (fenced) with
// nothing written.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/records.hpp"
#include "etlc/coordinator.hpp"  // CommitResult, kAnyEpoch
#include "etlc/detail/mutex.hpp"
#include "etlc/events.hpp"
#include "runtime/member_context.hpp"

namespace etlc::runtime {

// One tenancy of a split held by this member. Created by a claim, never reused: a new tenancy of
// the same split is a new Held.
struct Held {
  Held(std::string split_id, SplitSpec split_spec, core::SplitRecord rec, Revision rec_rev,
       Revision lease_revision, std::uint64_t session_serial)
      : id(std::move(split_id)),
        spec(std::move(split_spec)),
        epoch(rec.epoch),
        session(session_serial),
        lease_rev(lease_revision),
        record(std::move(rec)),
        record_rev(rec_rev) {}

  const std::string id;
  const SplitSpec spec;
  const std::uint64_t epoch;    // the tenancy: record.epoch at the claim, for its whole life
  const std::uint64_t session;  // the SessionDeadline serial of the session that claimed it
  const Revision lease_rev;     // lease.{id} as this tenancy created (or adopted) it

  Mutex io;                                      // serialises store I/O on this split
  core::SplitRecord record ETLC_GUARDED_BY(io);  // the last durable record as we wrote or read it
  Revision record_rev ETLC_GUARDED_BY(io) = 0;
  bool gone ETLC_GUARDED_BY(io) = false;  // released or lost: no further I/O, calls report fenced
  int absent_rereads ETLC_GUARDED_BY(io) = 0;  // consecutive re-reads that found no record
};

class HeldSplits {
 public:
  explicit HeldSplits(const MemberContext& ctx) : ctx_(ctx) {}
  HeldSplits(const HeldSplits&) = delete;
  HeldSplits& operator=(const HeldSplits&) = delete;

  // --- user threads (see Coordinator for the meaning of each call) ---
  CommitResult commit(std::string_view id, const SplitProgress& progress, std::uint64_t epoch)
      ETLC_EXCLUDES(mu_);
  CommitResult complete(std::string_view id, const SplitProgress& progress, std::uint64_t epoch)
      ETLC_EXCLUDES(mu_);
  CommitResult fail(std::string_view id, std::string_view reason, std::uint64_t epoch)
      ETLC_EXCLUDES(mu_);
  CommitResult release_drained(std::string_view id, std::uint64_t epoch) ETLC_EXCLUDES(mu_);
  CommitResult split(std::string_view id, const SplitProgress& progress,
                     const SplitResidual& residual, std::uint64_t epoch) ETLC_EXCLUDES(mu_);
  void release(std::span<const std::string> ids) ETLC_EXCLUDES(mu_);
  void decline_revoke(std::string_view id, std::uint64_t epoch) ETLC_EXCLUDES(mu_);

  std::optional<Event> poll_event() ETLC_EXCLUDES(mu_);
  std::optional<Event> wait_event(std::chrono::milliseconds timeout) ETLC_EXCLUDES(mu_);

  // --- the control loop ---
  // A claim landed: hold the split and tell the user (SplitGranted).
  void add(std::shared_ptr<Held> h) ETLC_EXCLUDES(mu_);
  std::shared_ptr<Held> find(std::string_view id) const ETLC_EXCLUDES(mu_);
  std::vector<std::shared_ptr<Held>> all() const ETLC_EXCLUDES(mu_);
  // The splits added (true) and dropped (false) since the last call, in order, so the loop can
  // mirror the held set (Worker) without copying it every step. One consumer only.
  std::vector<std::pair<std::string, bool>> take_held_changes() ETLC_EXCLUDES(mu_);
  std::vector<std::string> ids() const ETLC_EXCLUDES(mu_);
  std::size_t size() const ETLC_EXCLUDES(mu_);
  void push_event(Event e) ETLC_EXCLUDES(mu_);

  // Starts revoking `h` (once; a revocation, once begun, finishes): RevokeRequested to the user,
  // forced at drain_deadline or at once when declined.
  void begin_revocation(const Held& h, TimePoint now) ETLC_EXCLUDES(mu_);
  // Revocations to force now (declined, or past their deadline), each with whether it was
  // declined.
  std::vector<std::pair<std::shared_ptr<Held>, bool>> due_revocations(TimePoint now) const
      ETLC_EXCLUDES(mu_);
  // The earliest moment a revocation becomes due (now for a declined one), if any.
  std::optional<TimePoint> next_revocation_due(TimePoint now) const ETLC_EXCLUDES(mu_);
  std::size_t draining() const ETLC_EXCLUDES(mu_);
  // The leader's split requests in this member's assignment record: SplitRequested to the user,
  // once per (split, epoch, children) asked, for splits held in the tenancy asked.
  void ask_splits(std::span<const core::SplitAsk> asks) ETLC_EXCLUDES(mu_);

  // Clears the record's owner (keeping epoch and progress), then deletes the lease.
  CommitResult release_locked(Held& h) ETLC_REQUIRES(h.io) ETLC_EXCLUDES(mu_);
  // Forgets a held split; with a reason, tells the user it is lost.
  void drop(Held& h, std::optional<LossReason> reason) ETLC_REQUIRES(h.io) ETLC_EXCLUDES(mu_);
  // Drops every held split without writing (the session can no longer be trusted).
  void drop_all(LossReason reason) ETLC_EXCLUDES(mu_);
  // A crash: every held split is gone, no I/O, no event.
  void abandon() ETLC_EXCLUDES(mu_);
  // Lease deletes that failed with a store error are retried here (the loop calls it each step).
  void retry_lease_erases() ETLC_EXCLUDES(mu_);
  bool lease_erases_pending() const ETLC_EXCLUDES(mu_);
  // The lease deletes that landed since the last call (split id, the delete's revision), for the
  // loop's lease view: in worker scope no watch tells it, and a lease of ours left in the view
  // would look like an orphan to give back (two wasted round trips per release).
  std::vector<std::pair<std::string, Revision>> take_erased_leases() ETLC_EXCLUDES(mu_);

  // Mirrors of loop state for user threads.
  void set_leader(bool leader) ETLC_EXCLUDES(mu_);
  bool leader() const ETLC_EXCLUDES(mu_);
  void set_assignment(std::optional<std::vector<std::string>> a) ETLC_EXCLUDES(mu_);
  std::optional<std::vector<std::string>> assignment() const ETLC_EXCLUDES(mu_);
  void set_nonce(std::string nonce) ETLC_EXCLUDES(mu_);
  std::string nonce() const ETLC_EXCLUDES(mu_);

 private:
  struct Revocation {
    bool declined = false;
    TimePoint deadline{};
  };

  // Why a call may not write for the caller's tenancy (released, lost, or another epoch).
  static std::optional<CommitResult> tenancy_over(const Held& h, std::uint64_t epoch)
      ETLC_REQUIRES(h.io);
  CommitResult write_record(Held& h, core::SplitRecord next, const char* what) ETLC_REQUIRES(h.io);
  // The outcome of a CAS that lost or had an unknown outcome, from a re-read. nullopt: retry
  // `next`, now moved onto the record read (which is now h.record and `base`), at its revision.
  std::optional<CommitResult> resolve_conflict(Held& h, core::SplitRecord& base,
                                               core::SplitRecord& next, const char* what)
      ETLC_REQUIRES(h.io);
  void erase_lease(const Held& h) ETLC_EXCLUDES(mu_);
  void erase_lease_at(const std::string& id, Revision rev) ETLC_EXCLUDES(mu_);
  void push_locked(Event e) ETLC_REQUIRES(mu_);
  CommitResult terminal_write(Held& h, core::SplitRecord next, const char* what)
      ETLC_REQUIRES(h.io);
  // Residual ids of the tenancy skipped past ones taken by its own earlier cuts, at most.
  static constexpr std::size_t kLeftoversSkipped = 4;
  std::optional<CommitResult> create_residual(const Held& h, const SplitProgress& progress,
                                              const SplitResidual& residual, std::string& child)
      ETLC_REQUIRES(h.io);
  std::optional<CommitResult> create_pending(const std::string& child,
                                             const core::SplitRecord& pending);
  struct Placed {
    enum Status : std::uint8_t { here, taken, retry } status = retry;
    Revision rev = 0;  // taken: the revision of what is there
    CommitResult why;  // retry: why
  };
  Placed place(const std::string& key, const std::string& bytes,
               const std::function<bool(const Entry&)>& ours);

  const MemberContext& ctx_;
  mutable Mutex mu_;
  CondVar event_cv_;
  std::map<std::string, std::shared_ptr<Held>, std::less<>> held_ ETLC_GUARDED_BY(mu_);
  // Changes of held_ since take_held_changes (at most two per lane between two loop steps).
  std::vector<std::pair<std::string, bool>> held_changes_ ETLC_GUARDED_BY(mu_);
  std::map<std::string, Revocation, std::less<>> revocations_ ETLC_GUARDED_BY(mu_);
  // The last split request passed on per held split: (epoch, children) asked.
  std::map<std::string, std::pair<std::uint64_t, std::uint32_t>, std::less<>> asked_
      ETLC_GUARDED_BY(mu_);
  std::deque<Event> events_ ETLC_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, Revision>> pending_lease_erases_ ETLC_GUARDED_BY(mu_);
  // At most one per split held since the loop's last step (it drains them every step).
  std::vector<std::pair<std::string, Revision>> erased_leases_ ETLC_GUARDED_BY(mu_);
  bool leader_ ETLC_GUARDED_BY(mu_) = false;
  std::optional<std::vector<std::string>> assignment_ ETLC_GUARDED_BY(mu_);
  std::string nonce_ ETLC_GUARDED_BY(mu_);
};

}  // namespace etlc::runtime
