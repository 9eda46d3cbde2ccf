// Claim classification, delivery-attempt accounting and the quarantine gate: pure decisions over
// a split's durable record and lease, made before the runtime writes anything.
//
// Background (docs/work-assignment.md, "Claims, attempts and quarantine"): a claim creates
// lease.{split} and then CASes split.{split} to bump its epoch and name the new owner. Only a
// non-graceful end of the previous tenancy (the owner's session expired, or the same instance
// restarted with a new process nonce) is poison evidence and consumes a delivery attempt; a
// graceful release does not. A claim or fail() that brings the attempts to max_attempts parks the
// split (status quarantined) instead: it is never offered again.
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/records.hpp"

namespace etlc::core {

enum class ClaimKind : std::uint8_t {
  fresh,     // never owned: epoch 0 and no owner
  released,  // the previous owner released it gracefully (record owner cleared)
  reclaim,   // the record names this instance with another process nonce: we restarted
  takeover,  // the record names another owner whose lease is gone (its session expired)
};

enum class ClaimRefusal : std::uint8_t {
  none,           // the claim may proceed
  terminal,       // the split is completed or quarantined
  foreign_lease,  // a lease of another process exists: its owner is (or may still be) live
  already_held,   // the record already names this process (instance and nonce) as owner
};

struct ClaimDecision {
  ClaimRefusal refusal = ClaimRefusal::none;  // none => the claim may proceed
  ClaimKind kind = ClaimKind::fresh;          // meaningful only when refusal == none
  bool consumes_attempt = false;  // true exactly for takeover and reclaim (non-graceful ends)
  bool quarantine = false;        // attempts_after reaches max_attempts: write status quarantined
                                  // (owner cleared) instead of claiming
  std::uint32_t attempts_after = 0;  // the record's attempts after this claim (saturating)
  // The lease key exists and belongs to this instance under an older nonce (a previous process
  // of ours): delete it at its revision before creating ours.
  bool delete_stale_lease = false;
  // The lease key exists and already belongs to this very process (instance and nonce), but the
  // record does not name us yet: an earlier attempt of ours created the lease and its record CAS
  // did not land (or its outcome was unknown). Adopt the lease; do not create it again.
  bool adopt_own_lease = false;
};

// Decides whether this process (self_instance, self_nonce) may claim the split, and how.
// `lease` is the current lease record if the key exists. Checks, in order:
//   1. status completed/quarantined                     => refusal terminal
//   2. record owner == (self_instance, self_nonce)      => refusal already_held
//   3. a lease exists whose owner is not self_instance  => refusal foreign_lease
//   then the kind, from the record (the fence is the truth about how the last tenancy ended):
//   no owner: epoch 0 => fresh, else released; owner self_instance (other or no nonce) => reclaim;
//   any other owner => takeover (its lease is gone, or it would have been refused at 3).
// A lease of self_instance with another nonce sets delete_stale_lease; with our nonce,
// adopt_own_lease. Throws ConfigError if max_attempts == 0.
ClaimDecision decide_claim(const SplitRecord& record, const std::optional<LeaseRecord>& lease,
                           std::string_view self_instance, std::string_view self_nonce,
                           std::uint32_t max_attempts);

// --- the whole claim, from every fact the claimer gathered -------------------------------------
//
// A claim runs in two phases with reads in between; each phase is decided here and the runtime
// only executes the steps (runtime/claim.cpp).

// Phase 1, from the lease view (before reading anything): may the claim go on?
enum class LeaseStep : std::uint8_t {
  proceed,     // no lease, or this very session's (an earlier unknown-outcome create of ours)
  wait,        // another member's lease whose session looks live: wait for its release or death
  clear_dead,  // a lease of an earlier process of ours, or another member's whose session looks
               // gone: confirm by a point read that its session is gone, then delete it
};
// `owner_live_in_view`: the lease's owner session (instance and nonce) is in the session view.
LeaseStep decide_lease_step(const std::optional<LeaseRecord>& lease, std::string_view self_instance,
                            std::string_view self_nonce, bool owner_live_in_view);

// A lease that protects no tenancy: the record does not name its owner and nonce. That is a claim
// that did not land (the record below the lease's epoch), a release whose lease delete failed
// (the record at its epoch, owner cleared), a stale claimer's lease beside another's claim, or a
// fenced owner's after a rebuild. The first two last a round trip when all goes well; lasting a
// lease unchanged, any of them is an orphan, removed by a waiting claimer (the record CAS stays
// the fence: removing a lease never grants anything). A lease of the tenancy the record names,
// whatever its epoch (a reclaim keeps the process's lease), is never an orphan.
bool lease_is_orphan(const LeaseRecord& lease, const SplitRecord& record);

// Phase 2: everything known after reading the fence (split.{id}) and the spec.
struct ClaimFacts {
  std::string_view self_instance;
  std::string_view self_nonce;
  std::uint32_t max_attempts = 1;
  // The record names one of this process's own earlier sessions that ended without a crash
  // (starved, expired): reclaiming from it is not poison evidence.
  bool owner_nonce_benign = false;
  // The record names another member whose session lives, by the view and a point read both: it
  // holds no lease, so it released the split or never held it (its claim CAS landed late). Not a
  // crash either (sim bugs 7 and 11: view and read must agree).
  bool owner_session_live = false;
  // The view and a point read disagree about that session (one is behind: a watch that lags, a
  // stale replica, a session renewed under a new nonce). A takeover waits until they agree:
  // judged now it could consume an attempt from a live owner or waive one for a dead owner (sim
  // chaos 6848: a stale read of the owner's session before its new nonce quarantined its split).
  // Both behind in the same direction at once (a lagging watch and a stale replica) still
  // misjudge; the store contract rules out the stale replica (NATS reads from the stream leader).
  bool owner_session_unsure = false;
  // spec.{id} cannot be used (unreadable, or missing for two leases): what is wrong with it.
  std::optional<std::string> spec_problem;
};

enum class ClaimAction : std::uint8_t {
  retry_later,  // the split is completed or quarantined: the leader will drop it
  skip,         // refused for now (see the decision's refusal): try again on a later pass
  adopt,        // the record already names this process: hold it at its epoch, no write
  park,         // take the lease, then park the split for its spec (core/repair_rules.hpp)
  quarantine,   // take the lease, then quarantine (attempts reach max_attempts)
  claim,        // take the lease, then CAS the record to `epoch` naming this process
};

struct ClaimPlan {
  ClaimAction action = ClaimAction::skip;
  ClaimDecision decision;   // kind, attempts_after (after the waivers)
  std::uint64_t epoch = 0;  // the tenancy's epoch (adopt: the record's; claim: one more)
};

// Applies decide_claim (with no lease: phase 1 settled it), then the waivers (a benign reclaim or
// a live owner consume no attempt and cannot quarantine), then the spec: a split whose spec is
// unusable is parked rather than claimed. A takeover whose owner's session is unsure is skipped.
ClaimPlan plan_claim(const SplitRecord& record, const ClaimFacts& facts);

// The owner's own fail() (the source reported the split unprocessable): one attempt consumed,
// and whether that reaches the cap (then the split is quarantined rather than released).
struct FailDecision {
  std::uint32_t attempts_after;  // record.attempts + 1, saturating
  bool quarantine;               // attempts_after >= max_attempts
};
// Throws ConfigError if max_attempts == 0.
FailDecision decide_fail(const SplitRecord& record, std::uint32_t max_attempts);

std::string_view to_string(ClaimKind k) noexcept;
std::string_view to_string(ClaimRefusal r) noexcept;

}  // namespace etlc::core
