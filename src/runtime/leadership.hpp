// Leadership: everything a leader has and does, for one term. It is created when this member is
// elected (election.hpp) and destroyed when it steps down, so none of its state exists on a
// worker and nothing is reset by hand: a new term starts from a new object.
//
// What a leader does each step (step()), in this order:
//   heal        rewrite what it owns that is damaged (its leader record, the plan, split records)
//   plan        run the planner off the loop, validate, seed in bounded slices, publish the header
//   tallies     completed / quarantined counts and the verdict in the plan record
//   publish     desired_assignment over its views, written only where a record differs
//   clean up    assignment records of members gone past their rebalance window
//   progress    the job's weight planned / done / remaining and its rate, once per interval
// The term is the leader fence: every plan write is a CAS, and a record showing a newer term
// ends this leadership (Outcome::step_down). Not thread-safe: the control loop owns it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/assignment.hpp"
#include "core/balance_cooldown.hpp"
#include "core/lane_pace.hpp"
#include "core/rebalance_delay.hpp"
#include "core/records.hpp"
#include "core/remaining_work.hpp"
#include "etlc/planner.hpp"
#include "runtime/fleet_views.hpp"
#include "runtime/leader_views.hpp"
#include "runtime/member_context.hpp"
#include "runtime/plan_runner.hpp"

namespace etlc::runtime {

class Leadership {
 public:
  struct Outcome {
    enum class Kind : std::uint8_t { lead, step_down, fatal } kind = Kind::lead;
    std::string why;
  };
  // The collaborators a leader borrows from its member (all outlive it).
  struct Deps {
    FleetViews& views;
    PlanRunner& plan_runner;
    std::shared_ptr<Planner> planner;
    std::uint64_t& publishes;  // assignment records written, over every term
  };

  // Elected for `term` with job.leader at `leader_rev`, naming this session (`nonce`). `warm`:
  // the standby's leader views, already caught up (else they are opened cold).
  Leadership(const MemberContext& ctx, Deps deps, std::string nonce, std::uint64_t term,
             Revision leader_rev, TimePoint now, std::optional<LeaderViews> warm = std::nullopt);

  std::uint64_t term() const { return term_; }
  // Folds the leader-only watches (split.*, cordon.*); true if events remain.
  bool drain(TimePoint now);
  // What the fleet views changed that the leader acts on: departures and arrivals (rebalance
  // windows), assignment records it did not publish, anything that makes the assignment dirty.
  void on_changes(const ViewChanges& changes, TimePoint now);
  // Sessions this member expired itself (liveness.cpp).
  void departed(const std::vector<std::string>& ids, TimePoint now);
  // One leader step; runs only once every view has its snapshot.
  Outcome step(TimePoint now);
  // When step() next has something to do (never in the past); now while seeding.
  TimePoint next_due(TimePoint now) const;
  bool planning() const { return planning_; }
  // What this term last published, member -> splits.
  const std::map<std::string, std::vector<std::string>>& published() const { return published_; }
  // Shutdown: deletes the leader record (guarded).
  void resign();

 private:
  struct SeedJob {
    std::vector<PlannedSplit> splits;
    std::size_t next = 0;
    PlanFinality finality = PlanFinality::final;
    std::optional<std::string> cursor;
    bool repair = false;  // a re-plan to rewrite damaged specs and records (healing.cpp)
  };

  // healing.cpp
  void heal(TimePoint now);
  void heal_leader_record();
  void heal_plan();
  void heal_splits();
  bool heal_split(const std::string& id, Damage& d);
  std::optional<core::SplitRecord> rebuild(const std::string& id, const Damage& d);
  void find_missing_splits();
  std::vector<std::string> named_residuals_of(const std::string& id) const;
  bool apply_cuts_of(const std::string& id, core::SplitRecord& r, const Damage& d);
  void drop_unnamed_residual(const std::string& id, const core::SplitOrigin& origin,
                             const core::SplitRecord* parent, const Damage& d);
  void repair_seeded(const PlannedSplit& s);
  bool rewrite_spec(const PlannedSplit& s, bool confirm);
  // planning.cpp
  void advance_planning(TimePoint now);
  void take_plan_outcome(PlanOutcome outcome, TimePoint now);
  bool valid_plan(const Plan& plan, TimePoint now);
  void start_planner(TimePoint now);
  bool give_up_on_planner(const std::string& error, TimePoint now);
  void seed_slice();
  std::vector<const PlannedSplit*> next_seed_slice();
  // The split record seeded for `s` at this term.
  core::SplitRecord seed_record(const PlannedSplit& s) const;
  void finish_seeding();
  bool split_view_short(TimePoint now);
  bool write_plan(const core::PlanRecord& next);
  // False while a plan write with an unknown outcome could still land (healing.cpp).
  bool plan_settled();
  // False while a requeue with an unknown outcome could still land (healing.cpp).
  bool requeues_settled();
  bool send_requeue(const std::string& id, const SplitView& view);
  void update_tallies(TimePoint now);
  void confirm_quarantines();
  // The splits of the job the view counts: every record in it, and the residuals their parents
  // name that are not runnable yet (pending, damaged or unseen).
  std::uint64_t splits_counted() const {
    return leader_views_.splits().size() + leader_views_.named_pending();
  }
  void set_tallies(core::PlanRecord& next) const;
  // publish.cpp
  // When the assignment is next to be computed (publish.cpp, "When to recompute"); nullopt
  // while nothing calls for it.
  std::optional<TimePoint> assignment_due() const;
  void publish_assignment(TimePoint now);
  void note_balance_moves(const core::AssignmentInput& in, const core::Assignment& out,
                          std::size_t m, TimePoint now);
  void write_assignment(const std::string& member, std::vector<std::string> splits,
                        std::vector<core::SplitAsk> asks, bool& failed, std::uint64_t& written);
  // dynamic_splits.cpp
  void tend_residuals(TimePoint now);
  bool parent_unknown(const std::string& id, const SplitView& v, TimePoint now);
  bool parent_exists_nowhere(const std::string& parent);
  void find_lost_residuals();
  bool flip_residual(const std::string& id, const SplitView& v);
  void delete_orphan(const std::string& id, const SplitView& v);
  void ask_for_splits(const core::AssignmentInput& in, const core::Assignment& out, TimePoint now);
  void expire_asks(TimePoint now);
  // The outstanding requests to `member` among `splits` (sorted), for its record.
  std::vector<core::SplitAsk> asks_for(const std::string& member,
                                       const std::vector<std::string>& splits) const;
  std::optional<TimePoint> next_ask_timeout() const;
  void warn_about_bounds(const std::string& id, const core::MemberRecord& rec);
  void cleanup_departed(TimePoint now);
  // job_progress.cpp
  TimePoint progress_due() const {
    return last_progress_at_ +
           std::max(ctx_.config.progress_interval, ctx_.config.assignment_interval);
  }
  void publish_progress(TimePoint now);
  void note_departure(const std::string& instance, TimePoint now);
  void note_arrival(const std::string& instance);
  void step_down(std::string why) { outcome_ = {Outcome::Kind::step_down, std::move(why)}; }

  const MemberContext& ctx_;
  Deps deps_;
  FleetViews& views_;
  LeaderViews leader_views_;
  const std::string nonce_;  // of the session that was elected (a new session ends the term)
  std::uint64_t term_;
  Revision leader_rev_;
  Outcome outcome_;  // what this step decided (step_down / fatal end the term)
  core::RebalanceDelay delay_;
  bool assignment_dirty_ = true;  // something that can move work changed since the last computation
  // What the last computation saw: claimable splits left queued (every lane full), and how many
  // runnable splits it placed or queued (the doubling bound of publish.cpp).
  bool lanes_full_ = false;
  std::uint64_t computed_over_ = 0;
  TimePoint last_assignment_at_{};
  Duration last_assignment_took_{};  // how long the last computation took (publish.cpp)
  std::map<std::string, std::vector<std::string>> published_;
  // Splits moved from a live holder: pinned for rebalance_cooldown once held there (publish.cpp).
  core::BalanceCooldown cooldown_;
  // What each live member's lanes read at each load it had (publish.cpp: the pace rule). Pruned to
  // the live members at every computation; at most LanePaceHistory::kMaxLoads entries each.
  std::unordered_map<std::string, core::LanePaceHistory> lane_pace_;
  // Outstanding split requests (dynamic_splits.cpp), by split, and the tenancy each named: taken
  // as declined, and not repeated in that tenancy, after split_request_timeout.
  struct Ask {
    std::string member;
    std::uint64_t epoch = 0;
    std::uint32_t children = 0;
    std::uint32_t keep_ppm = 500'000;
    TimePoint at{};
  };
  std::map<std::string, Ask> asks_;
  std::map<std::string, std::uint64_t> declined_;  // split -> the epoch that did not answer
  // Pending residuals whose parent the view does not know, and when that was last looked at.
  std::map<std::string, TimePoint> parentless_checked_;
  std::optional<SeedJob> seeding_;
  bool planning_ = false;
  bool planning_repair_ = false;        // the plan running now is a repair re-plan
  bool repair_due_ = false;             // a re-plan is needed to rewrite specs or records
  std::set<std::string> unrepairable_;  // parked splits the planner no longer lists
  TimePoint next_plan_at_{};
  Duration plan_backoff_{};
  std::uint32_t planner_failures_ = 0;  // consecutive (planning.cpp)
  TimePoint last_tally_write_{};
  // The revision a plan write with an unknown outcome was guarded on: it may still land, with the
  // tallies it was sent with, until the record moves past that revision.
  std::optional<Revision> plan_in_doubt_;
  // Requeues (repair_seeded) with an unknown outcome: split id -> the revision the CAS was guarded
  // on. Each may still land, lowering the quarantine tally, until the record moves past it
  // (`moved`: the store is past it, the view not yet).
  struct RequeueInDoubt {
    Revision guarded = 0;
    bool moved = false;
  };
  std::map<std::string, RequeueInDoubt> requeues_in_doubt_;
  std::optional<TimePoint> split_view_short_since_;
  // Elected with the standby's warm views: the first tallies wait for confirm_quarantines().
  bool confirm_quarantines_ = false;
  bool split_view_rewatched_ = false;
  bool missing_splits_listed_ = false;  // find_missing_splits ran for this shortness episode
  std::uint64_t specs_listed_for_ = 0;  // the split snapshot the specs were last listed for
  std::map<std::string, std::string> peer_warned_;  // instance -> nonce warned about
  // job_progress.cpp: the job's recent rate, and what job.progress last said at which revision
  core::RateWindow rate_{std::chrono::seconds(30)};
  TimePoint last_progress_at_{};
  std::optional<core::ProgressRecord> progress_written_;
  std::optional<Revision> progress_rev_;
};

}  // namespace etlc::runtime
