// Healing: whatever a stray writer leaves in the store, the job makes progress or ends in a named
// state (docs/architecture.md, "No store state stalls a job"). The views only record damage; the
// repairs are where the owner of each record is, with the rules in core/repair_rules.hpp:
//
//   record        damage              who repairs, how
//   job.leader    unreadable          its leader rewrites it (here); anyone else deletes it
//                                     (guarded, at the revision seen) after a lease: liveness.cpp
//   job.plan      unreadable/deleted  the leader rewrites it from the last plan it read, at its own
//                                     term (above every term seen: terms never go back); a leader
//                                     that never read one re-plans from a fresh record
//   split.{id}    unreadable/deleted  the leader rebuilds it from the last record it saw, else
//                                     from its spec, else by a re-plan; at a rebuilt epoch, so the
//                                     old tenancy is fenced; progress is never ahead of the truth
//   spec.{id}     unreadable/missing  the claimer parks the split (claim.cpp); the leader
//                                     re-plans, rewrites the spec and requeues it, or it stays
//                                     parked with a reason naming the repair (the job stalls)
//   member.{me}   unreadable          its owner replaces it (session.cpp)
//   member.{x}    unreadable          peers expire it after a lease unless its owner replaces it
//   lease.{id}    unreadable          the next claimer deletes it (it names no live session)
//   assign.{x}    unreadable          the leader rewrites it; its member holds what it has
//   cordon.{x}    unreadable          treated as absent
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cut_rules.hpp"
#include "core/keys.hpp"
#include "core/protocol_assert.hpp"
#include "core/repair_rules.hpp"
#include "log.hpp"
#include "runtime/leadership.hpp"

namespace etlc::runtime {

namespace {
constexpr std::size_t kHealsPerStep = 64;
}  // namespace

void Leadership::heal(TimePoint now) {
  (void)now;
  heal_leader_record();
  if (outcome_.kind != Outcome::Kind::lead) return;
  heal_plan();
  if (outcome_.kind != Outcome::Kind::lead) return;
  heal_splits();
}

// The leader owns job.leader: garbage over it is replaced at once.
void Leadership::heal_leader_record() {
  const auto& damage = views_.leader_damage();
  if (!damage) return;
  const core::LeaderRecord rec{ctx_.instance, nonce_, term_};
  const WriteResult r = ctx_.store.update(core::kLeaderKey, core::encode(rec), damage->rev);
  if (!r.ok) {
    step_down("the leader record was overwritten");
    return;
  }
  log().warn("etlc: {}: rewrote its unreadable leader record ({})", ctx_.instance, damage->error);
  leader_rev_ = r.revision;
  views_.clear_leader_damage();
  views_.set_leader_view(rec, r.revision);
}

// job.plan unreadable or deleted: write it back from the last plan read, at our term. Our term is
// above every term anyone held when we were elected, and a newer one would have deposed us; if a
// record shows one, step down instead.
void Leadership::heal_plan() {
  const auto& damage = views_.plan_damage();
  if (!damage) return;
  if (views_.highest_term_seen() > term_) {
    step_down("a newer term exists");
    return;
  }
  core::PlanRecord next;
  if (const auto& view = views_.plan_view()) {
    next = view->first;
  } else {
    next.fingerprint = ctx_.fingerprint;  // nothing known: re-plan (seeding keeps what exists)
  }
  next.term = term_;
  const std::string bytes = core::encode(next);
  const WriteResult r = damage->deleted ? ctx_.store.create(core::kPlanKey, bytes)
                                        : ctx_.store.update(core::kPlanKey, bytes, damage->rev);
  if (r.ok) {
    log().warn("etlc: {}: rewrote the plan record ({}) from the plan it last read, at term {}",
               ctx_.instance, damage->error, term_);
    views_.clear_plan_damage();
    views_.set_plan_view(std::move(next), r.revision);
    return;
  }
  // Someone wrote it meanwhile: look at what is there now.
  Damage again = *damage;
  auto cur = ctx_.store.get(core::kPlanKey);
  if (!cur) {
    again.deleted = true;
    views_.set_plan_damage(std::move(again));
    return;
  }
  try {
    core::PlanRecord seen = core::decode_plan(core::kPlanKey, cur->value);
    views_.clear_plan_damage();
    views_.set_plan_view(std::move(seen), cur->revision);
  } catch (const core::RecordError&) {
    again.rev = cur->revision;
    again.deleted = false;
    views_.set_plan_damage(std::move(again));
  }
}

void Leadership::heal_splits() {
  auto& damage = leader_views_.split_damage();
  std::size_t done = 0;
  for (auto it = damage.begin(); it != damage.end() && done < kHealsPerStep;) {
    ++done;
    const std::string id = it->first;
    ++it;  // heal_split may erase the entry
    heal_split(id, damage.at(id));
  }
  // A split parked for its spec waits for a repair re-plan, unless the last one did not list it.
  std::erase_if(unrepairable_,
                [&](const std::string& id) { return !leader_views_.parked_specs().count(id); });
  for (const std::string& id : leader_views_.parked_specs()) {
    if (!unrepairable_.count(id)) repair_due_ = true;
  }
}

// Rebuilds one split record. Returns true when the damage is gone.
bool Leadership::heal_split(const std::string& id, Damage& d) {
  const std::string key = core::split_key(id);
  if (auto cur = ctx_.store.get(key)) {
    // Revisions only grow: a record older than the damage we saw (the delete, the garbage) comes
    // from a stale replica and proves nothing; look again at the next pass. (A stale read once
    // made a deleted record look repaired, and nothing rebuilt it: sim chaos 1957.)
    if (d.rev != 0 && cur->revision < d.rev) return false;
    try {
      if (leader_views_.put_split(id, core::decode_split(key, cur->value), cur->revision)) {
        assignment_dirty_ = true;
      }
      return true;  // repaired by someone else (an operator, our own earlier write)
    } catch (const core::RecordError&) {
      d.rev = cur->revision;
      d.deleted = false;
    }
  } else {
    d.deleted = true;
  }
  std::optional<core::SplitRecord> rebuilt = rebuild(id, d);
  if (!rebuilt) return false;
  const std::string bytes = core::encode(*rebuilt);
  const WriteResult r =
      d.deleted ? ctx_.store.create(key, bytes) : ctx_.store.update(key, bytes, d.rev);
  if (!r.ok) return false;  // moved meanwhile: the next pass reads it again
  log().warn(
      "etlc: {}: rebuilt split record '{}' ({}) at epoch {} from {}: {} at watermark {}; rows "
      "after it are replayed",
      ctx_.instance, id, d.error, rebuilt->epoch,
      d.last                            ? "the last record read"
      : core::parked_for_spec(*rebuilt) ? "its id (its spec is unusable too)"
                                        : "its spec",
      core::to_string(rebuilt->status), rebuilt->progress.watermark);
  ctx_.metrics.record_repaired();
  leader_views_.put_split(id, std::move(*rebuilt), r.revision);
  assignment_dirty_ = true;
  return true;
}

// The residuals cut from `id` that its lost record named: those past pending (only a named
// residual is ever made runnable), in the order they were cut. A record rebuilt from its spec
// keeps them, or its lane would read their records again, and their next cut would reuse an id
// (sim operator 131); it resumes from the progress its last cut recorded in the residual's spec
// (apply_cuts_of, core::apply_cuts), whose state carries its end.
std::vector<std::string> Leadership::named_residuals_of(const std::string& id) const {
  std::map<std::string, std::uint64_t> found;  // residual -> epoch of the cut
  auto consider = [&](const std::string& child, const std::optional<core::SplitOrigin>& origin) {
    if (origin && origin->split == id) found.emplace(child, origin->epoch);
  };
  for (const auto& [child, v] : leader_views_.splits()) consider(child, v.rec.cut_from);
  // Pending ones too: one may be named already (its flip not seen), and naming one that was not
  // costs a replay of its rows, where dropping a named one would lose them.
  for (const auto& [child, v] : leader_views_.pending()) consider(child, v.rec.cut_from);
  // Damaged ones too (damaged with their parent): healing rebuilds them after it, and dropped
  // here they would be orphans whose rows the parent reads again.
  for (const auto& [child, d] : leader_views_.split_damage()) {
    consider(child, d.last && d.last->cut_from ? d.last->cut_from : core::residual_origin(child));
  }
  std::vector<std::tuple<std::uint64_t, std::uint64_t, std::string>> order;
  for (const auto& [child, epoch] : found) {
    std::uint64_t n = 0;
    for (char c : std::string_view(child).substr(child.rfind('.') + 1)) {
      n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
    order.emplace_back(epoch, n, child);
  }
  std::sort(order.begin(), order.end());
  std::vector<std::string> out;
  for (auto& o : order) out.push_back(std::move(std::get<2>(o)));
  return out;
}

// The rebuilt record: from the last record read, else from the spec; nullopt when neither is
// known (only the planner knows the split: a repair re-plan).
std::optional<core::SplitRecord> Leadership::rebuild(const std::string& id, const Damage& d) {
  std::optional<core::SplitRecord> last = d.last;
  if (!last) {
    if (auto v = leader_views_.splits().find(id); v != leader_views_.splits().end()) {
      last = v->second.rec;
    } else if (auto p = leader_views_.pending().find(id); p != leader_views_.pending().end()) {
      last = p->second.rec;  // a pending residual's record garbled: its epoch counts too (sim
                             // operator 649 rebuilt it at the epoch it already had)
    }
  }
  const auto lease = views_.leases().find(id);
  const std::uint64_t lease_epoch = lease == views_.leases().end() ? 0 : lease->second.rec.epoch;
  const std::uint64_t epoch = core::rebuilt_epoch(last ? last->epoch : 0, lease_epoch, term_);
  ETLC_ASSERT(epoch == std::numeric_limits<std::uint64_t>::max() ||  // saturated (garbage)
                  (epoch > lease_epoch && (!last || epoch > last->epoch)),
              "split '{}' rebuilt at epoch {}, not past its last record's {} and lease's {}", id,
              epoch, last ? last->epoch : 0, lease_epoch);
  if (last) return core::rebuild_from_record(*last, epoch);
  const std::optional<core::SplitOrigin> origin = core::residual_origin(id);
  const core::SplitRecord* parent = nullptr;
  if (origin) {
    auto it = leader_views_.splits().find(origin->split);
    if (it != leader_views_.splits().end()) parent = &it->second.rec;
  }
  std::string problem = fmt::format("spec.{} is missing", id);
  if (std::optional<Entry> stored = ctx_.store.get(core::spec_key(id))) {
    try {
      const SplitSpec spec = core::decode_spec(core::spec_key(id), stored->value).spec;
      core::SplitRecord r = origin ? core::rebuild_residual(spec, *origin, epoch, parent)
                                   : core::rebuild_from_spec(spec, epoch);
      if (!apply_cuts_of(id, r, d)) return std::nullopt;
      return r;
    } catch (const core::RecordError& e) {
      problem = fmt::format("spec.{} is unreadable ({})", id, e.what());
    }
  }
  if (!origin) {
    repair_due_ = true;  // the planner knows the split
    return std::nullopt;
  }
  // A residual: no planner lists it. Its spec may be a stale read, or under repair: wait a lease.
  if (ctx_.clock.now() - d.since < ctx_.config.lease_duration) return std::nullopt;
  if (parent && core::names_child(*parent, id)) {
    core::SplitRecord r = core::park_residual_without_spec(id, *origin, epoch, problem);
    r.children = named_residuals_of(id);
    return r;
  }
  drop_unnamed_residual(id, *origin, parent, d);
  return std::nullopt;
}

// What is left of a residual its parent does not name, with no usable spec (a cut that never
// landed, then damaged): nothing to rebuild. Once the tenancy that cut it is over, or its parent
// exists nowhere, it can never be named: its spec and any unreadable record are removed (guarded)
// and the damage forgotten; until then the next pass looks again.
void Leadership::drop_unnamed_residual(const std::string& id, const core::SplitOrigin& origin,
                                       const core::SplitRecord* parent, const Damage& d) {
  if (parent) {
    if (core::pending_child_fate(core::pending_child(id, 0, origin), parent) !=
        core::ChildFate::orphan) {
      return;
    }
  } else if (!parent_exists_nowhere(origin.split)) {
    return;  // its parent is being healed, is itself pending, or exists beyond the view
  }
  if (auto spec = ctx_.store.get(core::spec_key(id))) {
    if (!ctx_.store.erase(core::spec_key(id), spec->revision).ok) return;
  }
  if (!d.deleted && !ctx_.store.erase(core::split_key(id), d.rev).ok) return;
  log().warn("etlc: {}: removed what was left of residual '{}' ({}): split '{}' never named it",
             ctx_.instance, id, d.error, origin.split);
  leader_views_.split_damage().erase(id);
}

// A record rebuilt from its spec takes back the cuts made from it (core::apply_cuts). A last
// residual whose spec cannot be read now (a stale replica, damage the claimer or a re-plan is
// healing) is waited for up to a lease from the damage, then the rebuild goes on without its
// end (its rows replayed by the parent, not lost). False: not yet.
bool Leadership::apply_cuts_of(const std::string& id, core::SplitRecord& r, const Damage& d) {
  std::vector<core::CutSeen> cuts;
  for (std::string& child : named_residuals_of(id)) {
    core::CutSeen c{std::move(child), std::nullopt};
    const std::string key = core::spec_key(c.child);
    if (auto e = ctx_.store.get(key)) {
      try {
        c.spec = core::decode_spec(key, e->value);
      } catch (const core::RecordError&) {
      }
    }
    cuts.push_back(std::move(c));
  }
  const std::size_t unusable = core::apply_cuts(r, cuts);
  if (unusable == 0) return true;
  if (ctx_.clock.now() - d.since < ctx_.config.lease_duration) return false;
  log().warn(
      "etlc: {}: rebuilding split record '{}' without the end of its last {} cuts (their "
      "residuals' specs are unreadable or from an older release): their rows will be read twice",
      ctx_.instance, id, unusable);
  return true;
}

// After a fresh snapshot of split.* is still short of the plan's count, the missing records were
// deleted while no leader watched. Every spec names a split: rebuild the ones without a record.
// Marked done only once it got through: a store error part way (it throws) retries next step
// (a lone member's listing failed once on a store pause, and its deleted record stayed missing).
void Leadership::find_missing_splits() {
  auto& damage = leader_views_.split_damage();
  std::size_t found = 0;
  for (const Entry& e : ctx_.store.list(core::kSpecPrefix)) {
    auto id = core::id_from_key(e.key, core::kSpecPrefix);
    if (!id || leader_views_.splits().count(*id) || leader_views_.pending().count(*id) ||
        damage.count(*id)) {
      continue;
    }
    const std::string key = core::split_key(*id);
    auto cur = ctx_.store.get(key);
    if (cur) {
      try {
        if (leader_views_.put_split(*id, core::decode_split(key, cur->value), cur->revision)) {
          assignment_dirty_ = true;
        }
      } catch (const core::RecordError& err) {
        damage[*id] = Damage{cur->revision, false, ctx_.clock.now(), err.what(), std::nullopt};
      }
      continue;
    }
    damage[*id] = Damage{0, true, ctx_.clock.now(), "missing", std::nullopt};
    ++found;
  }
  missing_splits_listed_ = true;
  const auto& view = views_.plan_view();
  if (view && leader_views_.known_split_count() < view->first.split_count) repair_due_ = true;
  if (found > 0 || repair_due_) {
    log().warn("etlc: {}: {} split records are missing; rebuilding them from their specs{}",
               ctx_.instance, found, repair_due_ ? " (and re-planning for the rest)" : "");
  }
}

// During a repair re-plan, for each split the planner lists: rewrite its spec if it cannot be
// read, then requeue the split if it was parked for it, or rebuild its record from the spec if it
// is damaged and nothing else is known of it.
void Leadership::repair_seeded(const PlannedSplit& s) {
  const std::string& id = s.spec.id;
  const auto view = leader_views_.splits().find(id);
  const bool parked =
      view != leader_views_.splits().end() && core::parked_for_spec(view->second.rec);
  auto& damage = leader_views_.split_damage();
  const auto d = damage.find(id);
  const bool no_memory =
      view == leader_views_.splits().end() && d != damage.end() && !d->second.last;
  if (!parked && !no_memory) return;
  if (!rewrite_spec(s, parked)) return;
  if (parked) {
    if (plan_settled()) send_requeue(id, view->second);
    return;
  }
  // The spec is there now: rebuild from it as healing does, with the cuts made from the split
  // (a re-plan knows only the planned range; sim operator 22985 read a completed parent's
  // residuals again from a record rebuilt here without them).
  heal_split(id, d->second);
}

// spec.{id} from the plan: created if absent, rewritten if unreadable, kept if readable (specs
// are immutable). False when it could not be made readable now (the next repair tries again).
// `confirm`: the split was parked because a claimer found the spec unusable, so a readable read
// must be proven current before the split is requeued on it: a no-op CAS at its revision (a stale
// read of the old readable spec would requeue a split whose spec is still damaged: sim bug 21).
bool Leadership::rewrite_spec(const PlannedSplit& s, bool confirm) {
  const std::string skey = core::spec_key(s.spec.id);
  const std::string sbytes = core::encode(core::SpecRecord{s.spec});
  if (ctx_.store.create(skey, sbytes).ok) return true;
  auto cur = ctx_.store.get(skey);
  if (!cur) return false;  // deleted again meanwhile
  try {
    core::decode_spec(skey, cur->value);
    return !confirm || ctx_.store.update(skey, cur->value, cur->revision).ok;
  } catch (const core::RecordError&) {
    if (!ctx_.store.update(skey, sbytes, cur->revision).ok) return false;
    log().warn("etlc: {}: rewrote the unreadable spec of split '{}' from the plan", ctx_.instance,
               s.spec.id);
    ctx_.metrics.record_repaired();
    return true;
  }
}

// A requeue lowers the truth the plan's tallies count (one quarantine fewer), so it must follow
// every plan write that counted the park: a write with an unknown outcome landing after the
// requeue would tally a quarantine the store no longer holds (sim chaos 39939). Such a write was
// guarded on plan_in_doubt_; a no-op CAS at that revision makes sure it never lands.
bool Leadership::plan_settled() {
  if (!plan_in_doubt_) return true;
  const auto& view = views_.plan_view();
  if (!view || view->second != *plan_in_doubt_) {  // the record moved on: it cannot land now
    plan_in_doubt_.reset();
    return true;
  }
  const core::PlanRecord seen = view->first;
  const WriteResult r = ctx_.store.update(core::kPlanKey, core::encode(seen), view->second);
  plan_in_doubt_.reset();  // landed or lost to another write, the doubtful one cannot land now
  if (r.ok) views_.set_plan_view(seen, r.revision);
  return r.ok;
}

// Requeues a parked split at the view's revision (after plan_settled: a requeue lowers the truth
// the tallies count). True if it landed; an unknown outcome is remembered and thrown.
bool Leadership::send_requeue(const std::string& id, const SplitView& view) {
  core::SplitRecord next = view.rec;
  next.status = core::SplitStatus::runnable;
  const Revision guarded = view.rev;
  WriteResult r;
  try {
    r = ctx_.store.update(core::split_key(id), core::encode(next), guarded);
  } catch (const StoreError& e) {
    if (e.code() == StoreErrc::unknown_outcome) requeues_in_doubt_[id] = {guarded, false};
    throw;
  }
  if (!r.ok) return false;
  log().warn("etlc: {}: requeued split '{}' after rewriting its spec", ctx_.instance, id);
  leader_views_.put_split(id, std::move(next), r.revision);
  assignment_dirty_ = true;
  return true;
}

// A requeue lowers the quarantine tally, so one with an unknown outcome must not land after a
// tally write that still counted the park (the view shows the park until the watch delivers
// what landed): the plan would count a quarantine the store no longer holds (issue 39). Once the
// record has moved past the guarded revision it can no longer land; until then the requeue is
// sent again at that revision, which settles it either way. A CAS that loses means something
// landed there (the first requeue, or another write): the tallies wait for the watch to show it.
bool Leadership::requeues_settled() {
  for (auto it = requeues_in_doubt_.begin(); it != requeues_in_doubt_.end();) {
    const auto view = leader_views_.splits().find(it->first);
    if (view == leader_views_.splits().end() || view->second.rev != it->second.guarded) {
      it = requeues_in_doubt_.erase(it);
      continue;
    }
    if (it->second.moved || !plan_settled()) return false;
    if (!send_requeue(it->first, view->second)) {  // throws on a new unknown outcome: wait
      it->second.moved = true;
      return false;
    }
    it = requeues_in_doubt_.erase(it);
  }
  return true;
}

}  // namespace etlc::runtime
