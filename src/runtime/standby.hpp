// Standby: the one member besides the leader that keeps fleet-wide views (member.*, lease.*,
// assign.*, and the leader's split.* and cordon.*) warm, so that when the leader dies it leads at
// once, without a cold read of every record (docs/decisions/0009-workers-watch-their-own-keys.md).
//
//   no job.standby, a peer leads    take the role: create job.standby naming this session
//   job.standby names this session  keep the views warm (fleet scope, LeaderViews)
//   job.standby names another       be a worker; when the leader record goes, wait kGrace
//                                   before running for election, so the standby wins it
//   elected                         hand the warm views to the Leadership, give the record up
//
// The record is live exactly while its owner's session is: the leader removes it when that
// session is gone, when it names the leader itself, or when it is unreadable (Liveness). A
// standby that dies costs nothing but the grace of the next election. Not thread-safe: the
// member's control loop owns it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/fleet_views.hpp"
#include "runtime/leader_views.hpp"
#include "runtime/member_context.hpp"

namespace etlc::runtime {

class Standby {
 public:
  Standby(const MemberContext& ctx, FleetViews& views) : ctx_(ctx), views_(views) {}

  // One step of a member that does not lead. `may_take`: it may take a vacant role (its views are
  // targeted and it is not draining a revocation); a standby keeps the role while it drains, or
  // every rebalance would move the role and cost a cold load of every record. Store errors
  // propagate.
  void step(TimePoint now, const std::string& nonce, bool may_take);
  bool active() const { return warm_ != nullptr; }
  // Folds the warm leader views; true if events remain.
  bool drain(TimePoint now);
  // Whether a worker should not run for election yet: a standby other than this session is
  // named, and the leader record has been gone for less than the grace.
  bool defer_election(TimePoint now, const std::string& nonce);
  // When a deferred election is due (nullopt: none is deferred).
  std::optional<TimePoint> election_due() const;
  // On election: the warm views (nullopt if not standby); the record is given up.
  std::optional<LeaderViews> hand_over(const std::string& nonce);
  // Gives the record up (shutdown, losing the session). Store errors are the caller's.
  void resign(const std::string& nonce);
  // The grace a worker leaves the standby to win an election.
  Duration grace() const { return ctx_.config.lease_duration / 4; }

 private:
  bool named(const std::string& nonce) const;
  void activate();
  void deactivate();

  const MemberContext& ctx_;
  FleetViews& views_;
  std::unique_ptr<LeaderViews> warm_;
  std::optional<TimePoint> leaderless_since_;
};

}  // namespace etlc::runtime
