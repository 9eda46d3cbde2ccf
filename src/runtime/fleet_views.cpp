// FleetViews: the watches every member keeps and the views they feed (fleet_views.hpp).
#include "runtime/fleet_views.hpp"

#include <fmt/format.h>

#include "core/keys.hpp"
#include "log.hpp"

namespace etlc::runtime {

FleetViews::FleetViews(const MemberContext& ctx)
    : ctx_(ctx),
      job_(std::vector<std::string>{std::string(core::kLeaderKey), std::string(core::kPlanKey),
                                    std::string(core::kPauseKey), std::string(core::kStandbyKey)}),
      assign_me_(std::vector<std::string>{core::assign_key(ctx.instance)}),
      members_watch_(core::kMemberPrefix),
      leases_watch_(core::kLeasePrefix),
      assigns_watch_(core::kAssignPrefix) {
  leases_.set_owner(ctx_.instance);
}

void FleetViews::set_scope(ViewScope scope) {
  if (scope == scope_) return;
  scope_ = scope;
  for (WatchSlot* slot : {&assign_me_, &members_watch_, &leases_watch_, &assigns_watch_}) {
    slot->reset();
  }
  leader_session_.reset();
  lease_slots_.clear();
  session_slots_.clear();
  ++follows_dropped_;
  members_.clear();
  assigns_.clear();
  leases_.retain_owned();  // this instance's leases stay known (the orphan sweep needs them)
}

void FleetViews::ensure_watches() {
  if (!job_.open()) {
    leader_view_.reset();
    plan_view_.reset();
    paused_ = false;  // the snapshot re-delivers job.pause if it still exists
    standby_view_.reset();
    standby_damage_.reset();
    job_.start(ctx_.store, ctx_.wake);
  }
  if (scope_ == ViewScope::fleet) {
    ensure_fleet_watches();
  } else {
    ensure_worker_watches();
  }
}

void FleetViews::ensure_fleet_watches() {
  if (!members_watch_.open()) {
    members_.clear();
    members_watch_.start(ctx_.store, ctx_.wake);
  }
  if (!leases_watch_.open()) {
    leases_.clear();
    leases_watch_.start(ctx_.store, ctx_.wake);
  }
  if (!assigns_watch_.open()) {
    assigns_.clear();
    assigns_watch_.start(ctx_.store, ctx_.wake);
  }
}

void FleetViews::ensure_worker_watches() {
  if (!assign_me_.open()) {
    assigns_.erase(ctx_.instance);
    assign_me_.start(ctx_.store, ctx_.wake);
  }
  follow_leader_session();
  for (auto& [id, slot] : lease_slots_) {
    if (slot.open()) continue;
    drop_unowned_lease(id);  // the fresh snapshot says again whether it exists
    slot.start(ctx_.store, ctx_.wake);
  }
  for (auto& [id, slot] : session_slots_) {
    if (slot.open()) continue;
    members_.erase(id);  // the fresh snapshot says again whether it lives
    slot.start(ctx_.store, ctx_.wake);
  }
}

// Worker scope: follows member.{leader} while a peer leads (the key changes with the leader).
void FleetViews::follow_leader_session() {
  std::string key;
  if (leader_view_ && leader_view_->first.owner != ctx_.instance) {
    try {
      key = core::member_key(leader_view_->first.owner);
    } catch (const ConfigError&) {
      key.clear();  // not an id: follow nobody (the record heals or expires)
    }
  }
  if (leader_session_ && (key.empty() || leader_session_->keys().front() != key)) {
    auto id = core::id_from_key(leader_session_->keys().front(), core::kMemberPrefix);
    leader_session_.reset();
    if (id && !follows_session(*id)) members_.erase(*id);
  }
  if (key.empty()) return;
  if (!leader_session_) leader_session_.emplace(std::vector<std::string>{key});
  if (!leader_session_->open()) {
    members_.erase(leader_view_->first.owner);
    leader_session_->start(ctx_.store, ctx_.wake);
  }
}

void FleetViews::follow_leases(const std::set<std::string>& ids) {
  if (scope_ != ViewScope::worker) return;
  for (auto it = lease_slots_.begin(); it != lease_slots_.end();) {
    if (ids.count(it->first)) {
      ++it;
      continue;
    }
    drop_unowned_lease(it->first);
    it = lease_slots_.erase(it);
  }
  for (const std::string& id : ids) {
    if (lease_slots_.size() >= kMaxFollowedLeases) break;
    auto [it, fresh] = lease_slots_.try_emplace(id, std::vector<std::string>{core::lease_key(id)});
    if (!fresh) continue;
    drop_unowned_lease(id);  // an entry from a point read while unfollowed may be stale
    it->second.start(ctx_.store, ctx_.wake);
  }
}

void FleetViews::own_lease_deleted(const std::string& id, Revision rev) {
  if (scope_ == ViewScope::worker && !lease_slots_.count(id)) {
    leases_.erase_if_not_newer(id, rev);
  } else {
    leases_.erase(id, rev);
  }
}

void FleetViews::follow_sessions(const std::set<std::string>& instances) {
  if (scope_ != ViewScope::worker) return;
  for (auto it = session_slots_.begin(); it != session_slots_.end();) {
    if (instances.count(it->first)) {
      ++it;
      continue;
    }
    const std::string id = it->first;
    it = session_slots_.erase(it);
    if (!follows_session(id)) members_.erase(id);
  }
  for (const std::string& id : instances) {
    if (session_slots_.size() >= kMaxFollowedSessions) break;
    if (id == ctx_.instance || session_slots_.count(id)) continue;
    std::string key;
    try {
      key = core::member_key(id);
    } catch (const ConfigError&) {
      continue;  // a record naming a non-id: nobody to follow (the claim treats it as dead)
    }
    auto& slot = session_slots_.try_emplace(id, std::vector<std::string>{key}).first->second;
    slot.start(ctx_.store, ctx_.wake);
  }
}

namespace {
bool is_session_key(const std::string& key, const std::string& instance) {
  return key.size() == core::kMemberPrefix.size() + instance.size() &&
         key.starts_with(core::kMemberPrefix) && key.ends_with(instance);
}
}  // namespace

// Whether some worker-scope slot watches member.{instance} (the leader's, or a followed peer's).
bool FleetViews::follows_session(const std::string& instance) const {
  if (session_slots_.count(instance)) return true;
  return leader_session_ && is_session_key(leader_session_->keys().front(), instance);
}

bool FleetViews::session_known(const std::string& instance) const {
  if (scope_ == ViewScope::fleet) return members_watch_.caught_up();
  if (auto it = session_slots_.find(instance);
      it != session_slots_.end() && it->second.caught_up()) {
    return true;
  }
  return leader_session_ && leader_session_->caught_up() &&
         is_session_key(leader_session_->keys().front(), instance);
}

bool FleetViews::lease_known(const std::string& id) const {
  if (scope_ == ViewScope::fleet) return leases_watch_.caught_up();
  auto it = lease_slots_.find(id);
  return it != lease_slots_.end() && it->second.caught_up();
}

void FleetViews::drop_unowned_lease(const std::string& id) {
  auto it = leases_.find(id);
  if (it != leases_.end() && it->second.rec.owner == ctx_.instance) return;
  leases_.forget(id);
}

void FleetViews::close_watches() {
  for (WatchSlot* slot : {&job_, &assign_me_, &members_watch_, &leases_watch_, &assigns_watch_}) {
    slot->reset();
  }
  leader_session_.reset();
  lease_slots_.clear();
  session_slots_.clear();
  ++follows_dropped_;
}

bool FleetViews::caught_up() const {
  if (!job_.caught_up()) return false;
  if (scope_ == ViewScope::worker) return assign_me_.caught_up();
  return members_watch_.caught_up() && leases_watch_.caught_up() && assigns_watch_.caught_up();
}

ViewChanges FleetViews::drain(TimePoint now) {
  ViewChanges out;
  auto unreadable = [&](const WatchEvent& e, const std::string& error) {
    on_unreadable(e, error, now, out);
  };
  auto member = [&](const WatchEvent& e) { on_member_event(e, now, out); };
  auto assign = [&](const WatchEvent& e) { on_assign_event(e, out); };
  out.more |= job_.drain(
      ctx_, [&](const WatchEvent& e) { on_job_event(e, now, out); }, unreadable);
  if (scope_ == ViewScope::fleet) {
    out.more |= members_watch_.drain(ctx_, member, unreadable);
    out.more |= leases_watch_.drain(
        ctx_, [&](const WatchEvent& e) { on_lease_event(e, out); }, unreadable);
    out.more |= assigns_watch_.drain(ctx_, assign, unreadable);
    return out;
  }
  out.more |= assign_me_.drain(ctx_, assign, unreadable);
  if (leader_session_) out.more |= leader_session_->drain(ctx_, member, unreadable);
  out.more |= drain_slots(
      lease_slots_, now, [&](const WatchEvent& e) { on_lease_event(e, out); }, out,
      out.leases_known);
  out.more |= drain_slots(session_slots_, now, member, out, out.sessions_known);
  follow_leader_session();  // a new leader's session is followed at once
  return out;
}

// Drains key-watch slots by key; each slot whose snapshot just arrived is named in `known` (a
// snapshot that says "absent" delivers no event, and what waited for it must still wake).
bool FleetViews::drain_slots(std::map<std::string, WatchSlot>& slots, TimePoint now,
                             const std::function<void(const WatchEvent&)>& handle, ViewChanges& out,
                             std::vector<std::string>& known) {
  bool more = false;
  for (auto& [id, slot] : slots) {
    const bool was_known = slot.caught_up();
    more |= slot.drain(ctx_, handle, [&](const WatchEvent& e, const std::string& error) {
      on_unreadable(e, error, now, out);
    });
    if (!was_known && slot.caught_up()) known.push_back(id);
  }
  return more;
}

std::uint64_t FleetViews::highest_term_seen() const {
  std::uint64_t t = max_term_seen_;
  if (plan_view_) t = std::max(t, plan_view_->first.term);
  if (leader_view_) t = std::max(t, leader_view_->first.term);
  return t;
}

bool FleetViews::session_live(const std::string& instance, const std::string& nonce) const {
  auto it = members_.find(instance);
  return it != members_.end() && it->second.rec.nonce == nonce;
}

void FleetViews::set_leader_view(core::LeaderRecord rec, Revision rev) {
  note_term(rec.term);
  leader_view_ = std::make_pair(std::move(rec), rev);
}

void FleetViews::set_plan_view(core::PlanRecord rec, Revision rev) {
  note_term(rec.term);
  plan_view_ = std::make_pair(std::move(rec), rev);
}

void FleetViews::set_assign_view(const std::string& id, core::AssignmentRecord rec, Revision rev) {
  AssignView& v = assigns_[id];
  v.rec = std::move(rec);
  v.rev = rev;
  v.readable = true;
}

// --- job.*
// ----------------------------------------------------------------------------------------

void FleetViews::on_job_event(const WatchEvent& e, TimePoint now, ViewChanges& out) {
  if (e.key == core::kLeaderKey) {
    on_leader_event(e, out);
  } else if (e.key == core::kPlanKey) {
    on_plan_event(e, now, out);
  } else if (e.key == core::kPauseKey) {
    on_pause_event(e, out);
  } else if (e.key == core::kStandbyKey) {
    on_standby_event(e, out);
  }
}

void FleetViews::on_standby_event(const WatchEvent& e, ViewChanges& out) {
  if (standby_view_ && standby_view_->second > e.revision) return;
  if (standby_damage_ && *standby_damage_ > e.revision) return;
  out.standby_changed = true;
  standby_damage_.reset();
  if (e.kind != WatchEvent::Kind::put) {
    standby_view_.reset();
    return;
  }
  standby_view_.reset();  // until it decodes (RecordError: on_unreadable records the damage)
  standby_view_ = std::make_pair(core::decode_standby(e.key, e.value), e.revision);
}

void FleetViews::on_leader_event(const WatchEvent& e, ViewChanges& out) {
  // Our own writes update the view at once; the watch echoes older events afterwards.
  if (leader_view_ && leader_view_->second > e.revision) return;
  if (leader_damage_ && leader_damage_->rev > e.revision) return;
  if (e.kind != WatchEvent::Kind::put) {
    leader_view_.reset();
    leader_damage_.reset();
    out.leader_deleted = true;
    return;
  }
  core::LeaderRecord rec = core::decode_leader(e.key, e.value);
  leader_damage_.reset();
  set_leader_view(std::move(rec), e.revision);
  out.leader_changed = true;
}

void FleetViews::on_plan_event(const WatchEvent& e, TimePoint now, ViewChanges& out) {
  if (plan_view_ && plan_view_->second > e.revision) return;
  if (plan_damage_ && plan_damage_->rev > e.revision) return;
  out.plan_changed = true;
  if (e.kind != WatchEvent::Kind::put) {
    // The protocol never deletes the plan: keep the last one read (the leader rewrites it from
    // there, healing.cpp) instead of forgetting the term, the tallies and the verdict.
    log().warn("etlc: {}: the plan record was deleted", ctx_.instance);
    plan_damage_ = Damage{e.revision, true, now, "deleted", std::nullopt};
    return;
  }
  core::PlanRecord rec = core::decode_plan(e.key, e.value);
  plan_damage_.reset();
  if (rec.fingerprint != ctx_.fingerprint) out.foreign_fingerprint = rec.fingerprint;
  set_plan_view(std::move(rec), e.revision);
}

void FleetViews::on_pause_event(const WatchEvent& e, ViewChanges& out) {
  bool now_paused = false;
  if (e.kind == WatchEvent::Kind::put) {
    core::decode_pause(e.key, e.value);  // RecordError: unreadable, counts as absent
    now_paused = true;
  }
  if (now_paused == paused_) return;
  paused_ = now_paused;
  out.pause_changed = true;
}

// --- member.*, lease.*, assign.* ---------------------------------------------------------------

void FleetViews::on_member_event(const WatchEvent& e, TimePoint now, ViewChanges& out) {
  auto id = core::id_from_key(e.key, core::kMemberPrefix);
  if (!id) return;
  auto it = members_.find(*id);
  if (it != members_.end() && it->second.rev > e.revision) return;
  if (e.kind != WatchEvent::Kind::put) {
    if (it != members_.end()) {
      members_.erase(it);
      out.departed.push_back(*id);
      out.membership_changed = true;
    }
    return;
  }
  core::MemberRecord rec = core::decode_member(e.key, e.value);
  const bool arrived = it == members_.end() || it->second.rec.nonce != rec.nonce;
  if (it == members_.end() || it->second.rec.max_in_flight != rec.max_in_flight ||
      it->second.rec.fingerprint != rec.fingerprint) {
    out.membership_changed = true;
  }
  MemberView& v = members_[*id];
  v.rec = std::move(rec);
  v.rev = e.revision;
  v.changed_at = now;  // observer-side clock: expiry counts from when *we* saw it move
  if (arrived) out.arrived.push_back(*id);
}

void FleetViews::on_lease_event(const WatchEvent& e, ViewChanges& out) {
  auto id = core::id_from_key(e.key, core::kLeasePrefix);
  if (!id) return;
  if (auto it = leases_.find(*id); it != leases_.end() && it->second.rev > e.revision) return;
  if (e.kind != WatchEvent::Kind::put) {
    leases_.erase(*id, e.revision);
    out.leases_freed.push_back(*id);
    return;
  }
  leases_.assign(*id, LeaseTable::Entry{core::decode_lease(e.key, e.value), e.revision});
}

void FleetViews::on_assign_event(const WatchEvent& e, ViewChanges& out) {
  auto id = core::id_from_key(e.key, core::kAssignPrefix);
  if (!id) return;
  if (auto it = assigns_.find(*id); it != assigns_.end() && it->second.rev > e.revision) return;
  out.assigns_changed.push_back(*id);
  if (e.kind != WatchEvent::Kind::put) {
    assigns_.erase(*id);
    return;
  }
  core::AssignmentRecord rec = core::decode_assignment(e.key, e.value);
  note_term(rec.term);
  set_assign_view(*id, std::move(rec), e.revision);
}

// A put whose value cannot be decoded: the view stops trusting the key (healing.cpp repairs it).
void FleetViews::on_unreadable(const WatchEvent& e, const std::string& error, TimePoint now,
                               ViewChanges& out) {
  Damage damage{e.revision, false, now, error, std::nullopt};
  if (e.key == core::kLeaderKey) {
    if (leader_view_ && leader_view_->second > e.revision) return;
    // Nobody can tell who leads: its leader rewrites its own record, others remove it after a
    // lease (liveness.cpp) so that an election can happen.
    leader_view_.reset();
    leader_damage_ = std::move(damage);
    out.leader_changed = true;
  } else if (e.key == core::kPlanKey) {
    if (plan_view_ && plan_view_->second > e.revision) return;
    plan_damage_ = std::move(damage);  // plan_view_ keeps the last readable plan
    out.plan_changed = true;
  } else if (e.key == core::kPauseKey) {
    if (paused_) out.pause_changed = true;
    paused_ = false;  // unreadable: as if absent
  } else if (e.key == core::kStandbyKey) {
    // Names nobody: the leader removes it (standby.cpp), and nobody defers to it meanwhile.
    standby_view_.reset();
    standby_damage_ = e.revision;
    out.standby_changed = true;
  } else if (auto mid = core::id_from_key(e.key, core::kMemberPrefix)) {
    auto it = members_.find(*mid);
    if (it != members_.end() && it->second.rev > e.revision) return;
    // Unchanged from here on unless its owner replaces it: expired after a lease like any
    // session that stopped renewing. A key never seen readable vouches for nothing (no nonce, no
    // fingerprint, no lanes) while it waits.
    MemberView& v = members_[*mid];
    if (it == members_.end()) {
      v.rec.instance = *mid;
      v.rec.lease_ms = static_cast<std::uint64_t>(ctx_.config.lease_duration.count());
    }
    v.rev = e.revision;
    v.changed_at = now;
  } else if (auto lid = core::id_from_key(e.key, core::kLeasePrefix)) {
    // An unreadable lease names no session, so it protects nothing: a claimer removes it.
    leases_.erase(*lid, e.revision);
    out.leases_freed.push_back(*lid);
  } else if (auto aid = core::id_from_key(e.key, core::kAssignPrefix)) {
    AssignView& v = assigns_[*aid];
    if (v.rev > e.revision) return;
    v.rec = core::AssignmentRecord{*aid, 0, {}};
    v.rev = e.revision;
    v.readable = false;  // no instruction for its member; the leader republishes over it
    out.assigns_changed.push_back(*aid);
  }
}

}  // namespace etlc::runtime
