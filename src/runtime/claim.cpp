// One claim: gather the facts, let the core decide (core/claim_rules.hpp), execute the steps.
//
//   1. the lease view: the previous owner's lease must be gone, or its owner dead (point read);
//   2. read the fence (split.{id}) and the spec, and the facts the waivers need;
//   3. take the lease (mutual exclusion among claimers), then, as the plan says, CAS the record
//      to the new epoch (the fence), adopt it, park it for its spec or quarantine it.
// Whatever fails half-way leaves at most a lease of ours, which reconcile's orphan sweep gives
// back; a claim CAS whose outcome is unknown is resolved by re-reading.
#include <fmt/format.h>

#include "core/claim_rules.hpp"
#include "core/keys.hpp"
#include "core/protocol_assert.hpp"
#include "core/repair_rules.hpp"
#include "log.hpp"
#include "runtime/worker.hpp"

namespace etlc::runtime {

namespace {
constexpr auto kClaimRetry = std::chrono::milliseconds(100);
}  // namespace

// Whether `owner`'s session view can be trusted; if not (worker scope), follows it and retries
// once its snapshot arrives (sessions_known) or after a third of a lease.
bool Worker::session_judgeable(const std::string& id, const std::string& owner, TimePoint now) {
  if (owner == ctx_.instance || views_.session_known(owner)) return true;
  session_waits_[id] = owner;
  follow_waited_sessions();  // now: its snapshot (sessions_known) is what wakes the claim
  claim_retry_at_[id] = now + ctx_.config.lease_duration / 3;
  return false;
}

// Phase 1. False: not now (the lease is not known yet, its owner lives, or its dead lease could
// not be removed yet). A worker follows the session of a lease's owner while the lease stays (its
// delete, which a live owner's release makes, wakes the claim at once); a dead owner's lease is
// removed only when the session view and a point read agree that the session is gone.
bool Worker::lease_allows_claim(const std::string& id, TimePoint now) {
  if (!views_.lease_known(id)) return false;  // its watch's snapshot wakes the loop
  auto it = views_.leases().find(id);
  if (it == views_.leases().end()) return true;
  const core::LeaseRecord l = it->second.rec;
  const bool foreign = l.owner != ctx_.instance || l.nonce != session_.nonce();
  if (foreign && !session_judgeable(id, l.owner, now)) {
    prefetch_spec(id);
    return false;
  }
  switch (core::decide_lease_step(l, ctx_.instance, session_.nonce(),
                                  views_.session_live(l.owner, l.nonce))) {
    case core::LeaseStep::proceed:
      return true;
    case core::LeaseStep::wait:
      prefetch_spec(id);  // off the handoff's critical path: the claim then reads only the fence
      remove_if_orphan(id, it->second, now);
      return false;
    case core::LeaseStep::clear_dead:
      return liveness_.erase_dead_lease(id);
  }
  return false;
}

// A live member's lease that stays unchanged for a lease while the record does not name its
// tenancy (core::lease_is_orphan: a claim that never landed, a release or give-back whose delete
// was lost) protects nothing, and its owner may never learn of it: the split would wait for ever.
// Remove it at the revision seen (guarded: a lease rewritten meanwhile stays).
// The view's entry itself may be a stale point read of a lease deleted before the key's watch
// opened (its snapshot, "absent", cannot correct it, and no later event comes: sim chaos 15393),
// so the lease is read again first; an absent read drops the entry (the claim's create is the
// fence if that read was stale too). The record read that calls the lease an orphan must be the
// record's present too (record_still_current).
void Worker::remove_if_orphan(const std::string& id, const LeaseTable::Entry& lease,
                              TimePoint now) {
  auto [it, fresh] = orphan_watch_.try_emplace(id, OrphanWatch{lease.rev, now});
  if (fresh || it->second.rev != lease.rev) {
    it->second = OrphanWatch{lease.rev, now};
    return;
  }
  if (now - it->second.since < ctx_.config.lease_duration) return;
  it->second.since = now;  // look again in a lease at most
  if (!lease_still_there(id, lease)) return;
  const std::string skey = core::split_key(id);
  auto cur = ctx_.store.get(skey);
  if (!cur) return;
  if (!core::lease_is_orphan(lease.rec, core::decode_split(skey, cur->value))) return;
  if (!record_still_current(skey, *cur)) return;
  const core::LeaseRecord l = lease.rec;
  if (liveness_.erase_lease_at(id, lease.rev)) {
    log().warn(
        "etlc: {}: removed the orphan lease of split '{}' (owner '{}', epoch {}): the split "
        "record does not name it",
        ctx_.instance, id, l.owner, l.epoch);
  }
}

// Whether `read` is still the record's present, proved by a no-op CAS at its revision. A read
// taken while the lease owner's claim CAS was in flight (or a stale one) does not name the owner,
// yet the claim lands: its lease would be removed under a live holder (issue 39). The no-op CAS
// fails if anything landed since, and makes a claim CAS still in flight fail after it. An
// unknown outcome proves nothing: look again later.
bool Worker::record_still_current(const std::string& key, const Entry& read) {
  try {
    return ctx_.store.update(key, read.value, read.revision).ok;
  } catch (const StoreError& e) {
    if (e.code() != StoreErrc::unknown_outcome) throw;
    return false;
  }
}

// Whether a point read shows `lease` still in the store; if not, the view takes what it shows.
bool Worker::lease_still_there(const std::string& id, const LeaseTable::Entry& lease) {
  Revision now_at = 0;
  try {
    now_at = liveness_.reload_lease(id);
  } catch (const core::RecordError&) {
    views_.leases().erase(id);  // the claim's take_lease removes an unreadable lease
    claim_retry_at_.erase(id);
    return false;
  }
  if (now_at == lease.rev) return true;
  if (now_at == 0) claim_retry_at_.erase(id);
  return false;
}

void Worker::claim(const std::string& id, TimePoint now) {
  claim_retry_at_[id] = now + kClaimRetry;  // cleared when the lease watch shows a change
  if (!lease_allows_claim(id, now)) return;
  const std::string skey = core::split_key(id);
  auto cur = ctx_.store.get(skey);
  if (!cur) return;  // not seeded yet (or deleted: the leader rebuilds it)
  const core::SplitRecord rec = core::decode_split(skey, cur->value);
  core::ClaimFacts facts;
  facts.self_instance = ctx_.instance;
  facts.self_nonce = session_.nonce();
  facts.max_attempts = ctx_.config.max_attempts;
  const std::optional<SpecProblem> spec_problem = check_spec(id, now);
  if (spec_problem) facts.spec_problem = spec_problem->what;
  if (rec.owner_nonce) {
    facts.owner_nonce_benign = rec.owner == ctx_.instance && session_.benign(*rec.owner_nonce);
    const bool takeover = rec.status == core::SplitStatus::runnable && rec.owner != ctx_.instance;
    if (takeover && !session_judgeable(id, *rec.owner, now)) return;
    // The view and a point read must agree (sim bugs 7 and 11, chaos 6848).
    if (takeover) {
      const bool in_view = views_.session_live(*rec.owner, *rec.owner_nonce);
      const bool read = liveness_.session_confirmed_live(*rec.owner, *rec.owner_nonce);
      facts.owner_session_live = in_view && read;
      facts.owner_session_unsure = in_view != read;
    }
  }
  const SplitSpec* spec = facts.spec_problem ? nullptr : load_spec(id);
  if (!spec && !facts.spec_problem) return;  // absent for now (see check_spec)
  const core::ClaimPlan plan = core::plan_claim(rec, facts);
  if (plan.action == core::ClaimAction::retry_later) {
    claim_retry_at_[id] = now + ctx_.config.lease_duration;  // the leader will drop it
    return;
  }
  if (plan.action == core::ClaimAction::skip) return;
  const std::optional<Revision> lease_rev = take_lease(id, plan.epoch);
  if (!lease_rev) return;
  switch (plan.action) {
    case core::ClaimAction::park:
      park(id, rec, cur->revision, *spec_problem, *lease_rev);
      return;
    case core::ClaimAction::quarantine:
      quarantine(id, rec, cur->revision, plan.decision.attempts_after, *lease_rev);
      return;
    default:
      break;
  }
  const bool adopt = plan.action == core::ClaimAction::adopt;
  core::SplitRecord next = rec;
  Revision rec_rev = cur->revision;
  if (adopt) {
    const std::optional<Revision> confirmed =
        confirm_adopt(id, cur->value, cur->revision, *lease_rev);
    if (!confirmed) return;
    rec_rev = *confirmed;
  } else {
    ETLC_ASSERT(plan.epoch > rec.epoch, "claim of split '{}' at epoch {} over epoch {}", id,
                plan.epoch, rec.epoch);  // an epoch never decreases, and a claim moves it
    next.epoch = plan.epoch;
    next.owner = ctx_.instance;
    next.owner_nonce = session_.nonce();
    next.attempts = plan.decision.attempts_after;
    auto landed = cas_claim(id, next, cur->revision, *lease_rev);
    if (!landed) return;
    std::tie(next, rec_rev) = *landed;
  }
  held_.add(std::make_shared<Held>(id, *spec, next, rec_rev, *lease_rev, session_.serial()));
  claim_retry_at_.erase(id);
  spec_cache_.erase(id);  // the held split keeps its spec
  const std::string kind = adopt ? "reclaim" : std::string(core::to_string(plan.decision.kind));
  ctx_.metrics.acquired(kind);
  log().info("etlc: {}: acquired split '{}' epoch {} ({}), resuming at watermark {}", ctx_.instance,
             id, next.epoch, adopt ? "adopted" : kind, next.progress.watermark);
}

// An adopt holds the split at the epoch it read, so that read must be the record's present: a
// no-op CAS at its revision proves it (a stale read of our own old tenancy, after the record was
// rebuilt or moved on, fails here instead of granting progress the store no longer holds: sim
// bug 20). Returns the record's new revision, or nullopt (the lease is given back; the next pass
// reads again).
std::optional<Revision> Worker::confirm_adopt(const std::string& id, const std::string& value,
                                              Revision rev, Revision lease_rev) {
  WriteResult r;
  try {
    r = ctx_.store.update(core::split_key(id), value, rev);
  } catch (const StoreError& e) {
    if (e.code() != StoreErrc::unknown_outcome) throw;
    r.ok = false;  // landed or not, the revision it made is unknown: read again next pass
  }
  if (r.ok) return r.revision;
  ctx_.store.erase(core::lease_key(id), lease_rev);  // on failure the orphan sweep retries it
  views_.leases().erase(id);
  return std::nullopt;
}

// Creates lease.{id} for this process; adopts an existing one only if the store shows it is this
// process's (an earlier unknown-outcome create). The lease view may still show a lease of ours
// that we deleted ourselves (fail, release) and whose delete event has not arrived yet: only the
// store knows. Returns the lease's revision, or nullopt (another claimer won it, or it was gone).
std::optional<Revision> Worker::take_lease(const std::string& id, std::uint64_t epoch) {
  const std::string lkey = core::lease_key(id);
  core::LeaseRecord lease{id, ctx_.instance, session_.nonce(), epoch};
  Revision rev = 0;
  WriteResult lr;
  try {
    lr = ctx_.store.create(lkey, core::encode(lease));
  } catch (const StoreError& e) {
    // It may land, even after a watch showed it absent: follow the lease for a lease from now
    // (or until the view shows it landed: an orphan to give back).
    if (e.code() == StoreErrc::unknown_outcome) {
      doubtful_leases_[id] = ctx_.clock.now() + ctx_.config.lease_duration;
      ++doubtful_gen_;
    }
    throw;
  }
  if (lr.ok) {
    rev = lr.revision;
  } else {
    auto existing = ctx_.store.get(lkey);
    if (!existing) return std::nullopt;  // gone meanwhile; retry later
    try {
      lease = core::decode_lease(lkey, existing->value);
    } catch (const core::RecordError& e) {
      // An unreadable lease names no session, so it protects nobody's tenancy (the record, the
      // fence, still does): remove it at the revision read and claim on the next pass.
      const WriteResult gone = ctx_.store.erase(lkey, existing->revision);
      warn_.warn(lkey, fmt::format("{} the unreadable lease of split '{}': {}",
                                   gone.ok ? "removed" : "could not remove", id, e.what()));
      claim_retry_at_.erase(id);
      return std::nullopt;
    }
    if (lease.owner != ctx_.instance || lease.nonce != session_.nonce()) {
      // Another claimer's: the view waits on it (the table keeps the newer of the two).
      views_.leases().assign(id, LeaseTable::Entry{lease, existing->revision});
      return std::nullopt;
    }
    rev = existing->revision;
  }
  views_.leases().assign(id, LeaseTable::Entry{lease, rev});
  return rev;
}

// Nothing can process a split whose descriptor is lost: park it with a reason that names the
// record and the repair (the leader's repair re-plan requeues it, healing.cpp). If the record
// moved before the park landed, the erase that proved the damage current has left the spec
// absent: that absence is our own write, not a stale read, so the next pass (which reads the
// record again) parks at once instead of waiting two leases for it (issue 39).
void Worker::park(const std::string& id, const core::SplitRecord& rec, Revision rev,
                  const SpecProblem& problem, Revision lease_rev) {
  bool erased_unparked = false;
  if (spec_damage_current(id, problem)) {
    const core::SplitRecord parked = core::park_for_spec(rec, problem.what);
    if (ctx_.store.update(core::split_key(id), core::encode(parked), rev).ok) {
      log().error("etlc: {}: parked split '{}': {}", ctx_.instance, id, *parked.last_error);
      ctx_.metrics.quarantined_split();
    } else {
      erased_unparked = problem.unreadable_rev != 0;
    }
  }
  ctx_.store.erase(core::lease_key(id), lease_rev);  // on failure the orphan sweep retries it
  spec_absent_since_.erase(id);
  if (erased_unparked) {
    spec_absent_since_.emplace(id, ctx_.clock.now() - 2 * ctx_.config.lease_duration);
  }
}

// A read of an unreadable spec may be stale: the leader may have rewritten it and requeued the
// split since (sim chaos 29276). Erasing the value at the revision read proves it current, and
// loses nothing this version could read (the repair re-plan creates the spec anew; a newer
// library's spec is lost to this one either way, and its split parked as before).
// Writing it back unchanged would prove it too, but a member never writes an unreadable record.
// A missing spec needs no proof here: check_spec waited two leases for it.
bool Worker::spec_damage_current(const std::string& id, const SpecProblem& problem) {
  if (problem.unreadable_rev == 0) return true;
  try {
    if (ctx_.store.erase(core::spec_key(id), problem.unreadable_rev).ok) return true;
  } catch (const StoreError& e) {
    if (e.code() != StoreErrc::unknown_outcome) throw;
  }
  // Changed since the read (or unknown): the next pass reads it again.
  log().info("etlc: {}: spec.{} changed since it read unreadable; not parking split '{}'",
             ctx_.instance, id, id);
  return false;
}

// The lease is ours now, so the previous owner's is really gone (the store said so, not our lease
// view, which may lag behind a live owner's claim): park the split, give the lease back.
void Worker::quarantine(const std::string& id, const core::SplitRecord& rec, Revision rev,
                        std::uint32_t attempts, Revision lease_rev) {
  const core::SplitRecord parked = core::quarantine_for_attempts(rec, attempts);
  if (ctx_.store.update(core::split_key(id), core::encode(parked), rev).ok) {
    log().warn("etlc: {}: quarantined split '{}' after {} attempts", ctx_.instance, id, attempts);
    ctx_.metrics.quarantined_split();
  }
  ctx_.store.erase(core::lease_key(id), lease_rev);  // on failure the orphan sweep retries it
}

// The claim's CAS. Returns the record held and its revision, or nullopt when someone moved the
// fence under us (a zombie's last commit, a competing claim): the lease is given back.
std::optional<std::pair<core::SplitRecord, Revision>> Worker::cas_claim(
    const std::string& id, const core::SplitRecord& next, Revision rev, Revision lease_rev) {
  const std::string skey = core::split_key(id);
  WriteResult r;
  try {
    r = ctx_.store.update(skey, core::encode(next), rev);
  } catch (const StoreError& e) {
    if (e.code() != StoreErrc::unknown_outcome) throw;
    r.ok = false;  // resolved below by re-reading
  }
  if (r.ok) return std::make_pair(next, r.revision);
  auto again = ctx_.store.get(skey);
  if (again) {
    core::SplitRecord seen = core::decode_split(skey, again->value);
    if (seen.epoch == next.epoch && seen.owner == ctx_.instance &&
        seen.owner_nonce == next.owner_nonce) {
      return std::make_pair(std::move(seen), again->revision);  // our write landed after all
    }
  }
  ctx_.store.erase(core::lease_key(id), lease_rev);
  views_.leases().erase(id);
  return std::nullopt;
}

}  // namespace etlc::runtime
