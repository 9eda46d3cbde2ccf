// Liveness: observer-side expiry, and the point reads that decide whether a peer's session lives.
//
// The store has no TTL we rely on: an observer that has seen a session's revision unchanged for
// that member's lease (on its own monotonic clock) deletes it with a guarded delete at the
// revision it saw; a renewal that landed in between makes the delete lose, so a false suspicion
// can never remove a live session. The leader expires sessions at one lease; everyone else only
// the leader's own session (or any when there is no leader), and otherwise as a backup after 1.5
// leases, so a fleet does not stampede the store with guarded deletes of which all but one lose.
//
// Leases and the leader record have no heartbeat of their own: each is live exactly while its
// owner's session (instance + nonce) is. Watches of different prefixes are not ordered with each
// other, so before deleting either as dead a point read confirms the session is gone (decision
// 0006). Not thread-safe: the control loop owns it.
#pragma once

#include <string>
#include <vector>

#include "runtime/fleet_views.hpp"
#include "runtime/member_context.hpp"

namespace etlc::runtime {

class Liveness {
 public:
  Liveness(const MemberContext& ctx, FleetViews& views) : ctx_(ctx), views_(views) {}

  // Expires peers' sessions unchanged for their lease (`leading`: this member leads) and the
  // leader record of a departed leader (or of our own earlier session, or unreadable for a
  // lease). Returns the sessions this member deleted.
  std::vector<std::string> expire_peers(TimePoint now, bool leading, const std::string& nonce);
  // When expire_peers next has something to do (never in the past).
  TimePoint next_expiry(TimePoint now, bool leading) const;

  // A point read: `instance`'s session record exists and has `nonce`.
  bool session_confirmed_live(const std::string& instance, const std::string& nonce);
  // A lease whose owner's session is gone is dead: delete it (guarded). True if it is now gone.
  bool erase_dead_lease(const std::string& split_id);
  // Guarded delete of lease.{id} at `rev`; a lost race re-reads the lease and refreshes the view
  // (a wrong revision in the view must not keep a lease alive). True if the lease is now gone.
  bool erase_lease_at(const std::string& split_id, Revision rev);
  // Point-reads lease.{id} and puts what it shows in the lease view (absent: the entry is
  // dropped). Returns the revision read, 0 if absent; throws RecordError if it is unreadable
  // (the view is left as it was).
  Revision reload_lease(const std::string& split_id);

 private:
  Duration expiry_wait(const std::string& id, const MemberView& v, bool leading) const;
  void expire_leader_record(TimePoint now, bool leading, const std::string& nonce);
  void expire_standby_record();

  const MemberContext& ctx_;
  FleetViews& views_;
};

}  // namespace etlc::runtime
