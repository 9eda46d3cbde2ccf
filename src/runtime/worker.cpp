// Worker: reconciliation, revocations and completion (worker.hpp). The claim itself is claim.cpp.
#include "runtime/worker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "core/assignment_rules.hpp"
#include "core/keys.hpp"
#include "log.hpp"

namespace etlc::runtime {

namespace {
constexpr std::size_t kClaimsPerStep = 64;

bool contains(const std::vector<std::string>& sorted, const std::string& id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}
}  // namespace

// assign.{me} when it is an instruction: readable, and of the plan's term or later. Copied only
// when the record or its standing changed (a step must not cost O(assignment) for nothing).
bool Worker::refresh_assignment() {
  AssignmentKey key;
  auto it = views_.assigns().find(ctx_.instance);
  if (it != views_.assigns().end()) {
    const auto& plan = views_.plan_view();
    key =
        AssignmentKey{it->second.rev, it->second.readable,
                      it->second.readable && core::assignment_in_force(
                                                 it->second.rec.term, plan ? plan->first.term : 0)};
  }
  if (assignment_seen_ && key == assignment_key_) return false;
  assignment_key_ = key;
  assignment_seen_ = true;
  assignment_.reset();
  if (key.in_force) assignment_ = it->second.rec.splits;
  held_.set_assignment(assignment_);
  if (key.in_force) held_.ask_splits(it->second.rec.split_requests);
  return true;
}

// What reconcile acts on is the assignment, the held splits, the lease view and the passage of
// time (claim retries). The passes that depend only on the first three run when one of them
// changed, so a step caused by one split's event does not re-examine every held split. A change
// marks the passes stale; each is marked current only once it completed, so a store error that
// ends a step half-way only delays them.
void Worker::reconcile(TimePoint now) {
  // A retry deadline that has passed gates nothing, but the loop wakes up for every deadline it
  // keeps: drop passed ones (e.g. of a split no longer assigned) or an idle member spins.
  std::erase_if(claim_retry_at_, [&](const auto& kv) { return kv.second <= now; });
  mirror_held();
  // After the held changes: a release journals its lease delete before its drop, so every drop
  // seen has its delete here too (else the sweep below would take the lease for an orphan).
  for (const auto& [id, rev] : held_.take_erased_leases()) views_.own_lease_deleted(id, rev);
  if (!views_.caught_up()) return;
  if (refresh_assignment()) stale_ = Stale{true, true, true, true};
  if (views_.follows_dropped() != followed_after_drop_) stale_.follows = true;
  follow_leases(now);
  // No instruction is not an instruction to hold nothing (the passes stay stale until one).
  if (!assignment_) return;
  const std::vector<std::string>& assigned = *assignment_;
  if (stale_.orphans || views_.leases().generation() != seen_lease_gen_) {
    // The generation before the sweep: what the sweep itself changed in the view (a give-back
    // that lost its race re-reads the lease) is looked at again next step.
    const std::uint64_t gen = views_.leases().generation();
    give_back_orphan_leases(assigned);
    seen_lease_gen_ = gen;
    stale_.orphans = false;
  }
  if (stale_.specs) {
    // Specs prefetched for splits no longer assigned (bounded by the assignment's size).
    auto unassigned = [&](const auto& kv) { return !contains(assigned, kv.first); };
    std::erase_if(spec_cache_, unassigned);
    std::erase_if(spec_absent_since_, unassigned);
    stale_.specs = false;
  }
  // Held, not assigned -> revoke: every held split after the assignment changed, else the ones
  // added since the last pass.
  const auto revoke_unassigned = [&](const std::string& id) {
    if (contains(assigned, id)) return;
    if (auto h = held_.find(id)) held_.begin_revocation(*h, now);
  };
  if (stale_.revocations) {
    for (const std::string& id : held_ids_) revoke_unassigned(id);
  } else {
    for (const std::string& id : held_added_) revoke_unassigned(id);
  }
  stale_.revocations = false;
  held_added_.clear();
  claim_assigned(assigned, now);
}

// Applies HeldSplits' changes to held_ids_; the passes that read the set become stale.
void Worker::mirror_held() {
  for (auto& [id, now_held] : held_.take_held_changes()) {
    stale_.follows = stale_.orphans = true;
    if (now_held) {
      held_ids_.insert(id);
      held_added_.push_back(std::move(id));
    } else {
      held_ids_.erase(id);
    }
  }
}

// Worker scope: the leases a claim reads are followed by key watches: those of the first
// max_in_flight assigned splits not held (the ones a claim pass tries), and those of splits whose
// lease create had an unknown outcome, until the view shows whether it landed. The set is
// recomputed when the assignment, the held splits or the doubtful leases changed.
void Worker::follow_leases(TimePoint now) {
  const std::size_t resolved = std::erase_if(doubtful_leases_, [&](const auto& kv) {
    const std::string& id = kv.first;
    if (!views_.lease_known(id)) return false;
    auto it = views_.leases().find(id);
    if (it == views_.leases().end()) return now >= kv.second;  // it may still land until then
    return it->second.rec.nonce != session_.nonce() || held_ids_.count(id) != 0;
  });
  if (resolved > 0) ++doubtful_gen_;
  if (doubtful_gen_ != followed_gen_) stale_.follows = true;
  if (!stale_.follows) return;
  const std::uint64_t doubtful_gen = doubtful_gen_;
  const std::uint64_t drops = views_.follows_dropped();
  std::set<std::string> follow;
  for (const auto& [id, until] : doubtful_leases_) follow.insert(id);
  if (assignment_) {
    std::size_t waiting = 0;
    for (const std::string& id : *assignment_) {
      if (waiting >= ctx_.config.max_in_flight) break;
      if (held_ids_.count(id)) continue;
      follow.insert(id);
      ++waiting;
    }
  }
  views_.follow_leases(follow);
  std::erase_if(orphan_watch_, [&](const auto& kv) { return !follow.count(kv.first); });
  std::erase_if(session_waits_, [&](const auto& kv) { return !follow.count(kv.first); });
  follow_waited_sessions();
  followed_gen_ = doubtful_gen;
  followed_after_drop_ = drops;
  stale_.follows = false;
}

void Worker::follow_waited_sessions() {
  std::set<std::string> sessions;
  for (const auto& [id, owner] : session_waits_) sessions.insert(owner);
  views_.follow_sessions(sessions);
}

// Leases of this process for splits it neither holds nor is asked to claim are leftovers of a
// claim that failed half-way (lease created, then the record CAS or the give-back failed with a
// store error). Nobody may claim those splits while this member lives: give them back (guarded
// delete at the revision seen; a lost race refreshes the view from the store, so a wrong revision
// in the view cannot keep the lease alive for ever).
void Worker::give_back_orphan_leases(const std::vector<std::string>& assigned) {
  std::vector<std::pair<std::string, Revision>> orphans;
  const LeaseTable& leases = views_.leases();
  for (const std::string& id : leases.owned()) {
    if (held_ids_.count(id) || contains(assigned, id)) continue;
    auto it = leases.find(id);
    if (it != leases.end() && it->second.rec.nonce == session_.nonce()) {
      orphans.emplace_back(id, it->second.rev);
    }
  }
  for (const auto& [id, rev] : orphans) liveness_.erase_lease_at(id, rev);
}

// assigned, not held -> claim, within the lane budget and a bound per step.
void Worker::claim_assigned(const std::vector<std::string>& assigned, TimePoint now) {
  std::size_t holding = held_ids_.size();
  std::size_t attempts = 0;
  for (const std::string& id : assigned) {
    if (holding >= ctx_.config.max_in_flight || attempts >= kClaimsPerStep) break;
    if (held_ids_.count(id)) continue;
    if (auto it = claim_retry_at_.find(id); it != claim_retry_at_.end() && it->second > now) {
      continue;
    }
    ++attempts;
    try_claim(id, now);
    if (held_.find(id)) ++holding;
  }
}

void Worker::try_claim(const std::string& id, TimePoint now) {
  try {
    claim(id, now);
  } catch (const core::RecordError& e) {
    // One unreadable record must not stall the member's other claims (the leader rebuilds it).
    ctx_.metrics.unreadable_record();
    warn_.warn(core::split_key(id), fmt::format("cannot claim split '{}': {}", id, e.what()));
    claim_retry_at_[id] = now + ctx_.config.lease_duration;
    spec_cache_.erase(id);
  }
}

// Forced revocation: a declined drain, or one past its deadline. The split is released (its
// owner is alive, so no attempt is consumed) and the user is told it is lost.
void Worker::force_due_revocations(TimePoint now) {
  for (const auto& [h, declined] : held_.due_revocations(now)) {
    MutexLock io(h->io);
    if (h->gone) continue;
    log().info("etlc: {}: forcing the release of split '{}' ({})", ctx_.instance, h->id,
               declined ? "declined" : "drain deadline passed");
    const CommitResult r = held_.release_locked(*h);
    if (r.status == CommitStatus::retryable) continue;  // retried next step
    if (r.durable()) {  // (a fenced release already reported the loss as fenced)
      ctx_.metrics.revocation(declined ? "declined" : "timed_out");  // once, when it happened
      ctx_.metrics.lost(LossReason::revoked);
      held_.push_event(SplitLost{h->id, LossReason::revoked});
    }
  }
}

void Worker::observe_completion() {
  const auto& view = views_.plan_view();
  if (!view) return;
  const core::PlanRecord& plan = view->first;
  if (plan.verdict == core::Verdict::complete && !seen_complete_) {
    seen_complete_ = true;
    held_.push_event(AllComplete{plan.completed});
  } else if (plan.verdict == core::Verdict::stalled && !seen_stalled_) {
    seen_stalled_ = true;
    held_.push_event(Stalled{plan.completed, plan.quarantined, {}});
  } else if (plan.verdict == core::Verdict::failed && !seen_stalled_) {
    seen_stalled_ = true;  // the planner failed max_planner_failures times (planning.cpp)
    held_.push_event(Stalled{plan.completed, plan.quarantined,
                             plan.message.value_or("the job's planner failed")});
  } else if (plan.verdict == core::Verdict::running) {
    seen_stalled_ = false;  // an operator requeued or resumed: a later stall is news again
  }
}

void Worker::leases_freed(const std::vector<std::string>& ids) {
  for (const auto& id : ids) claim_retry_at_.erase(id);
}

void Worker::sessions_known(const std::vector<std::string>& instances) {
  for (const auto& [id, owner] : session_waits_) {
    if (std::find(instances.begin(), instances.end(), owner) != instances.end()) {
      claim_retry_at_.erase(id);
    }
  }
}

std::optional<TimePoint> Worker::next_retry(TimePoint now) const {
  std::optional<TimePoint> next;
  for (const auto& [id, at] : claim_retry_at_) {
    if (at > now && (!next || at < *next)) next = at;
  }
  return next;
}

const SplitSpec* Worker::load_spec(const std::string& id, Revision* unreadable_rev) {
  if (auto it = spec_cache_.find(id); it != spec_cache_.end()) return &it->second;
  auto stored = ctx_.store.get(core::spec_key(id));
  if (!stored) return nullptr;
  if (unreadable_rev) *unreadable_rev = stored->revision;
  return &spec_cache_.emplace(id, core::decode_spec(core::spec_key(id), stored->value).spec)
              .first->second;
}

void Worker::prefetch_spec(const std::string& id) {
  try {
    load_spec(id);
  } catch (const StoreError& e) {
    if (!e.retryable()) throw;  // a prefetch is an optimisation: the claim reads it again
  } catch (const core::RecordError&) {
    // the claim finds it unreadable and parks the split
  }
}

// Whether spec.{id} is usable for a claim: nullopt if it reads (or may still appear), else what
// is wrong with it. Seeding writes a split's spec before its record, so a record whose spec is
// absent lost it; a stale read can look the same for a moment, so absence counts after two leases.
std::optional<Worker::SpecProblem> Worker::check_spec(const std::string& id, TimePoint now) {
  Revision read_at = 0;
  try {
    if (load_spec(id, &read_at) != nullptr) {
      spec_absent_since_.erase(id);
      return std::nullopt;
    }
  } catch (const core::RecordError& e) {
    return SpecProblem{fmt::format("spec.{} is unreadable ({})", id, e.what()), read_at};
  }
  auto [it, fresh] = spec_absent_since_.try_emplace(id, now);
  (void)fresh;
  if (now - it->second < 2 * ctx_.config.lease_duration) return std::nullopt;
  return SpecProblem{fmt::format("spec.{} is missing", id), 0};
}

}  // namespace etlc::runtime
