// The worker's reconciliation toward its own assignment record (work-assignment page):
//
//   worker sees                 worker does
//   assigned, not held          claim it (lease create, then the record CAS bumping the epoch)
//   held, still assigned        nothing: stickiness is free
//   held, no longer assigned    revoke: ask the user to drain, force after drain_deadline
//   no record at all            hold what it has, claim nothing
//
// A record written at a term below the plan's term is a deposed leader's and counts as no record.
// An assignment is permission to try, not a promise the split is free: a claim waits until the
// previous owner's lease key is gone (or its owner's session is), which the lease watch shows.
#include <fmt/format.h>
#include "log.hpp"

#include <algorithm>
#include <unordered_set>

#include "core/claim_rules.hpp"
#include "core/keys.hpp"
#include "core/repair_rules.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

namespace {
constexpr auto kClaimRetry = std::chrono::milliseconds(100);
constexpr std::size_t kClaimsPerStep = 64;

const char* kind_name(core::ClaimKind k) {
  switch (k) {
    case core::ClaimKind::fresh:
      return "fresh";
    case core::ClaimKind::released:
      return "released";
    case core::ClaimKind::reclaim:
      return "reclaim";
    case core::ClaimKind::takeover:
      return "takeover";
  }
  return "unknown";
}
}  // namespace

void Member::reconcile(TimePoint now) {
  // A retry deadline that has passed gates nothing, but step() wakes up for every deadline it
  // keeps: drop passed ones (e.g. of a split no longer assigned) or an idle member spins.
  std::erase_if(claim_retry_at_, [&](const auto& kv) { return kv.second <= now; });
  if (!w_assigns_.caught_up || !w_leases_.caught_up || !w_members_.caught_up || !w_job_.caught_up)
    return;
  std::optional<std::vector<std::string>> assigned;
  if (auto it = assigns_.find(instance_); it != assigns_.end()) {
    const std::uint64_t plan_term = plan_view_ ? plan_view_->first.term : 0;
    if (it->second.readable && it->second.rec.term >= plan_term) assigned = it->second.rec.splits;
  }
  std::vector<std::shared_ptr<Held>> held;
  {
    std::lock_guard lk(shared_mu_);
    assignment_mirror_ = assigned;
    for (auto& [id, h] : held_) held.push_back(h);
  }
  if (!assigned) return;  // no instruction is not an instruction to hold nothing

  // Leases of this process for splits it neither holds nor is asked to claim are leftovers of a
  // claim that failed half-way (lease created, then the record CAS or the give-back failed with a
  // store error). Nobody may claim those splits while this member lives: give them back (guarded
  // delete at the revision seen; a lost race refreshes the view from the store, so a wrong
  // revision in the view cannot keep the lease alive for ever).
  std::vector<std::string> orphans;
  for (const std::string& id : leases_.owned()) {
    if (leases_.find(id)->second.rec.nonce == nonce_ && !find_held(id) &&
        !std::binary_search(assigned->begin(), assigned->end(), id)) {
      orphans.push_back(id);
    }
  }
  for (const auto& id : orphans) erase_lease_at(id, leases_.find(id)->second.rev);

  // Specs prefetched for splits no longer assigned (bounded by the assignment's size).
  std::erase_if(spec_cache_, [&](const auto& kv) {
    return !std::binary_search(assigned->begin(), assigned->end(), kv.first);
  });
  std::erase_if(spec_absent_since_, [&](const auto& kv) {
    return !std::binary_search(assigned->begin(), assigned->end(), kv.first);
  });

  // held, no longer assigned -> revoke
  for (auto& h : held) {
    if (!std::binary_search(assigned->begin(), assigned->end(), h->id)) begin_revocation(h, now);
  }
  // assigned, not held -> claim, within the lane budget
  std::unordered_set<std::string_view> held_ids;  // one lock, not one per assigned split
  for (const auto& h : held) held_ids.insert(h->id);
  std::size_t holding = held.size();
  std::size_t attempts = 0;
  for (const std::string& id : *assigned) {
    if (holding >= config_.max_in_flight || attempts >= kClaimsPerStep) break;
    if (held_ids.count(id)) continue;
    if (auto it = claim_retry_at_.find(id); it != claim_retry_at_.end() && it->second > now) {
      continue;
    }
    ++attempts;
    try_claim(id, now);
    if (find_held(id)) ++holding;
  }
}

void Member::begin_revocation(const std::shared_ptr<Held>& h, TimePoint now) {
  std::lock_guard lk(shared_mu_);
  if (h->draining) return;  // a revocation, once begun, finishes
  h->draining = true;
  h->drain_deadline = now + config_.drain_deadline;
  events_.push_back(RevokeRequested{h->id, config_.drain_deadline, h->record.epoch});
  event_cv_.notify_all();
  log().info("etlc: {}: revoking split '{}' (drain deadline {} ms)", instance_, h->id,
             config_.drain_deadline.count());
}

// Forced revocation: a declined drain, or one past its deadline. The split is released (its
// owner is alive, so no attempt is consumed) and the user is told it is lost.
void Member::force_due_revocations(TimePoint now) {
  std::vector<std::shared_ptr<Held>> due;
  {
    std::lock_guard lk(shared_mu_);
    for (auto& [id, h] : held_) {
      if (h->draining && (h->declined || now >= h->drain_deadline)) due.push_back(h);
    }
  }
  for (auto& h : due) {
    bool declined;
    {
      std::lock_guard lk(shared_mu_);
      declined = h->declined;
    }
    std::lock_guard io(h->io);
    if (h->gone) continue;
    log().info("etlc: {}: forcing the release of split '{}' ({})", instance_, h->id,
               declined ? "declined" : "drain deadline passed");
    CommitResult r = release_locked(*h);
    if (r.status == CommitStatus::retryable) continue;  // retried next step
    if (r.durable()) {  // (a fenced release already reported the loss as fenced)
      metrics_.revocation(declined ? "declined" : "timed_out");  // once, when it happened
      metrics_.lost(LossReason::revoked);
      push_event(SplitLost{h->id, LossReason::revoked});
    }
  }
}

void Member::try_claim(const std::string& id, TimePoint now) {
  try {
    claim(id, now);
  } catch (const core::RecordError& e) {
    // One unreadable record must not stall the member's other claims.
    metrics_.unreadable_record();
    log().warn("etlc: {}: cannot claim split '{}': {}", instance_, id, e.what());
    claim_retry_at_[id] = now + config_.lease_duration;
    spec_cache_.erase(id);
  }
}

void Member::claim(const std::string& id, TimePoint now) {
  claim_retry_at_[id] = now + kClaimRetry;  // cleared when the lease watch shows a change

  // 1. The previous owner's lease must be gone, or dead (its owner's session is gone).
  if (auto it = leases_.find(id); it != leases_.end()) {
    const core::LeaseRecord& l = it->second.rec;
    const bool ours_now = l.owner == instance_ && l.nonce == nonce_;
    const bool ours_before = l.owner == instance_ && l.nonce != nonce_;
    if (!ours_now && !ours_before && session_live(l.owner, l.nonce)) {
      prefetch_spec(id);  // off the handoff's critical path: the claim then reads only the fence
      return;             // wait for the owner to release it (or die)
    }
    if (!ours_now && !erase_dead_lease(id)) return;
  }

  // 2. Read the fence and the spec.
  const std::string skey = core::split_key(id);
  auto cur = store_->get(skey);
  if (!cur) return;  // not seeded yet
  core::SplitRecord rec = core::decode_split(skey, cur->value);
  const std::optional<std::string> spec_problem = check_spec(id, now);
  const SplitSpec* spec = spec_problem ? nullptr : load_spec(id);
  if (!spec && !spec_problem) return;  // absent for now (see check_spec)

  core::ClaimDecision d =
      core::decide_claim(rec, std::nullopt, instance_, nonce_, config_.max_attempts);
  if (d.refusal == core::ClaimRefusal::terminal) {
    claim_retry_at_[id] = now + config_.lease_duration;  // the leader will drop it
    return;
  }
  if (d.refusal != core::ClaimRefusal::none && d.refusal != core::ClaimRefusal::already_held) {
    return;
  }

  if (d.kind == core::ClaimKind::reclaim && rec.owner_nonce &&
      std::find(benign_nonces_.begin(), benign_nonces_.end(), *rec.owner_nonce) !=
          benign_nonces_.end()) {
    // Our own earlier session stopped its lanes itself (starved) or was expired while this
    // process lived on: not a crash, so not poison evidence.
    d.consumes_attempt = false;
    d.attempts_after = rec.attempts;
    d.quarantine = false;
  }
  if (d.kind == core::ClaimKind::takeover && rec.owner_nonce &&
      session_live(*rec.owner, *rec.owner_nonce) &&
      session_confirmed_live(*rec.owner, *rec.owner_nonce)) {
    // The record names a live session that holds no lease: that member released the split or
    // never held it (its claim CAS landed late, after it had given up). Not a crash. Live by the
    // member view and a point read both: the view may not yet show a crashed owner's expiry that
    // the lease watch already reflects (decision 0006), and a waiver must not rest on one read.
    d.consumes_attempt = false;
    d.attempts_after = rec.attempts;
    d.quarantine = false;
  }
  const bool adopt = d.refusal == core::ClaimRefusal::already_held;
  const std::uint64_t epoch = adopt ? rec.epoch : rec.epoch + 1;

  // 3. Lease first (mutual exclusion among claimers), then the record CAS (the fence). The lease
  // view may still show a lease of ours that we deleted ourselves (fail, release) and whose
  // delete event has not arrived yet: only the store knows, so create the lease, and adopt an
  // existing one only if the store shows it is this process's (an earlier unknown-outcome create).
  const std::string lkey = core::lease_key(id);
  Revision lease_rev = 0;
  {
    core::LeaseRecord lease{id, instance_, nonce_, epoch};
    WriteResult lr = store_->create(lkey, core::encode(lease));
    if (lr.ok) {
      lease_rev = lr.revision;
    } else {
      auto existing = store_->get(lkey);
      if (!existing) return;  // gone meanwhile; retry later
      try {
        lease = core::decode_lease(lkey, existing->value);
      } catch (const core::RecordError& e) {
        // An unreadable lease names no session, so it protects nobody's tenancy (the record, the
        // fence, still does): remove it at the revision read and claim on the next pass.
        WriteResult gone = store_->erase(lkey, existing->revision);
        warn_throttled(lkey, fmt::format("{} the unreadable lease of split '{}': {}",
                                         gone.ok ? "removed" : "could not remove", id, e.what()));
        claim_retry_at_.erase(id);
        return;
      }
      if (lease.owner != instance_ || lease.nonce != nonce_) return;  // another claimer won it
      lease_rev = existing->revision;
    }
    leases_.assign(id, LeaseView{lease, lease_rev});
  }

  if (spec_problem) {
    // Nothing can process a split whose descriptor is lost: park it with a reason that names the
    // record and the repair (the leader's repair re-plan requeues it, healing.cpp).
    core::SplitRecord parked = core::park_for_spec(rec, *spec_problem);
    if (store_->update(skey, core::encode(parked), cur->revision).ok) {
      log().error("etlc: {}: parked split '{}': {}", instance_, id, *parked.last_error);
      metrics_.quarantined_split();
    }
    store_->erase(lkey, lease_rev);  // if this fails, reconcile's orphan sweep retries it
    spec_absent_since_.erase(id);
    return;
  }
  if (d.quarantine) {
    // The lease is ours now, so the previous owner's is really gone (the store said so, not our
    // lease view, which may lag behind a live owner's claim): park the split, give the lease back.
    core::SplitRecord parked = rec;
    parked.status = core::SplitStatus::quarantined;
    parked.attempts = d.attempts_after;
    parked.owner.reset();
    parked.owner_nonce.reset();
    if (store_->update(skey, core::encode(parked), cur->revision).ok) {
      log().warn("etlc: {}: quarantined split '{}' after {} attempts", instance_, id,
                 d.attempts_after);
      metrics_.quarantined_split();
    }
    store_->erase(lkey, lease_rev);  // if this fails, reconcile's orphan sweep retries it
    return;
  }

  core::SplitRecord next = rec;
  Revision rec_rev = cur->revision;
  if (!adopt) {
    next.epoch = epoch;
    next.owner = instance_;
    next.owner_nonce = nonce_;
    next.attempts = d.attempts_after;
    WriteResult r;
    try {
      r = store_->update(skey, core::encode(next), cur->revision);
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unknown_outcome) throw;
      r.ok = false;  // resolved below by re-reading
    }
    if (!r.ok) {
      auto again = store_->get(skey);
      core::SplitRecord seen;
      if (again) seen = core::decode_split(skey, again->value);
      if (again && seen.epoch == epoch && seen.owner == instance_ && seen.owner_nonce == nonce_) {
        next = seen;  // our write landed after all
        rec_rev = again->revision;
      } else {
        // Someone moved the fence under us (a zombie's last commit, or a competing claim).
        // Give the lease back and try again later.
        store_->erase(lkey, lease_rev);
        leases_.erase(id);
        return;
      }
    } else {
      rec_rev = r.revision;
    }
  }

  auto h = std::make_shared<Held>();
  h->id = id;
  h->spec = *spec;
  h->record = next;
  h->record_rev = rec_rev;
  h->lease_rev = lease_rev;
  {
    std::lock_guard lk(shared_mu_);
    held_[id] = h;
    events_.push_back(SplitGranted{h->spec, next.epoch, next.progress, live_.serial()});
    event_cv_.notify_all();
    metrics_.set_owned(held_.size());
  }
  claim_retry_at_.erase(id);
  spec_cache_.erase(id);  // the held split keeps its spec
  metrics_.acquired(adopt ? "reclaim" : kind_name(d.kind));
  log().info("etlc: {}: acquired split '{}' epoch {} ({}), resuming at watermark {}", instance_, id,
             next.epoch, adopt ? "adopted" : kind_name(d.kind), next.progress.watermark);
}

const SplitSpec* Member::load_spec(const std::string& id) {
  if (auto it = spec_cache_.find(id); it != spec_cache_.end()) return &it->second;
  auto stored = store_->get(core::spec_key(id));
  if (!stored) return nullptr;
  return &spec_cache_.emplace(id, core::decode_spec(core::spec_key(id), stored->value).spec)
              .first->second;
}

// Whether spec.{id} is usable for a claim: nullopt if it reads (or may still appear), else what is
// wrong with it. Seeding writes a split's spec before its record, so a record whose spec is absent
// lost it; a stale read can look the same for a moment, so absence counts only after two leases.
std::optional<std::string> Member::check_spec(const std::string& id, TimePoint now) {
  try {
    if (load_spec(id) != nullptr) {
      spec_absent_since_.erase(id);
      return std::nullopt;
    }
  } catch (const core::RecordError& e) {
    return fmt::format("spec.{} is unreadable ({})", id, e.what());
  }
  auto [it, fresh] = spec_absent_since_.try_emplace(id, now);
  (void)fresh;
  if (now - it->second < 2 * config_.lease_duration) return std::nullopt;
  return fmt::format("spec.{} is missing", id);
}

void Member::prefetch_spec(const std::string& id) {
  try {
    load_spec(id);
  } catch (const StoreError& e) {
    if (!e.retryable()) throw;  // a prefetch is an optimisation: the claim reads it again
  }
}

void Member::observe_completion() {
  if (!plan_view_) return;
  const core::PlanRecord& plan = plan_view_->first;
  if (plan.verdict == core::Verdict::complete && !seen_complete_) {
    seen_complete_ = true;
    push_event(AllComplete{plan.completed});
  } else if (plan.verdict == core::Verdict::stalled && !seen_stalled_) {
    seen_stalled_ = true;
    push_event(Stalled{plan.completed, plan.quarantined, {}});
  } else if (plan.verdict == core::Verdict::failed && !seen_stalled_) {
    seen_stalled_ = true;  // the planner failed max_planner_failures times (job_controls.cpp)
    push_event(Stalled{plan.completed, plan.quarantined,
                       plan.message.value_or("the job's planner failed")});
  } else if (plan.verdict == core::Verdict::running) {
    seen_stalled_ = false;  // an operator requeued: a later stall is news again
  }
}

}  // namespace etlc::runtime
