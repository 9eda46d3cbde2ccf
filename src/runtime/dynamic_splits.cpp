// The leader's part of dynamic splitting (docs/work-assignment.md, "Splitting a split under
// way"): asking owners to cut the splits that would end last while lanes are free, making
// residuals runnable once their parent's record names them, and deleting residuals that can
// never be named. The owner's part, the fenced cut itself, is HeldSplits::split.
//
// Requests travel in the assignment records the leader publishes anyway (assign.{member}
// split_requests), bound to the tenancy they name: no key, watch or write of their own. The
// decision is core::split_requests; this file feeds it from the views and keeps the outstanding
// requests, each dropped when its split's record moves (a new child, another tenancy, done) or,
// taken as declined, after split_request_timeout.
#include <algorithm>

#include "core/cut_rules.hpp"
#include "core/keys.hpp"
#include "core/remaining_work.hpp"
#include "core/split_rules.hpp"
#include "log.hpp"
#include "runtime/leadership.hpp"

namespace etlc::runtime {

namespace {
constexpr std::size_t kResidualWritesPerStep = 64;
}  // namespace

// Pending residuals: runnable once named, deleted once they can never be
// (core::pending_child_fate).
void Leadership::tend_residuals(TimePoint now) {
  std::vector<std::pair<std::string, core::ChildFate>> todo;
  std::erase_if(parentless_checked_,
                [&](const auto& e) { return !leader_views_.pending().count(e.first); });
  for (const auto& [id, v] : leader_views_.pending()) {
    if (todo.size() >= kResidualWritesPerStep) break;
    const core::SplitRecord* parent = nullptr;
    auto it = leader_views_.splits().find(v.rec.cut_from->split);  // a pending record has one
    if (it != leader_views_.splits().end()) parent = &it->second.rec;
    core::ChildFate fate = core::pending_child_fate(v.rec, parent);
    if (parent) parentless_checked_.erase(id);  // "parentless for a lease" starts again
    if (!parent && parent_unknown(id, v, now)) fate = core::ChildFate::orphan;
    if (fate != core::ChildFate::wait) todo.emplace_back(id, fate);
  }
  find_lost_residuals();
  for (const auto& [id, fate] : todo) {
    auto it = leader_views_.pending().find(id);
    if (it == leader_views_.pending().end()) continue;
    const SplitView v = it->second;
    if (fate == core::ChildFate::flip) {
      if (flip_residual(id, v)) assignment_dirty_ = true;
    } else {
      delete_orphan(id, v);
    }
  }
}

// A residual its parent names but whose record is nowhere (an operator deleted it while pending:
// the one delete the views do not take for damage) is damage like any missing split record:
// heal_splits rebuilds it from its spec, so its rows are not lost.
void Leadership::find_lost_residuals() {
  auto& damage = leader_views_.split_damage();
  for (const std::string& parent : leader_views_.parents()) {
    auto it = leader_views_.splits().find(parent);
    if (it == leader_views_.splits().end()) continue;
    for (const std::string& child : it->second.rec.children) {
      if (leader_views_.splits().count(child) || leader_views_.pending().count(child) ||
          damage.count(child)) {
        continue;
      }
      log().warn("etlc: {}: residual '{}' of split '{}' has no record; rebuilding it",
                 ctx_.instance, child, parent);
      damage[child] = Damage{0, true, ctx_.clock.now(), "missing (its parent names it)", {}};
    }
  }
}

// A pending residual whose parent the leader knows nothing of (no record in the caught-up view,
// readable, pending or damaged) is a stray writer's garbage or the leftover of a parent an
// operator removed with its spec: nobody can name it. Whether the parent is really gone is
// settled by delete_orphan's point reads, at most once per lease per residual.
bool Leadership::parent_unknown(const std::string& id, const SplitView& v, TimePoint now) {
  const std::string& parent = v.rec.cut_from->split;
  if (!leader_views_.caught_up() || leader_views_.pending().count(parent) ||
      leader_views_.split_damage().count(parent)) {
    parentless_checked_.erase(id);
    return false;
  }
  auto [it, fresh] = parentless_checked_.try_emplace(id, now);
  if (!fresh && now - it->second < ctx_.config.lease_duration) return false;
  it->second = now;
  return !fresh;  // seen parentless for a lease
}

// A parent that is neither in the leader's views (pending, damaged) nor in the store (record or
// spec): no residual cut from it can ever be named.
bool Leadership::parent_exists_nowhere(const std::string& parent) {
  return !leader_views_.split_damage().count(parent) && !leader_views_.pending().count(parent) &&
         !ctx_.store.get(core::split_key(parent)) && !ctx_.store.get(core::spec_key(parent));
}

// pending -> runnable, by CAS at the revision seen (a loss: the watch shows what happened).
bool Leadership::flip_residual(const std::string& id, const SplitView& v) {
  core::SplitRecord next = v.rec;
  next.status = core::SplitStatus::runnable;
  const WriteResult r = ctx_.store.update(core::split_key(id), core::encode(next), v.rev);
  if (!r.ok) return false;
  log().info("etlc: {}: residual '{}' of split '{}' is runnable (weight {})", ctx_.instance, id,
             v.rec.cut_from->split, v.rec.weight);
  ctx_.metrics.residual_added();
  leader_views_.put_split(id, std::move(next), r.revision);
  return true;
}

// The spec first, then the record: a crash between leaves a pending record without a spec,
// which is an orphan still and is deleted next time (a spec without a record would be listed
// as a split whose record is missing, and rebuilt).
void Leadership::delete_orphan(const std::string& id, const SplitView& v) {
  // The view may be behind the store: the parent as it is now must say orphan too.
  const std::string& parent = v.rec.cut_from->split;
  auto parent_seen = leader_views_.splits().find(parent);
  if (parent_seen == leader_views_.splits().end()) {
    if (!parent_exists_nowhere(parent)) return;
  } else {
    const std::string pkey = core::split_key(parent);
    auto parent_now = ctx_.store.get(pkey);
    if (!parent_now || parent_now->revision < parent_seen->second.rev) {
      return;  // gone, or a stale read: the next step looks again
    }
    try {
      const core::SplitRecord p = core::decode_split(pkey, parent_now->value);
      if (core::pending_child_fate(v.rec, &p) != core::ChildFate::orphan) return;
    } catch (const core::RecordError&) {
      return;  // damaged: healing first
    }
  }
  const std::string skey = core::spec_key(id);
  if (auto spec = ctx_.store.get(skey)) {
    if (!ctx_.store.erase(skey, spec->revision).ok) return;
  }
  if (!ctx_.store.erase(core::split_key(id), v.rev).ok) return;
  log().info(
      "etlc: {}: deleted residual '{}': the tenancy that cut it (split '{}' epoch {}) "
      "{}",
      ctx_.instance, id, parent, v.rec.cut_from->epoch,
      parent_seen == leader_views_.splits().end() ? "does not exist" : "ended without naming it");
}

// Requests already answered (the split's record moved), and those that timed out.
void Leadership::expire_asks(TimePoint now) {
  std::erase_if(asks_, [&](const auto& e) {
    auto it = leader_views_.splits().find(e.first);
    if (it == leader_views_.splits().end()) return true;
    const core::SplitRecord& rec = it->second.rec;
    if (rec.status != core::SplitStatus::runnable || rec.epoch != e.second.epoch ||
        rec.owner != e.second.member || rec.children.size() != e.second.children) {
      return true;
    }
    if (now - e.second.at < ctx_.config.split_request_timeout) return false;
    declined_[e.first] = e.second.epoch;
    log().info(
        "etlc: {}: split '{}' epoch {} did not answer its split request: not asking again "
        "in this tenancy",
        ctx_.instance, e.first, e.second.epoch);
    return true;
  });
  std::erase_if(declined_, [&](const auto& e) {
    auto it = leader_views_.splits().find(e.first);
    return it == leader_views_.splits().end() || it->second.rec.epoch != e.second;
  });
}

// The candidates are the splits under way that stay with their owner in this computation; the
// free lanes are those this computation leaves empty.
void Leadership::ask_for_splits(const core::AssignmentInput& in, const core::Assignment& out,
                                TimePoint now) {
  expire_asks(now);
  if (!ctx_.config.dynamic_splitting || seeding_ || views_.paused()) return;
  std::uint64_t lanes = 0, used = 0;
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    lanes += in.members[m].lanes;
    used += out.by_member[m].size();
  }
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
  std::vector<core::SplitCandidate> candidates;
  std::unordered_map<std::string, std::size_t> member_of;
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    for (std::uint32_t si : out.by_member[m]) {
      const core::AssignSplit& s = in.splits[si];
      if (s.record_owner != static_cast<std::int32_t>(m)) continue;  // not under way there
      const SplitView& v = leader_views_.splits().at(s.id);
      if (!core::child_id_fits(s.id)) continue;
      if (auto d = declined_.find(s.id); d != declined_.end() && d->second == v.rec.epoch) continue;
      core::SplitCandidate c;
      c.id = s.id;
      c.remaining = core::remaining_weight(v.rec);
      if (v.rec.progress.done) c.pace = v.pace.per_kilosecond(now_ms);
      c.children = static_cast<std::uint32_t>(v.rec.children.size());
      c.requested = asks_.count(s.id) > 0;
      candidates.push_back(std::move(c));
      member_of.emplace(s.id, m);
    }
  }
  core::SplitLimits limits;
  const core::JobWeights w = leader_views_.weights();
  const std::uint64_t splits = std::max<std::uint64_t>(leader_views_.splits().size(), 1);
  limits.min_residual_weight = ctx_.config.min_residual_weight > 0
                                   ? ctx_.config.min_residual_weight
                                   : std::max<std::uint64_t>(1, w.planned / splits / 8);
  limits.max_children_per_split = ctx_.config.max_children_per_split;
  limits.max_dynamic_splits = ctx_.config.max_dynamic_splits;
  limits.dynamic_splits_so_far = leader_views_.residuals();
  for (const core::SplitRequest& r :
       core::split_requests(candidates, lanes - used, out.stats.queued, limits)) {
    const SplitView& v = leader_views_.splits().at(r.id);
    asks_[r.id] = Ask{in.members[member_of.at(r.id)].id, v.rec.epoch,
                      static_cast<std::uint32_t>(v.rec.children.size()), r.fraction_ppm, now};
  }
}

std::vector<core::SplitAsk> Leadership::asks_for(const std::string& member,
                                                 const std::vector<std::string>& splits) const {
  std::vector<core::SplitAsk> out;
  for (const auto& [id, a] : asks_) {  // sorted by split, as the record wants
    if (a.member != member || !std::binary_search(splits.begin(), splits.end(), id)) continue;
    out.push_back(core::SplitAsk{id, a.epoch, a.children, a.keep_ppm});
  }
  return out;
}

std::optional<TimePoint> Leadership::next_ask_timeout() const {
  std::optional<TimePoint> next;
  for (const auto& [id, a] : asks_) {
    const TimePoint due = a.at + ctx_.config.split_request_timeout;
    if (!next || due < *next) next = due;
  }
  return next;
}

}  // namespace etlc::runtime
