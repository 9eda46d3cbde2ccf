// LeaderViews: split.* and cordon.* for the leader (leader_views.hpp).
#include "runtime/leader_views.hpp"

#include <utility>

#include "core/cut_rules.hpp"
#include "core/keys.hpp"
#include "core/repair_rules.hpp"
#include "log.hpp"

namespace etlc::runtime {

LeaderViews::LeaderViews(const MemberContext& ctx)
    : ctx_(ctx), splits_watch_(core::kSplitPrefix), cordons_watch_(core::kCordonPrefix) {}

void LeaderViews::ensure_watches() {
  if (!splits_watch_.open()) {
    splits_.clear();
    pending_.clear();
    parents_.clear();
    residuals_ = 0;
    origins_.clear();
    split_damage_.clear();
    parked_specs_.clear();
    completed_ = quarantined_ = 0;
    weights_.clear();
    restarted_ = true;
    ++split_snapshots_;
    splits_watch_.start(ctx_.store, ctx_.wake);
  }
  if (!cordons_watch_.open()) {
    cordons_.clear();
    cordons_watch_.start(ctx_.store, ctx_.wake);
  }
}

bool LeaderViews::drain(TimePoint now, bool& more) {
  bool dirty = std::exchange(restarted_, false);
  more |= splits_watch_.drain(
      ctx_, [&](const WatchEvent& e) { dirty |= on_split_event(e, now); },
      [&](const WatchEvent& e, const std::string& error) {
        if (auto id = core::id_from_key(e.key, core::kSplitPrefix)) {
          split_damage_[*id] = Damage{e.revision, false, now, error, std::nullopt};
          dirty = true;
        }
      });
  more |= cordons_watch_.drain(
      ctx_, [&](const WatchEvent& e) { dirty |= on_cordon_event(e); },
      [&](const WatchEvent& e, const std::string&) {
        auto id = core::id_from_key(e.key, core::kCordonPrefix);
        if (id && cordons_.erase(*id) > 0) dirty = true;  // unreadable: as if absent
      });
  return dirty;
}

std::uint64_t LeaderViews::known_split_count() const {
  const std::set<std::string> named = named_not_runnable();
  std::uint64_t n = splits_.size() + named.size();
  for (const auto& [id, d] : split_damage_) n += splits_.count(id) || named.count(id) ? 0 : 1;
  return n;
}

// Every residual a parent in the view names that is not among the job's splits yet: pending,
// damaged, or not even seen (the store orders events per key only, so a parent's cut may arrive
// before its residual's record).
std::set<std::string> LeaderViews::named_not_runnable() const {
  std::set<std::string> out;
  for (const std::string& p : parents_) {
    auto it = splits_.find(p);
    if (it == splits_.end()) continue;
    for (const std::string& c : it->second.rec.children) {
      if (!splits_.count(c)) out.insert(c);
    }
  }
  return out;
}

std::uint64_t LeaderViews::named_pending() const {
  return named_not_runnable().size();
}

void LeaderViews::count(const core::SplitRecord& r, bool add) {
  if (add) {
    weights_.add(r);
  } else {
    weights_.remove(r);
  }
  if (r.cut_from) {
    residuals_ = add ? residuals_ + 1 : residuals_ - 1;
    auto& n = origins_[r.cut_from->split];
    n = add ? n + 1 : n - 1;
    if (n == 0) origins_.erase(r.cut_from->split);
  }
  if (!r.children.empty()) {
    if (add) {
      parents_.insert(r.id);
    } else {
      parents_.erase(r.id);
    }
  }
  std::uint64_t* tally = r.status == core::SplitStatus::completed     ? &completed_
                         : r.status == core::SplitStatus::quarantined ? &quarantined_
                                                                      : nullptr;
  if (tally != nullptr) *tally = add ? *tally + 1 : *tally - 1;
}

void LeaderViews::observe_pace(core::PaceMeter& pace, const core::SplitRecord& rec,
                               std::optional<TimePoint> observed_at) const {
  if (!observed_at || !rec.progress.done) return;
  pace.observe(
      std::chrono::duration_cast<std::chrono::milliseconds>(observed_at->time_since_epoch()),
      *rec.progress.done);
}

bool LeaderViews::put_split(const std::string& id, core::SplitRecord rec, Revision rev,
                            std::optional<TimePoint> observed_at) {
  const bool was_damaged = split_damage_.erase(id) > 0;
  if (rec.status == core::SplitStatus::pending) return put_pending(id, std::move(rec), rev);
  pending_.erase(id);  // made runnable (or overwritten)
  if (core::parked_for_spec(rec)) {
    parked_specs_.insert(id);
  } else {
    parked_specs_.erase(id);
  }
  auto it = splits_.find(id);
  if (it == splits_.end()) {
    const bool unheld =
        !was_damaged && rec.status == core::SplitStatus::runnable && !rec.owner.has_value();
    count(rec, true);
    core::PaceMeter pace;
    observe_pace(pace, rec, observed_at);
    splits_.emplace(id, SplitView{std::move(rec), rev, 0, pace});
    if (!unheld) return true;
    ++unheld_added_;
    return false;
  }
  // Progress-only commits (same owner, same status) change nothing the assignment reads, but for
  // the split's remaining weight (rate-limited by the leader).
  const bool changed = it->second.rec.status != rec.status || it->second.rec.owner != rec.owner ||
                       it->second.rec.weight != rec.weight;
  progress_changed_ |= core::remaining_weight(it->second.rec) != core::remaining_weight(rec);
  count(it->second.rec, false);
  count(rec, true);
  const std::uint64_t before = it->second.rec.progress.done.value_or(0);
  const std::uint64_t after = rec.progress.done.value_or(0);
  std::uint64_t step = it->second.last_done_step;
  core::PaceMeter pace = it->second.pace;
  if (rec.epoch != it->second.rec.epoch || rec.owner != it->second.rec.owner) pace.reset();
  if (rec.epoch != it->second.rec.epoch || !it->second.rec.progress.done) {
    step = 0;  // a new tenancy, or the first done reported: its pace is not known yet
  } else if (after > before) {
    step = after - before;
  }
  observe_pace(pace, rec, observed_at);
  it->second = SplitView{std::move(rec), rev, step, pace};
  return changed;
}

// A pending residual: kept apart (pending()). A record that was a split of the job and now reads
// pending is an outsider's write; it leaves the job's view as well.
bool LeaderViews::put_pending(const std::string& id, core::SplitRecord rec, Revision rev) {
  bool changed = false;
  if (auto it = splits_.find(id); it != splits_.end()) {
    count(it->second.rec, false);
    parked_specs_.erase(id);
    splits_.erase(it);
    changed = true;
  }
  pending_[id] = SplitView{std::move(rec), rev, 0, core::PaceMeter{}};
  return changed;
}

bool LeaderViews::on_split_event(const WatchEvent& e, TimePoint now) {
  auto id = core::id_from_key(e.key, core::kSplitPrefix);
  if (!id) return false;
  if (auto p = pending_.find(*id); p != pending_.end()) {
    if (p->second.rev >= e.revision) return false;
    if (e.kind == WatchEvent::Kind::erase) {  // the leader's cleanup of an orphan
      pending_.erase(p);
      return false;
    }
  }
  auto it = splits_.find(*id);
  // Older than the view, or the very write the view holds (the echo of the leader's own seeding
  // and rebuilds: revisions name writes, so it is not decoded again).
  if (it != splits_.end() && it->second.rev >= e.revision) return false;
  if (e.kind == WatchEvent::Kind::put) {
    // Unreadable values throw here and reach the damage handler; the view keeps the last one.
    return put_split(*id, core::decode_split(e.key, e.value), e.revision, now);
  }
  // Split records are never deleted: damage, rebuilt by heal_splits() from the last record.
  auto d = split_damage_.find(*id);
  if (d != split_damage_.end() && d->second.rev > e.revision) return false;
  if (it == splits_.end() && d == split_damage_.end()) return false;  // never known
  Damage damage{e.revision, true, now, "deleted", std::nullopt};
  if (it != splits_.end()) {
    damage.last = it->second.rec;
    count(it->second.rec, false);
    parked_specs_.erase(*id);
    splits_.erase(it);
  } else {
    damage.last = d->second.last;
  }
  log().warn("etlc: {}: split record '{}' was deleted", ctx_.instance, *id);
  split_damage_[*id] = std::move(damage);
  return true;
}

bool LeaderViews::on_cordon_event(const WatchEvent& e) {
  auto id = core::id_from_key(e.key, core::kCordonPrefix);
  if (!id) return false;
  if (e.kind == WatchEvent::Kind::put) {
    core::decode_cordon(e.key, e.value);  // validate; garbage is treated as absent
    cordons_.insert(*id);
  } else {
    cordons_.erase(*id);
  }
  return true;
}

}  // namespace etlc::runtime
