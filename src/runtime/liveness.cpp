// Liveness: observer-side expiry of sessions, leases and the leader record (liveness.hpp).
#include "runtime/liveness.hpp"

#include "core/keys.hpp"
#include "core/repair_rules.hpp"
#include "log.hpp"

namespace etlc::runtime {

// How long `id`'s session must look unchanged before this member expires it: one lease for the
// leader (and for the leader's own session, or when there is no leader), 1.5 leases otherwise.
// The lease is the one the peer advertises within bounds of our own (a forged day-long lease must
// not hold its splits for a day: core/repair_rules.hpp).
Duration Liveness::expiry_wait(const std::string& id, const MemberView& v, bool leading) const {
  const Duration lease = core::bound_peer(v.rec, ctx_.config.lease_duration).lease;
  const auto& leader = views_.leader_view();
  const bool primary =
      leading || !leader || leader->first.owner.empty() || id == leader->first.owner;
  return primary ? lease : lease + lease / 2;
}

TimePoint Liveness::next_expiry(TimePoint now, bool leading) const {
  TimePoint next = TimePoint::max();
  for (const auto& [id, v] : views_.members()) {
    if (id == ctx_.instance) continue;
    next = std::min(next, v.changed_at + expiry_wait(id, v, leading));
  }
  return std::max(next, now);
}

std::vector<std::string> Liveness::expire_peers(TimePoint now, bool leading,
                                                const std::string& nonce) {
  std::vector<std::string> expired;
  std::vector<std::pair<std::string, Revision>> doomed;
  for (const auto& [id, v] : views_.members()) {
    if (id == ctx_.instance) continue;
    if (now - v.changed_at >= expiry_wait(id, v, leading)) doomed.emplace_back(id, v.rev);
  }
  for (const auto& [id, rev] : doomed) {
    if (ctx_.store.erase(core::member_key(id), rev).ok) {
      log().info("etlc: {}: expired the session of '{}' (unchanged for a lease)", ctx_.instance,
                 id);
      views_.erase_member(id);
      expired.push_back(id);
    }
  }
  expire_leader_record(now, leading, nonce);
  if (leading) expire_standby_record();
  return expired;
}

// The leader's: a standby record is live only while its owner's session is, and never names the
// leader (a standby elected gives it up; if that delete failed, it is removed here). An
// unreadable one names nobody.
void Liveness::expire_standby_record() {
  std::optional<Revision> doomed = views_.standby_damage();
  if (const auto& s = views_.standby_view(); s && !doomed) {
    const core::StandbyRecord& rec = s->first;
    const bool leader_itself = rec.owner == ctx_.instance;
    if (leader_itself || (!views_.session_live(rec.owner, rec.nonce) &&
                          !session_confirmed_live(rec.owner, rec.nonce))) {
      doomed = s->second;
    }
  }
  if (!doomed) return;
  if (ctx_.store.erase(core::kStandbyKey, *doomed).ok) {
    log().info("etlc: {}: removed a standby record that named no live peer", ctx_.instance);
    views_.set_standby_view(std::nullopt);
  }
}

void Liveness::expire_leader_record(TimePoint now, bool leading, const std::string& nonce) {
  // The leader record is live only while its owner's session is. One naming this instance under
  // an earlier nonce is this process's own old session's (starved or expired): nobody else would
  // remove it if this member is alone.
  if (const auto& l = views_.leader_view()) {
    const core::LeaderRecord rec = l->first;
    const bool ours = rec.owner == ctx_.instance && rec.nonce == nonce;
    if (!ours && !views_.session_live(rec.owner, rec.nonce) &&
        !session_confirmed_live(rec.owner, rec.nonce)) {
      if (ctx_.store.erase(core::kLeaderKey, l->second).ok) {
        log().info("etlc: {}: removed the leader record of departed '{}' (nonce {})", ctx_.instance,
                   rec.owner, rec.nonce);
        views_.clear_leader_view();
      }
    }
  }
  // An unreadable leader record names nobody: its leader (if any) rewrites it at once, so one
  // that stayed unchanged for a lease has no live owner. Remove it so an election can happen.
  const auto& damage = views_.leader_damage();
  if (leading || !damage || now - damage->since < ctx_.config.lease_duration) return;
  const WriteResult r = ctx_.store.erase(core::kLeaderKey, damage->rev);
  log().warn("etlc: {}: {} the unreadable leader record ({})", ctx_.instance,
             r.ok ? "removed" : "could not remove", damage->error);
  if (r.ok) {
    views_.clear_leader_damage();
  } else {
    views_.set_leader_damage_since(now);  // it changed: watch it for another lease
  }
}

bool Liveness::session_confirmed_live(const std::string& instance, const std::string& nonce) {
  auto cur = ctx_.store.get(core::member_key(instance));
  if (!cur) return false;
  try {
    return core::decode_member(core::member_key(instance), cur->value).nonce == nonce;
  } catch (const core::RecordError& e) {
    log().warn("etlc: {}", e.what());
    return false;  // an unreadable session cannot vouch for anything
  }
}

bool Liveness::erase_dead_lease(const std::string& split_id) {
  auto it = views_.leases().find(split_id);
  if (it == views_.leases().end()) return true;
  // Deleting a live lease would only cost a spurious takeover (fencing still holds), but that
  // takeover would burn a delivery attempt, so confirm with a point read.
  if (session_confirmed_live(it->second.rec.owner, it->second.rec.nonce)) return false;
  return erase_lease_at(split_id, it->second.rev);
}

bool Liveness::erase_lease_at(const std::string& split_id, Revision rev) {
  LeaseTable& leases = views_.leases();
  const WriteResult r = ctx_.store.erase(core::lease_key(split_id), rev);
  if (r.ok) {
    leases.erase(split_id, r.revision);
    return true;
  }
  // Moved: a new lease was written, it was already deleted, or `rev` was wrong; re-read to know.
  try {
    return reload_lease(split_id) == 0;
  } catch (const core::RecordError& e) {
    log().warn("etlc: {}", e.what());
  }
  return false;
}

Revision Liveness::reload_lease(const std::string& split_id) {
  const std::string key = core::lease_key(split_id);
  auto cur = ctx_.store.get(key);
  if (!cur) {
    views_.leases().erase(split_id);
    return 0;
  }
  views_.leases().assign(split_id,
                         LeaseTable::Entry{core::decode_lease(key, cur->value), cur->revision});
  return cur->revision;
}

}  // namespace etlc::runtime
