// Worker: what every member does as a worker — follow its own assignment record (work-assignment
// page, "Reconciliation"), claim what it is assigned, revoke what it no longer is, force drains
// past their deadline, and tell its user when the job ends.
//
//   worker sees                 worker does
//   assigned, not held          claim it (lease create, then the record CAS bumping the epoch)
//   held, still assigned        nothing: stickiness is free
//   held, no longer assigned    revoke: ask the user to drain, force after drain_deadline
//   no record at all            hold what it has, claim nothing
//
// A record written at a term below the plan's term is a deposed leader's and counts as no record
// (core::assignment_in_force). An assignment is permission to try, not a promise the split is
// free: a claim waits until the previous owner's lease is gone or its owner's session is. The
// claim's decisions are the pure core's (core/claim_rules.hpp: decide_lease_step, plan_claim);
// claim.cpp only gathers the facts and executes the steps. Not thread-safe: the loop owns it.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "etlc/split.hpp"
#include "runtime/fleet_views.hpp"
#include "runtime/held_splits.hpp"
#include "runtime/liveness.hpp"
#include "runtime/member_context.hpp"
#include "runtime/session.hpp"
#include "runtime/throttled_log.hpp"

namespace etlc::runtime {

class Worker {
 public:
  Worker(const MemberContext& ctx, FleetViews& views, HeldSplits& held, Session& session,
         Liveness& liveness, ThrottledLog& warn)
      : ctx_(ctx),
        views_(views),
        held_(held),
        session_(session),
        liveness_(liveness),
        warn_(warn) {}

  // Follows assign.{me}: gives back orphan leases, revokes, claims within the lane budget.
  void reconcile(TimePoint now);
  // Forces revocations that were declined or outran drain_deadline.
  void force_due_revocations(TimePoint now);
  // AllComplete / Stalled once per verdict, from the plan record.
  void observe_completion();
  // Lease deletes seen: those splits may be claimable at once.
  void leases_freed(const std::vector<std::string>& ids);
  // Worker scope: followed sessions now known: claims that waited to judge them go on at once.
  void sessions_known(const std::vector<std::string>& instances);
  // The earliest future claim retry, if any.
  std::optional<TimePoint> next_retry(TimePoint now) const;
  // Reads spec.{id} unless cached; the spec, or null if it does not exist (the pointer is valid
  // until the cache changes). Throws store and record errors; before a RecordError, sets
  // `*unreadable_rev` (if given) to the revision of the value that did not decode.
  const SplitSpec* load_spec(const std::string& id, Revision* unreadable_rev = nullptr);
  void forget_spec(const std::string& id) { spec_cache_.erase(id); }

 private:
  // Why spec.{id} cannot serve a claim, and the revision of the unreadable value read (0: the
  // spec is missing).
  struct SpecProblem {
    std::string what;
    Revision unreadable_rev = 0;
  };
  // Refreshes assignment_ from assign.{me}; true if it (or whether it is in force) changed.
  bool refresh_assignment();
  void mirror_held();
  void follow_leases(TimePoint now);
  void give_back_orphan_leases(const std::vector<std::string>& assigned);
  void claim_assigned(const std::vector<std::string>& assigned, TimePoint now);
  void try_claim(const std::string& id, TimePoint now);
  // claim.cpp
  void claim(const std::string& id, TimePoint now);
  bool session_judgeable(const std::string& id, const std::string& owner, TimePoint now);
  void follow_waited_sessions();
  bool lease_allows_claim(const std::string& id, TimePoint now);
  void remove_if_orphan(const std::string& id, const LeaseTable::Entry& lease, TimePoint now);
  bool lease_still_there(const std::string& id, const LeaseTable::Entry& lease);
  bool record_still_current(const std::string& key, const Entry& read);
  std::optional<Revision> take_lease(const std::string& id, std::uint64_t epoch);
  void park(const std::string& id, const core::SplitRecord& rec, Revision rev,
            const SpecProblem& problem, Revision lease_rev);
  bool spec_damage_current(const std::string& id, const SpecProblem& problem);
  void quarantine(const std::string& id, const core::SplitRecord& rec, Revision rev,
                  std::uint32_t attempts, Revision lease_rev);
  std::optional<std::pair<core::SplitRecord, Revision>> cas_claim(const std::string& id,
                                                                  const core::SplitRecord& next,
                                                                  Revision rev, Revision lease_rev);
  std::optional<Revision> confirm_adopt(const std::string& id, const std::string& value,
                                        Revision rev, Revision lease_rev);
  void prefetch_spec(const std::string& id);
  std::optional<SpecProblem> check_spec(const std::string& id, TimePoint now);

  const MemberContext& ctx_;
  FleetViews& views_;
  HeldSplits& held_;
  Session& session_;
  Liveness& liveness_;
  ThrottledLog& warn_;
  std::map<std::string, TimePoint> claim_retry_at_;
  // The instruction followed (assign.{me} when in force) and what it was computed from.
  struct AssignmentKey {
    Revision rev = 0;  // 0: no record
    bool readable = false;
    bool in_force = false;
    bool operator==(const AssignmentKey&) const = default;
  };
  std::optional<std::vector<std::string>> assignment_;
  AssignmentKey assignment_key_;
  bool assignment_seen_ = false;  // false until the first refresh
  // The held set, mirrored from HeldSplits::take_held_changes every step.
  std::unordered_set<std::string> held_ids_;
  std::vector<std::string> held_added_;  // since the revocation pass last ran (at most the lanes)
  // The passes to run again (reconcile): their inputs changed since they last completed.
  struct Stale {
    bool follows = true;
    bool orphans = true;
    bool specs = true;
    bool revocations = true;
  };
  Stale stale_;
  // What the last completed passes saw: LeaseTable's generation (the orphan sweep), doubtful_gen_
  // and FleetViews::follows_dropped (follow_leases).
  std::uint64_t seen_lease_gen_ = 0;
  std::uint64_t doubtful_gen_ = 0;  // bumped whenever doubtful_leases_ gains or loses entries
  std::uint64_t followed_gen_ = 0;
  std::uint64_t followed_after_drop_ = 0;  // FleetViews::follows_dropped when it last ran
  // Specs read for claims in progress (and prefetched while a split's previous owner drains it),
  // pruned to the assignment whenever it changes.
  std::unordered_map<std::string, SplitSpec> spec_cache_;
  std::map<std::string, TimePoint> spec_absent_since_;  // spec.{id} read as absent since
  // Splits whose lease create had an unknown outcome (worker scope follows their leases).
  // Splits whose lease create had an unknown outcome -> until when it may still land.
  std::map<std::string, TimePoint> doubtful_leases_;
  // Foreign leases waited on: the revision seen and since when (remove_if_orphan).
  struct OrphanWatch {
    Revision rev = 0;
    TimePoint since{};
  };
  std::map<std::string, OrphanWatch> orphan_watch_;
  // Worker scope: split -> the peer whose liveness its claim must judge (the lease's or the
  // record's owner): followed by a session watch while the split is (see follow_leases).
  std::map<std::string, std::string> session_waits_;
  bool seen_complete_ = false;
  bool seen_stalled_ = false;
};

}  // namespace etlc::runtime
