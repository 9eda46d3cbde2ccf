// Watches and the local views they feed.
//
// Every member watches job.* (leader, plan), member.* (sessions), lease.* (who holds what) and
// assign.* (assignments). Only the leader watches split.* and cordon.*: a worker's watch traffic
// is O(membership + lease changes + assignments), never O(every commit).
//
// A record that cannot be decoded (garbage written by hand, an alien version) is logged and
// treated as absent: nothing a peer or an operator writes may crash a member.
#include <fmt/format.h>
#include "log.hpp"

#include "core/keys.hpp"
#include "core/repair_rules.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

namespace {
constexpr std::size_t kEventsPerWatchPerStep = 4096;

}  // namespace

void Member::open_watch(WatchSlot& slot) {
  WatchOptions opts;
  opts.notify = options_.wake;
  // Every view keeps only each key's latest state: a skipped intermediate value (a commit, a
  // renewal) changes nothing it decides, while re-watching costs a snapshot of the prefix.
  opts.latest_only = true;
  slot.watch = store_->watch(slot.prefix, std::move(opts));
  slot.caught_up = false;
}

void Member::ensure_watches() {
  if (w_job_.prefix.empty()) {
    w_job_.prefix = std::string(core::kJobPrefix);
    w_members_.prefix = std::string(core::kMemberPrefix);
    w_leases_.prefix = std::string(core::kLeasePrefix);
    w_assigns_.prefix = std::string(core::kAssignPrefix);
    w_splits_.prefix = std::string(core::kSplitPrefix);
    w_cordons_.prefix = std::string(core::kCordonPrefix);
  }
  if (!w_job_.watch) {
    leader_view_.reset();
    plan_view_.reset();
    paused_ = false;  // the snapshot re-delivers job.pause if it still exists
    open_watch(w_job_);
  }
  if (!w_members_.watch) {
    members_.clear();
    open_watch(w_members_);
  }
  if (!w_leases_.watch) {
    leases_.clear();
    open_watch(w_leases_);
  }
  if (!w_assigns_.watch) {
    assigns_.clear();
    open_watch(w_assigns_);
  }
  if (leader_) {
    if (!w_splits_.watch) {
      splits_.clear();
      split_damage_.clear();
      parked_specs_.clear();
      completed_count_ = quarantined_count_ = 0;
      open_watch(w_splits_);
    }
    if (!w_cordons_.watch) {
      cordons_.clear();
      open_watch(w_cordons_);
    }
  }
}

void Member::close_watches() {
  for (WatchSlot* slot : {&w_job_, &w_members_, &w_leases_, &w_assigns_, &w_splits_, &w_cordons_}) {
    slot->watch.reset();
    slot->caught_up = false;
  }
}

bool Member::drain_watches(TimePoint now) {
  bool more = false;
  std::vector<WatchEvent> batch;
  auto drain = [&](WatchSlot& slot, auto&& handle) {
    if (!slot.watch) return;
    batch.clear();
    std::size_t n = 0;
    try {
      n = slot.watch->poll(batch, kEventsPerWatchPerStep);
    } catch (const StoreError& e) {
      // Handle what was delivered before the break? poll() returns those first, so a throw means
      // nothing more is pending. Re-watch: the fresh snapshot rebuilds the view.
      log().info("etlc: {}: watch on '{}' broke ({}); re-watching", instance_, slot.prefix,
                 e.what());
      slot.watch.reset();
      slot.caught_up = false;
      more = true;
      return;
    }
    for (const WatchEvent& e : batch) {
      if (e.kind == WatchEvent::Kind::caught_up) {
        slot.caught_up = true;
        continue;
      }
      // A value that does not decode is logged once (a watch delivers each revision once) and
      // the view stops trusting the key; healing.cpp decides what repairs it.
      std::string error;
      try {
        handle(e);
        continue;
      } catch (const core::RecordError& err) {
        error = err.what();
      } catch (const ConfigError& err) {
        error = fmt::format("record at '{}': {}", e.key, err.what());
      }
      metrics_.unreadable_record();
      log().warn("etlc: {}: unreadable record: {}", instance_, error);
      if (e.kind == WatchEvent::Kind::put) on_unreadable(e, error, now);
    }
    if (n == kEventsPerWatchPerStep) more = true;
  };
  drain(w_job_, [&](const WatchEvent& e) { on_job_event(e, now); });
  drain(w_members_, [&](const WatchEvent& e) { on_member_event(e, now); });
  drain(w_leases_, [&](const WatchEvent& e) { on_lease_event(e); });
  drain(w_assigns_, [&](const WatchEvent& e) { on_assign_event(e); });
  if (leader_) {
    drain(w_splits_, [&](const WatchEvent& e) { on_split_event(e, now); });
    drain(w_cordons_, [&](const WatchEvent& e) { on_cordon_event(e); });
  }
  return more;
}

void Member::on_job_event(const WatchEvent& e, TimePoint now) {
  const bool put = e.kind == WatchEvent::Kind::put;
  if (e.key == core::kPauseKey) {
    on_pause_event(e);  // job_controls.cpp
    return;
  }
  if (e.key == core::kLeaderKey) {
    // Our own writes update the view at once; the watch echoes older events afterwards.
    if (leader_view_ && leader_view_->second > e.revision) return;
    if (leader_damage_ && leader_damage_->rev > e.revision) return;
    if (!put) {
      leader_view_.reset();
      leader_damage_.reset();
      if (leader_) step_down("leader record deleted");
      return;
    }
    auto rec = core::decode_leader(e.key, e.value);
    leader_damage_.reset();
    note_term(rec.term);
    leader_view_ = std::make_pair(rec, e.revision);
    if (leader_ && (rec.owner != instance_ || rec.nonce != nonce_))
      step_down("leader record moved");
    return;
  }
  if (e.key == core::kPlanKey) {
    if (plan_view_ && plan_view_->second > e.revision) return;
    if (plan_damage_ && plan_damage_->rev > e.revision) return;
    if (!put) {
      // The protocol never deletes the plan: keep the last one read (the leader rewrites it from
      // there, healing.cpp) instead of forgetting the term, the tallies and the verdict.
      log().warn("etlc: {}: the plan record was deleted", instance_);
      plan_damage_ = Damage{e.revision, true, now, "deleted", std::nullopt};
      return;
    }
    auto rec = core::decode_plan(e.key, e.value);
    plan_damage_.reset();
    note_term(rec.term);
    if (rec.fingerprint != fingerprint_) {
      go_fatal(
          fmt::format("job fingerprint mismatch: the job in the store was planned with "
                      "fingerprint '{}', this member's planner has '{}'",
                      rec.fingerprint, fingerprint_));
      return;
    }
    plan_view_ = std::make_pair(std::move(rec), e.revision);
    if (leader_ && plan_view_->first.term > term_) step_down("a newer term took the plan");
  }
}

void Member::on_member_event(const WatchEvent& e, TimePoint now) {
  auto id = core::id_from_key(e.key, core::kMemberPrefix);
  if (!id) return;
  if (auto it = members_.find(*id); it != members_.end() && it->second.rev > e.revision) return;
  if (e.kind != WatchEvent::Kind::put) {
    if (members_.erase(*id) > 0) {
      assignment_dirty_ = true;
      if (leader_) note_departure(*id, now);
    }
    return;
  }
  auto rec = core::decode_member(e.key, e.value);
  auto it = members_.find(*id);
  const bool arrived = it == members_.end() || it->second.rec.nonce != rec.nonce;
  if (it == members_.end() || it->second.rec.max_in_flight != rec.max_in_flight ||
      it->second.rec.fingerprint != rec.fingerprint) {
    assignment_dirty_ = true;
  }
  MemberView& v = members_[*id];
  v.rec = std::move(rec);
  v.rev = e.revision;
  v.changed_at = now;  // observer-side clock: expiry counts from when *we* saw it move
  if (arrived && leader_) note_arrival(*id);
}

void Member::on_lease_event(const WatchEvent& e) {
  auto id = core::id_from_key(e.key, core::kLeasePrefix);
  if (!id) return;
  if (auto it = leases_.find(*id); it != leases_.end() && it->second.rev > e.revision) return;
  if (e.kind != WatchEvent::Kind::put) {
    leases_.erase(*id, e.revision);
    claim_retry_at_.erase(*id);  // a freed split may be claimable at once
    if (leader_) assignment_dirty_ = true;
    return;
  }
  auto rec = core::decode_lease(e.key, e.value);
  leases_.assign(*id, LeaseView{std::move(rec), e.revision});
}

void Member::on_assign_event(const WatchEvent& e) {
  auto id = core::id_from_key(e.key, core::kAssignPrefix);
  if (!id) return;
  if (auto it = assigns_.find(*id); it != assigns_.end() && it->second.rev > e.revision) return;
  if (e.kind != WatchEvent::Kind::put) {
    assigns_.erase(*id);
    if (leader_) assignment_dirty_ = true;
    return;
  }
  auto rec = core::decode_assignment(e.key, e.value);
  note_term(rec.term);
  AssignView& v = assigns_[*id];
  v.readable = true;
  // As leader, republish when the record is not what this term published: a deposed leader
  // wrote it, or one of our own writes whose outcome was unknown landed late, after we had
  // decided otherwise (left alone, that member would follow a stale list for the whole term).
  bool unexpected = false;
  if (leader_) {
    auto p = published_.find(*id);
    unexpected = rec.term != term_ || p == published_.end() || p->second != rec.splits;
  }
  v.rec = std::move(rec);
  v.rev = e.revision;
  if (unexpected) assignment_dirty_ = true;
}

void Member::count_split(const core::SplitRecord& r, bool add) {
  std::uint64_t* tally = r.status == core::SplitStatus::completed     ? &completed_count_
                         : r.status == core::SplitStatus::quarantined ? &quarantined_count_
                                                                      : nullptr;
  if (tally != nullptr) *tally = add ? *tally + 1 : *tally - 1;
}

void Member::put_split_view(const std::string& id, core::SplitRecord rec, Revision rev) {
  split_damage_.erase(id);
  if (core::parked_for_spec(rec)) {
    parked_specs_.insert(id);
  } else {
    parked_specs_.erase(id);
    unrepairable_.erase(id);
  }
  auto it = splits_.find(id);
  if (it == splits_.end()) {
    count_split(rec, true);
    splits_.emplace(id, SplitView{std::move(rec), rev});
    assignment_dirty_ = true;
    return;
  }
  // Progress-only commits (same owner, same status) change nothing the assignment reads.
  if (it->second.rec.status != rec.status || it->second.rec.owner != rec.owner ||
      it->second.rec.weight != rec.weight) {
    assignment_dirty_ = true;
  }
  count_split(it->second.rec, false);
  count_split(rec, true);
  it->second = SplitView{std::move(rec), rev};
}

void Member::on_split_event(const WatchEvent& e, TimePoint now) {
  auto id = core::id_from_key(e.key, core::kSplitPrefix);
  if (!id) return;
  auto it = splits_.find(*id);
  if (it != splits_.end() && it->second.rev > e.revision) return;
  if (e.kind != WatchEvent::Kind::put) {
    // Split records are never deleted: damage, rebuilt by heal_splits() from the last record.
    auto d = split_damage_.find(*id);
    if (d != split_damage_.end() && d->second.rev > e.revision) return;
    if (it == splits_.end() && d == split_damage_.end()) return;  // never known: nothing to keep
    Damage damage{e.revision, true, now, "deleted", std::nullopt};
    if (it != splits_.end()) {
      damage.last = it->second.rec;
      count_split(it->second.rec, false);
      parked_specs_.erase(*id);
      splits_.erase(it);
    } else {
      damage.last = d->second.last;
    }
    log().warn("etlc: {}: split record '{}' was deleted", instance_, *id);
    split_damage_[*id] = std::move(damage);
    assignment_dirty_ = true;
    return;
  }
  // Unreadable values throw here and reach on_unreadable(); the view keeps the last readable one.
  put_split_view(*id, core::decode_split(e.key, e.value), e.revision);
}

void Member::on_cordon_event(const WatchEvent& e) {
  auto id = core::id_from_key(e.key, core::kCordonPrefix);
  if (!id) return;
  if (e.kind == WatchEvent::Kind::put) {
    core::decode_cordon(e.key, e.value);  // validate; garbage is ignored like any record
    cordons_.insert(*id);
  } else {
    cordons_.erase(*id);
  }
  assignment_dirty_ = true;
}

void Member::on_unreadable(const WatchEvent& e, const std::string& error, TimePoint now) {
  auto damage = [&] { return Damage{e.revision, false, now, error, std::nullopt}; };
  if (e.key == core::kLeaderKey) {
    if (leader_view_ && leader_view_->second > e.revision) return;
    // Nobody can tell who leads: the leader rewrites its own record, others remove it after a
    // lease (liveness.cpp) so that an election can happen.
    leader_view_.reset();
    leader_damage_ = damage();
    return;
  }
  if (e.key == core::kPlanKey) {
    if (plan_view_ && plan_view_->second > e.revision) return;
    plan_damage_ = damage();  // plan_view_ keeps the last readable plan; the leader rewrites it
    return;
  }
  if (auto id = core::id_from_key(e.key, core::kMemberPrefix)) {
    auto it = members_.find(*id);
    if (it != members_.end() && it->second.rev > e.revision) return;
    // Unchanged from here on unless its owner replaces it: expired after a lease like any
    // session that stopped renewing. A key never seen readable vouches for nothing (no nonce, no
    // fingerprint, no lanes) while it waits.
    MemberView& v = members_[*id];
    if (it == members_.end()) {
      v.rec.instance = *id;
      v.rec.lease_ms = static_cast<std::uint64_t>(config_.lease_duration.count());
    }
    v.rev = e.revision;
    v.changed_at = now;
    return;
  }
  if (auto id = core::id_from_key(e.key, core::kLeasePrefix)) {
    // An unreadable lease names no session, so it protects nothing: a claimer removes it.
    leases_.erase(*id, e.revision);
    claim_retry_at_.erase(*id);
    if (leader_) assignment_dirty_ = true;
    return;
  }
  if (auto id = core::id_from_key(e.key, core::kAssignPrefix)) {
    AssignView& v = assigns_[*id];
    if (v.rev > e.revision) return;
    v.rec = core::AssignmentRecord{*id, 0, {}};
    v.rev = e.revision;
    v.readable = false;  // no instruction for its member; the leader republishes over it
    if (leader_) assignment_dirty_ = true;
    return;
  }
  if (auto id = core::id_from_key(e.key, core::kSplitPrefix)) {
    if (!leader_) return;
    split_damage_[*id] = damage();
    assignment_dirty_ = true;
    return;
  }
  if (auto id = core::id_from_key(e.key, core::kCordonPrefix)) {
    if (cordons_.erase(*id) > 0) assignment_dirty_ = true;  // unreadable: as if absent
  }
}

bool Member::session_live(const std::string& instance, const std::string& nonce) const {
  auto it = members_.find(instance);
  return it != members_.end() && it->second.rec.nonce == nonce;
}

}  // namespace etlc::runtime
