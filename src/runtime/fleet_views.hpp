// FleetViews: what a member watches and the local views the events fold into. drain() only folds
// and reports what changed (ViewChanges); what to do about it (step down, stop, note a departure)
// is the sequencer's (member.cpp).
//
// What is watched depends on the scope (docs/decisions/0009-workers-watch-their-own-keys.md):
//   both     job.leader, job.plan, job.pause, job.standby (one key watch)
//   worker   assign.{me}; member.{leader} (the leader's session, to expire it when it dies);
//            lease.{id} of each split follow_leases() names (those it waits to claim, and those
//            whose lease it may hold without knowing it); member.{peer} of each peer
//            follow_sessions() names (the owners a claim must judge alive or dead): the views
//            hold only those
//   fleet    member.*, lease.*, assign.* (the leader: everything the assignment and expiry read;
//            and the standby, which keeps them warm for a failover: runtime/standby.hpp)
// A worker's watch traffic therefore does not grow with the fleet. Whether a peer lives is decided
// as in the fleet scope, by the session view and a point read agreeing (sim bugs 7 and 11: a
// stale read alone must not decide it); a worker only follows the few sessions it must judge.
//
// Views keep each key's latest state only, never go back in time (an event older than the view
// is ignored), and never trust a value they cannot decode: it is recorded as damage with its
// revision, for the repairs of healing.cpp, and otherwise ignored. Nothing a peer or an operator
// writes can crash a member. Not thread-safe: the control loop owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/records.hpp"
#include "runtime/lease_table.hpp"
#include "runtime/member_context.hpp"
#include "runtime/watch_slot.hpp"

namespace etlc::runtime {

// A record the protocol never deletes or writes unreadable, found unreadable or deleted: damage
// from outside (healing.cpp). `rev` is the damaging write's revision (the delete's for a delete),
// `since` when this member saw it, `last` the last readable record (split records).
struct Damage {
  Revision rev = 0;
  bool deleted = false;
  TimePoint since{};
  std::string error;
  std::optional<core::SplitRecord> last;
};

struct MemberView {
  core::MemberRecord rec;
  Revision rev = 0;
  TimePoint changed_at{};  // on the observer's clock: expiry counts from when *we* saw it move
};

struct AssignView {
  core::AssignmentRecord rec;
  Revision rev = 0;
  bool readable = true;  // false: garbage at `rev` (no instruction; the leader rewrites it)
};

// What one drain() changed, for the sequencer to act on.
struct ViewChanges {
  bool leader_deleted = false;  // job.leader was deleted
  bool leader_changed = false;  // job.leader was written (read leader_view() for whom)
  bool plan_changed = false;    // job.plan was written or damaged
  std::optional<std::string> foreign_fingerprint;  // a readable plan of another job config
  std::vector<std::string> departed;               // sessions that disappeared
  std::vector<std::string> arrived;       // sessions that appeared (or came back under a new nonce)
  bool membership_changed = false;        // a session appeared, left, or changed lanes/fingerprint
  std::vector<std::string> leases_freed;  // lease keys deleted (their splits may be claimable)
  std::vector<std::string> sessions_known;   // worker scope: followed sessions now caught up
  std::vector<std::string> leases_known;     // worker scope: followed leases now caught up
  std::vector<std::string> assigns_changed;  // assignment records written, deleted or damaged
  bool pause_changed = false;
  bool standby_changed = false;  // job.standby was written, deleted or damaged
  bool more = false;             // events remain (the per-step bound was hit)

  bool any_for_assignment() const {
    return membership_changed || !leases_freed.empty() || !assigns_changed.empty() || pause_changed;
  }
};

enum class ViewScope : std::uint8_t { worker, fleet };

class FleetViews {
 public:
  explicit FleetViews(const MemberContext& ctx);

  // Changes what is watched (see above). A change closes the other scope's watches and drops
  // their views; ensure_watches() opens the new ones. The job keys' watch stays.
  void set_scope(ViewScope scope);
  ViewScope scope() const { return scope_; }
  // Worker scope: the splits whose lease.{id} to follow (at most kMaxFollowedLeases: the rest
  // wait). A split no longer followed leaves the lease view unless the lease is this instance's.
  void follow_leases(const std::set<std::string>& ids);
  // This member deleted lease.{id} at `rev` (a release): the view drops it. A delete floor is
  // kept only where a watch of the key keeps the view (fleet scope, or a followed split).
  void own_lease_deleted(const std::string& id, Revision rev);
  // Bumped whenever every follow is dropped (a scope change, closed watches): a caller that
  // skips follow_leases while its set is unchanged must call it again then.
  std::uint64_t follows_dropped() const { return follows_dropped_; }
  // Whether lease.{id} is known: followed and caught up (worker scope), or always (fleet scope).
  bool lease_known(const std::string& id) const;
  static constexpr std::size_t kMaxFollowedLeases = 256;
  // Worker scope: the peers whose member.{id} to follow (at most kMaxFollowedSessions). A peer
  // no longer followed (nor leading) leaves the session view.
  void follow_sessions(const std::set<std::string>& instances);
  // Whether the session view is authoritative for `instance`: its watch delivered its snapshot.
  bool session_known(const std::string& instance) const;
  static constexpr std::size_t kMaxFollowedSessions = 256;

  // Opens the watches that are not open (each starts from a fresh snapshot).
  void ensure_watches();
  void close_watches();
  // Folds pending events (bounded per watch) into the views.
  ViewChanges drain(TimePoint now);
  bool caught_up() const;  // every watch of the scope delivered its snapshot

  // --- the views (read by the sequencer and the collaborators; written through the setters
  // below when this member's own write makes the view newer than the watch) ---
  const std::optional<std::pair<core::LeaderRecord, Revision>>& leader_view() const {
    return leader_view_;
  }
  const std::optional<std::pair<core::PlanRecord, Revision>>& plan_view() const {
    return plan_view_;
  }
  const std::map<std::string, MemberView>& members() const { return members_; }
  const LeaseTable& leases() const { return leases_; }
  LeaseTable& leases() { return leases_; }
  const std::map<std::string, AssignView>& assigns() const { return assigns_; }
  const std::optional<Damage>& leader_damage() const { return leader_damage_; }
  const std::optional<Damage>& plan_damage() const { return plan_damage_; }
  bool paused() const { return paused_; }
  // job.standby: the record and its revision, if readable; standby_damage() if unreadable.
  const std::optional<std::pair<core::StandbyRecord, Revision>>& standby_view() const {
    return standby_view_;
  }
  const std::optional<Revision>& standby_damage() const { return standby_damage_; }
  void set_standby_view(std::optional<std::pair<core::StandbyRecord, Revision>> v) {
    standby_view_ = std::move(v);
    standby_damage_.reset();
  }
  // The highest term in any leader, plan or assignment record read (terms never go back).
  std::uint64_t highest_term_seen() const;
  bool session_live(const std::string& instance, const std::string& nonce) const;

  void set_leader_view(core::LeaderRecord rec, Revision rev);
  void clear_leader_view() { leader_view_.reset(); }
  void clear_leader_damage() { leader_damage_.reset(); }
  void set_leader_damage_since(TimePoint since) {
    if (leader_damage_) leader_damage_->since = since;
  }
  void set_plan_view(core::PlanRecord rec, Revision rev);
  void set_plan_damage(Damage d) { plan_damage_ = std::move(d); }
  void clear_plan_damage() { plan_damage_.reset(); }
  void set_assign_view(const std::string& id, core::AssignmentRecord rec, Revision rev);
  void erase_assign_view(const std::string& id) { assigns_.erase(id); }
  void erase_member(const std::string& id) { members_.erase(id); }

 private:
  void on_job_event(const WatchEvent& e, TimePoint now, ViewChanges& out);
  void on_leader_event(const WatchEvent& e, ViewChanges& out);
  void on_plan_event(const WatchEvent& e, TimePoint now, ViewChanges& out);
  void on_pause_event(const WatchEvent& e, ViewChanges& out);
  void on_standby_event(const WatchEvent& e, ViewChanges& out);
  void on_member_event(const WatchEvent& e, TimePoint now, ViewChanges& out);
  void on_lease_event(const WatchEvent& e, ViewChanges& out);
  void on_assign_event(const WatchEvent& e, ViewChanges& out);
  void on_unreadable(const WatchEvent& e, const std::string& error, TimePoint now,
                     ViewChanges& out);
  void note_term(std::uint64_t term) { max_term_seen_ = std::max(max_term_seen_, term); }
  void ensure_worker_watches();
  void ensure_fleet_watches();
  void follow_leader_session();
  void drop_unowned_lease(const std::string& id);
  bool drain_slots(std::map<std::string, WatchSlot>& slots, TimePoint now,
                   const std::function<void(const WatchEvent&)>& handle, ViewChanges& out,
                   std::vector<std::string>& known);
  bool follows_session(const std::string& instance) const;

  const MemberContext& ctx_;
  ViewScope scope_ = ViewScope::worker;
  WatchSlot job_;                                 // both scopes
  WatchSlot assign_me_;                           // worker scope
  std::optional<WatchSlot> leader_session_;       // worker scope, while a peer leads
  std::map<std::string, WatchSlot> lease_slots_;  // worker scope, by split id
  std::uint64_t follows_dropped_ = 0;
  std::map<std::string, WatchSlot> session_slots_;          // worker scope, by instance
  WatchSlot members_watch_, leases_watch_, assigns_watch_;  // fleet scope
  std::optional<std::pair<core::LeaderRecord, Revision>> leader_view_;
  std::optional<std::pair<core::PlanRecord, Revision>> plan_view_;
  std::map<std::string, MemberView> members_;
  LeaseTable leases_;
  std::map<std::string, AssignView> assigns_;
  std::optional<Damage> leader_damage_;  // job.leader is unreadable
  std::optional<Damage> plan_damage_;    // job.plan is unreadable or was deleted
  std::uint64_t max_term_seen_ = 0;
  bool paused_ = false;  // job.pause exists
  std::optional<std::pair<core::StandbyRecord, Revision>> standby_view_;
  std::optional<Revision> standby_damage_;  // job.standby is unreadable at this revision
};

}  // namespace etlc::runtime
