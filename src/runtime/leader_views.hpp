// LeaderViews: what only the leader watches — split.* (every split record: status, owner,
// weight, and the completion tallies) and cordon.* — and the damage found there. Created with
// the Leadership, gone with it: a worker never holds them.
//
// Split records are never deleted and never written unreadable by the protocol, so a delete or
// an unreadable value is recorded as Damage (with the last readable record, kept in the view
// meanwhile for a garbage value) for heal_splits() (healing.cpp) to rebuild. Progress-only
// commits change nothing the assignment reads and do not make it dirty. A new split that nobody
// holds (runnable, no owner, never damaged: what seeding creates) is counted apart, in
// unheld_added(): it can change the assignment only where a lane is free (publish.cpp), so
// seeding a plan does not force a recomputation over every split per slice. A commit that moves
// only a split's remaining work (progress.done) is counted apart too, in progress_changed(): the
// leader recomputes on it at most once per progress_interval (publish.cpp). Not thread-safe.
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "core/lane_pace.hpp"
#include "core/records.hpp"
#include "core/remaining_work.hpp"
#include "runtime/fleet_views.hpp"
#include "runtime/member_context.hpp"
#include "runtime/watch_slot.hpp"

namespace etlc::runtime {

struct SplitView {
  core::SplitRecord rec;
  Revision rev = 0;
  // How much the latest commit of this tenancy added to progress.done (0: none seen yet), for
  // pinning a split about to finish (core::nearly_done).
  std::uint64_t last_done_step = 0;
  // The pace its lane reads at this tenancy, from the commits the leader watched (core::PaceMeter);
  // restarted when the epoch or the owner changes.
  core::PaceMeter pace;
};

class LeaderViews {
 public:
  explicit LeaderViews(const MemberContext& ctx);

  void ensure_watches();
  bool caught_up() const { return splits_watch_.caught_up() && cordons_watch_.caught_up(); }
  // Folds pending events; returns whether anything the assignment reads changed, other than
  // unheld additions (`more`: events remain).
  bool drain(TimePoint now, bool& more);
  // Drops the split view and re-watches it (a fresh snapshot).
  void rewatch_splits() { splits_watch_.reset(); }
  // How many snapshots of split.* the view was built from (one more per re-watch): a snapshot
  // shows no delete, and the damage remembered before it is dropped.
  std::uint64_t split_snapshots() const { return split_snapshots_; }

  const std::unordered_map<std::string, SplitView>& splits() const { return splits_; }
  // Residuals whose records are pending (dynamic splitting): apart from splits(), so that they
  // are neither assigned nor counted until their parent's record names them and the leader makes
  // them runnable (dynamic_splits.cpp). A pending record's delete is the leader's own cleanup,
  // not damage.
  const std::unordered_map<std::string, SplitView>& pending() const { return pending_; }
  // Pending residuals their parent's record already names: splits of the job, though not yet
  // runnable (the tallies count them, so the job cannot complete before they do).
  std::uint64_t named_pending() const;
  std::set<std::string> named_not_runnable() const;
  // Splits in the view whose records name residuals (at most max_dynamic_splits of them).
  const std::set<std::string>& parents() const { return parents_; }
  // Residuals in the view: records with cut_from, pending ones included.
  std::uint64_t residuals() const { return residuals_ + pending_.size(); }
  // Whether runnable (or finished) residuals cut from `parent` are in the view.
  bool has_residuals(const std::string& parent) const { return origins_.count(parent) > 0; }
  std::map<std::string, Damage>& split_damage() { return split_damage_; }
  const std::map<std::string, Damage>& split_damage() const { return split_damage_; }
  const std::set<std::string>& parked_specs() const { return parked_specs_; }
  const std::set<std::string>& cordons() const { return cordons_; }
  std::uint64_t completed() const { return completed_; }
  std::uint64_t quarantined() const { return quarantined_; }
  // The job's weight over every split record in the view (planned, done, remaining).
  core::JobWeights weights() const { return weights_.weights(); }
  // A commit changed some split's remaining weight since clear_progress_changed().
  bool progress_changed() const { return progress_changed_; }
  void clear_progress_changed() { progress_changed_ = false; }
  // Split records known: readable ones plus damaged ones not in the view, plus pending residuals
  // already named.
  std::uint64_t known_split_count() const;

  // Sets splits_[id] (clearing its damage, keeping the tallies); true if anything the
  // assignment reads changed, except a new unheld split, which only counts in unheld_added().
  // `observed_at`: when the leader saw this commit (its watch); only those measure the pace.
  bool put_split(const std::string& id, core::SplitRecord rec, Revision rev,
                 std::optional<TimePoint> observed_at = std::nullopt);
  // New unheld splits since clear_unheld_added() (the leader's last assignment computation).
  std::uint64_t unheld_added() const { return unheld_added_; }
  void clear_unheld_added() { unheld_added_ = 0; }

 private:
  bool on_split_event(const WatchEvent& e, TimePoint now);
  bool put_pending(const std::string& id, core::SplitRecord rec, Revision rev);
  bool on_cordon_event(const WatchEvent& e);
  void count(const core::SplitRecord& r, bool add);
  // Feeds a commit the leader watched to the split's pace.
  void observe_pace(core::PaceMeter& pace, const core::SplitRecord& rec,
                    std::optional<TimePoint> observed_at) const;

  const MemberContext& ctx_;
  WatchSlot splits_watch_, cordons_watch_;
  std::unordered_map<std::string, SplitView> splits_;
  std::unordered_map<std::string, SplitView> pending_;
  std::uint64_t residuals_ = 0;                             // records in splits_ with cut_from
  std::unordered_map<std::string, std::uint32_t> origins_;  // cut_from.split -> such records
  std::set<std::string> parents_;  // ids in splits_ whose records name children
  std::map<std::string, Damage> split_damage_;
  std::set<std::string> parked_specs_;  // splits parked for their spec (core/repair_rules.hpp)
  std::set<std::string> cordons_;
  std::uint64_t completed_ = 0;
  std::uint64_t quarantined_ = 0;
  std::uint64_t unheld_added_ = 0;
  core::WeightTally weights_;
  bool progress_changed_ = false;
  // The split watch was (re)started: its snapshot replaces the view, so the next drain reports
  // a change whatever the records say (a record may have lost its owner meanwhile).
  bool restarted_ = false;
  std::uint64_t split_snapshots_ = 0;
};

}  // namespace etlc::runtime
