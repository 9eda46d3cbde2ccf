// Healing: whatever a stray writer leaves in the store, the job makes progress or ends in a named
// state (docs/architecture.md, "No store state stalls a job"). The views (views.cpp) only record
// damage; the repairs are here, with the rules in core/repair_rules.hpp:
//
//   record        damage              who repairs, how
//   job.leader    unreadable          its leader rewrites it; anyone else deletes it (guarded, at
//                                     the revision seen) after a lease, so an election can happen
//   job.plan      unreadable/deleted  the leader rewrites it from the last plan it read, at its own
//                                     term (above every term seen: terms never go back); a leader
//                                     that never read one re-plans from a fresh record
//   split.{id}    unreadable/deleted  the leader rebuilds it from the last record it saw, else
//                                     from its spec, else by a re-plan; at a rebuilt epoch, so the
//                                     old tenancy is fenced; progress is never ahead of the truth
//   spec.{id}     unreadable/missing  the claimer parks the split (reconcile.cpp); the leader
//                                     re-plans, rewrites the spec and requeues it, or it stays
//                                     parked with a reason naming the repair (the job stalls)
//   member.{me}   unreadable          its owner replaces it (session.cpp)
//   member.{x}    unreadable          peers expire it after a lease unless its owner replaces it
//   lease.{id}    unreadable          the next claimer deletes it (it names no live session)
//   assign.{x}    unreadable          the leader rewrites it; its member holds what it has
//   cordon.{x}    unreadable          treated as absent
#include <fmt/format.h>
#include "log.hpp"

#include "core/keys.hpp"
#include "core/repair_rules.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

namespace {
constexpr std::size_t kHealsPerStep = 64;
constexpr std::size_t kMaxThrottledKeys = 4096;
}  // namespace

std::uint64_t Member::highest_term_seen() const {
  std::uint64_t t = max_term_seen_;
  if (plan_view_) t = std::max(t, plan_view_->first.term);
  if (leader_view_) t = std::max(t, leader_view_->first.term);
  return t;
}

void Member::warn_throttled(const std::string& key, const std::string& message) {
  const TimePoint now = clock_.now();
  auto it = warned_at_.find(key);
  if (it != warned_at_.end() && now - it->second < config_.lease_duration) return;
  if (it == warned_at_.end() && warned_at_.size() >= kMaxThrottledKeys) warned_at_.clear();
  warned_at_[key] = now;
  log().warn("etlc: {}: {}", instance_, message);
}

void Member::heal(TimePoint now) {
  heal_leader_record(now);
  if (!leader_) return;
  heal_plan();
  if (!leader_) return;
  heal_splits();
}

// The leader owns job.leader: garbage over it is replaced at once. (Non-leaders remove an
// unreadable leader record after a lease: liveness.cpp.)
void Member::heal_leader_record(TimePoint now) {
  (void)now;
  if (!leader_ || !leader_damage_) return;
  const core::LeaderRecord rec{instance_, nonce_, term_};
  WriteResult r = store_->update(core::kLeaderKey, core::encode(rec), leader_damage_->rev);
  if (!r.ok) {
    step_down("the leader record was overwritten");
    return;
  }
  log().warn("etlc: {}: rewrote its unreadable leader record ({})", instance_,
             leader_damage_->error);
  leader_rev_ = r.revision;
  leader_view_ = std::make_pair(rec, r.revision);
  leader_damage_.reset();
}

// job.plan unreadable or deleted: write it back from the last plan read, at our term. Our term is
// above every term anyone held when we were elected, and a newer one would have deposed us; if a
// record shows one, step down instead.
void Member::heal_plan() {
  if (!plan_damage_) return;
  if (highest_term_seen() > term_) {
    step_down("a newer term exists");
    return;
  }
  core::PlanRecord next;
  if (plan_view_) {
    next = plan_view_->first;
  } else {
    next.fingerprint = fingerprint_;  // nothing known: re-plan (seeding keeps what exists)
  }
  next.term = term_;
  const std::string bytes = core::encode(next);
  WriteResult r = plan_damage_->deleted ? store_->create(core::kPlanKey, bytes)
                                        : store_->update(core::kPlanKey, bytes, plan_damage_->rev);
  if (!r.ok) {
    // Someone wrote it meanwhile: look at what is there now.
    auto cur = store_->get(core::kPlanKey);
    if (!cur) {
      plan_damage_->deleted = true;
      return;
    }
    try {
      core::PlanRecord seen = core::decode_plan(core::kPlanKey, cur->value);
      note_term(seen.term);
      plan_view_ = std::make_pair(std::move(seen), cur->revision);
      plan_damage_.reset();
    } catch (const core::RecordError&) {
      plan_damage_->rev = cur->revision;
      plan_damage_->deleted = false;
    }
    return;
  }
  log().warn("etlc: {}: rewrote the plan record ({}) from the plan it last read, at term {}",
             instance_, plan_damage_->error, term_);
  plan_view_ = std::make_pair(next, r.revision);
  plan_damage_.reset();
}

void Member::heal_splits() {
  std::size_t done = 0;
  for (auto it = split_damage_.begin(); it != split_damage_.end() && done < kHealsPerStep;) {
    ++done;
    const std::string id = it->first;
    ++it;  // heal_split may erase the entry
    heal_split(id, split_damage_.at(id));
  }
  for (const std::string& id : parked_specs_) {
    if (!unrepairable_.count(id)) repair_due_ = true;
  }
}

// Rebuilds one split record. Returns true when the damage is gone.
bool Member::heal_split(const std::string& id, Damage& d) {
  const std::string key = core::split_key(id);
  if (auto cur = store_->get(key)) {
    // Revisions only grow: a record older than the damage we saw (the delete, the garbage) comes
    // from a stale replica and proves nothing; look again at the next pass. (A stale read once
    // made a deleted record look repaired, and nothing rebuilt it: sim chaos 1957.)
    if (d.rev != 0 && cur->revision < d.rev) return false;
    try {
      put_split_view(id, core::decode_split(key, cur->value), cur->revision);
      return true;  // repaired by someone else (an operator, our own earlier write)
    } catch (const core::RecordError&) {
      d.rev = cur->revision;
      d.deleted = false;
    }
  } else {
    d.deleted = true;
  }
  std::optional<core::SplitRecord> last = d.last;
  if (!last) {
    if (auto v = splits_.find(id); v != splits_.end()) last = v->second.rec;
  }
  const auto lease = leases_.find(id);
  const std::uint64_t lease_epoch = lease == leases_.end() ? 0 : lease->second.rec.epoch;
  const std::uint64_t epoch = core::rebuilt_epoch(last ? last->epoch : 0, lease_epoch, term_);
  core::SplitRecord rebuilt;
  if (last) {
    rebuilt = core::rebuild_from_record(*last, epoch);
  } else {
    const SplitSpec* spec = nullptr;
    try {
      spec = load_spec(id);
    } catch (const core::RecordError&) {
    }
    if (spec == nullptr) {
      repair_due_ = true;  // neither record nor spec: only the planner knows the split
      return false;
    }
    rebuilt = core::rebuild_from_spec(*spec, epoch);
    spec_cache_.erase(id);
  }
  const std::string bytes = core::encode(rebuilt);
  WriteResult r = d.deleted ? store_->create(key, bytes) : store_->update(key, bytes, d.rev);
  if (!r.ok) return false;  // moved meanwhile: the next pass reads it again
  log().warn(
      "etlc: {}: rebuilt split record '{}' ({}) at epoch {} from {}: {} at watermark {}; rows "
      "after it are replayed",
      instance_, id, d.error, epoch, last ? "the last record read" : "its spec",
      core::to_string(rebuilt.status), rebuilt.progress.watermark);
  metrics_.record_repaired();
  put_split_view(id, std::move(rebuilt), r.revision);
  return true;
}

// After a fresh snapshot of split.* is still short of the plan's count, the missing records were
// deleted while no leader watched. Every spec names a split: rebuild the ones without a record.
void Member::find_missing_splits() {
  missing_splits_listed_ = true;
  std::size_t found = 0;
  for (const Entry& e : store_->list(core::kSpecPrefix)) {
    auto id = core::id_from_key(e.key, core::kSpecPrefix);
    if (!id || splits_.count(*id) || split_damage_.count(*id)) continue;
    const std::string key = core::split_key(*id);
    auto cur = store_->get(key);
    if (cur) {
      try {
        put_split_view(*id, core::decode_split(key, cur->value), cur->revision);
      } catch (const core::RecordError& err) {
        split_damage_[*id] = Damage{cur->revision, false, clock_.now(), err.what(), std::nullopt};
      }
      continue;
    }
    split_damage_[*id] = Damage{0, true, clock_.now(), "missing", std::nullopt};
    ++found;
  }
  if (plan_view_ && known_split_count() < plan_view_->first.split_count) repair_due_ = true;
  log().warn("etlc: {}: {} split records are missing; rebuilding them from their specs{}",
             instance_, found, repair_due_ ? " (and re-planning for the rest)" : "");
}

// During a repair re-plan, for each split the planner lists: rewrite its spec if it cannot be
// read, then requeue the split if it was parked for it, or rebuild its record from the spec if it
// is damaged and nothing else is known of it.
void Member::repair_seeded(const PlannedSplit& s) {
  const std::string& id = s.spec.id;
  const auto view = splits_.find(id);
  const bool parked = view != splits_.end() && core::parked_for_spec(view->second.rec);
  const auto damage = split_damage_.find(id);
  const bool rebuild =
      view == splits_.end() && damage != split_damage_.end() && !damage->second.last;
  if (!parked && !rebuild) return;
  const std::string skey = core::spec_key(id);
  const std::string sbytes = core::encode(core::SpecRecord{s.spec});
  if (!store_->create(skey, sbytes).ok) {
    auto cur = store_->get(skey);
    if (!cur) return;  // deleted again meanwhile: the next repair tries again
    try {
      core::decode_spec(skey, cur->value);  // readable: specs are immutable, keep it
    } catch (const core::RecordError&) {
      if (!store_->update(skey, sbytes, cur->revision).ok) return;
      log().warn("etlc: {}: rewrote the unreadable spec of split '{}' from the plan", instance_,
                 id);
      metrics_.record_repaired();
    }
  }
  spec_cache_.erase(id);
  const std::string key = core::split_key(id);
  if (parked) {
    core::SplitRecord next = view->second.rec;
    next.status = core::SplitStatus::runnable;
    WriteResult r = store_->update(key, core::encode(next), view->second.rev);
    if (!r.ok) return;
    log().warn("etlc: {}: requeued split '{}' after rewriting its spec", instance_, id);
    put_split_view(id, std::move(next), r.revision);
    return;
  }
  const auto lease = leases_.find(id);
  const std::uint64_t epoch =
      core::rebuilt_epoch(0, lease == leases_.end() ? 0 : lease->second.rec.epoch, term_);
  core::SplitRecord rebuilt = core::rebuild_from_spec(s.spec, epoch);
  const std::string bytes = core::encode(rebuilt);
  WriteResult r = damage->second.deleted ? store_->create(key, bytes)
                                         : store_->update(key, bytes, damage->second.rev);
  if (!r.ok) return;
  log().warn("etlc: {}: rebuilt split record '{}' from the plan at epoch {}", instance_, id, epoch);
  metrics_.record_repaired();
  put_split_view(id, std::move(rebuilt), r.revision);
}

}  // namespace etlc::runtime
