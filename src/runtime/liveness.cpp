// Observer-side expiry. The store has no TTL we rely on: an observer that has seen a session's
// revision unchanged for that member's lease_duration (on its own monotonic clock) deletes it
// with a guarded delete at the revision it saw. A renewal that landed in between makes the
// delete lose, so a false suspicion can never remove a live session.
//
// The leader expires sessions at one lease. Everyone else does so only for the leader's own
// session (or when there is no leader), and otherwise only as a backup after 1.5 leases, so a
// fleet does not stampede the store with guarded deletes of which all but one lose.
//
// Leases and the leader record have no heartbeat of their own: each is live exactly while its
// owner's session (instance + nonce) is. A claimer deletes a dead lease itself, by guarded delete.
#include "log.hpp"

#include "core/keys.hpp"
#include "core/repair_rules.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

// How long `id`'s session must look unchanged before this member expires it: one lease for the
// leader (and for the leader's own session, or when there is no leader), 1.5 leases otherwise.
Duration Member::expiry_wait(const std::string& id, const MemberView& v) const {
  // The lease the peer advertises, within bounds of our own (a forged day-long lease must not
  // hold its splits for a day: core/repair_rules.hpp).
  const Duration lease = core::bound_peer(v.rec, config_.lease_duration).lease;
  const bool primary = leader_ || !leader_view_ || leader_view_->first.owner.empty() ||
                       id == leader_view_->first.owner;
  return primary ? lease : lease + lease / 2;
}

void Member::expire_peers(TimePoint now) {
  if (!w_members_.caught_up) return;
  std::vector<std::pair<std::string, Revision>> doomed;
  for (const auto& [id, v] : members_) {
    if (id == instance_) continue;
    if (now - v.changed_at >= expiry_wait(id, v)) doomed.emplace_back(id, v.rev);
  }
  for (const auto& [id, rev] : doomed) {
    WriteResult r = store_->erase(core::member_key(id), rev);
    if (r.ok) {
      log().info("etlc: {}: expired the session of '{}' (unchanged for a lease)", instance_, id);
      members_.erase(id);
      assignment_dirty_ = true;
      if (leader_) note_departure(id, now);
    }
  }
  // The leader record is live only while its owner's session is. One naming this instance under
  // an earlier nonce is this process's own old session's (starved or expired): nobody else would
  // remove it if this member is alone.
  const bool ours =
      leader_view_ && leader_view_->first.owner == instance_ && leader_view_->first.nonce == nonce_;
  if (leader_view_ && w_job_.caught_up && !ours &&
      !session_live(leader_view_->first.owner, leader_view_->first.nonce) &&
      !session_confirmed_live(leader_view_->first.owner, leader_view_->first.nonce)) {
    WriteResult r = store_->erase(core::kLeaderKey, leader_view_->second);
    if (r.ok) {
      log().info("etlc: {}: removed the leader record of departed '{}' (nonce {})", instance_,
                 leader_view_->first.owner, leader_view_->first.nonce);
      leader_view_.reset();
    }
  }
  // An unreadable leader record names nobody: its leader (if any) rewrites it at once, so one
  // that stayed unchanged for a lease has no live owner. Remove it so an election can happen.
  if (!leader_ && leader_damage_ && now - leader_damage_->since >= config_.lease_duration) {
    WriteResult r = store_->erase(core::kLeaderKey, leader_damage_->rev);
    log().warn("etlc: {}: {} the unreadable leader record ({})", instance_,
               r.ok ? "removed" : "could not remove", leader_damage_->error);
    if (r.ok)
      leader_damage_.reset();
    else
      leader_damage_->since = now;  // it changed: watch it for another lease
  }
}

// A point read of the owner's session: the authority when the watch views may disagree.
bool Member::session_confirmed_live(const std::string& instance, const std::string& nonce) {
  auto cur = store_->get(core::member_key(instance));
  if (!cur) return false;
  try {
    return core::decode_member(core::member_key(instance), cur->value).nonce == nonce;
  } catch (const core::RecordError& e) {
    log().warn("etlc: {}", e.what());
    return false;  // an unreadable session cannot vouch for anything
  }
}

// A lease whose owner's session is gone is dead; delete it (guarded) so the split can be claimed.
// Returns true if the lease is now gone (deleted by us or found already gone).
bool Member::erase_dead_lease(const std::string& split_id) {
  auto it = leases_.find(split_id);
  if (it == leases_.end()) return true;
  // Watches of different prefixes are not ordered with each other: a lease can show up before its
  // owner's session does. Deleting a live lease would only cost a spurious takeover (fencing still
  // holds), but that takeover would burn a delivery attempt, so confirm with a point read.
  if (session_confirmed_live(it->second.rec.owner, it->second.rec.nonce)) return false;
  return erase_lease_at(split_id, it->second.rev);
}

bool Member::erase_lease_at(const std::string& split_id, Revision rev) {
  WriteResult r = store_->erase(core::lease_key(split_id), rev);
  if (r.ok) {
    leases_.erase(split_id, r.revision);
    return true;
  }
  // Moved: a new lease was written, it was already deleted, or `rev` was wrong; re-read to know.
  auto cur = store_->get(core::lease_key(split_id));
  if (!cur) {
    leases_.erase(split_id);
    return true;
  }
  try {
    leases_.assign(split_id, LeaseView{core::decode_lease(core::lease_key(split_id), cur->value),
                                       cur->revision});
  } catch (const core::RecordError& e) {
    log().warn("etlc: {}", e.what());
  }
  return false;
}

}  // namespace etlc::runtime
