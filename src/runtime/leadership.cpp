// Leadership: a term's lifetime and its step (leadership.hpp). Planning is planning.cpp, the
// assignment publish.cpp, the repairs healing.cpp.
#include "runtime/leadership.hpp"

#include <fmt/format.h>

#include "core/keys.hpp"
#include "log.hpp"

namespace etlc::runtime {

namespace {
constexpr auto kPlanRetryMin = std::chrono::milliseconds(200);
constexpr auto kStoreRetry = std::chrono::milliseconds(100);
}  // namespace

Leadership::Leadership(const MemberContext& ctx, Deps deps, std::string nonce, std::uint64_t term,
                       Revision leader_rev, TimePoint now, std::optional<LeaderViews> warm)
    : ctx_(ctx),
      deps_(std::move(deps)),
      views_(deps_.views),
      leader_views_(warm ? std::move(*warm) : LeaderViews(ctx)),
      nonce_(std::move(nonce)),
      term_(term),
      leader_rev_(leader_rev),
      delay_(ctx.config.rebalance_delay),
      cooldown_(ctx.config.rebalance_cooldown),
      next_plan_at_(now),
      plan_backoff_(kPlanRetryMin),
      confirm_quarantines_(warm.has_value()) {
  // Start with no memory of departure times: members whose assignment records exist but whose
  // sessions are gone get a fresh window from now, so a leader change does not rush a move.
  for (const auto& [id, v] : views_.assigns()) {
    if (!views_.members().count(id)) note_departure(id, now);
  }
  leader_views_.ensure_watches();
}

bool Leadership::drain(TimePoint now) {
  leader_views_.ensure_watches();
  bool more = false;
  if (leader_views_.drain(now, more)) assignment_dirty_ = true;
  return more;
}

void Leadership::on_changes(const ViewChanges& c, TimePoint now) {
  for (const auto& id : c.departed) note_departure(id, now);
  for (const auto& id : c.arrived) note_arrival(id);
  if (c.membership_changed || !c.leases_freed.empty() || c.pause_changed) {
    assignment_dirty_ = true;
  }
  if (c.pause_changed) {
    log().warn("etlc: {}: job {}", ctx_.instance,
               views_.paused() ? "paused: assigning nothing; members drain and release"
                               : "resumed: assigning from the committed progress");
  }
  // Republish when a record is not what this term published: a deposed leader wrote it, or one
  // of our own writes whose outcome was unknown landed late, after we had decided otherwise
  // (left alone, that member would follow a stale list for the whole term; sim bug 13).
  for (const auto& id : c.assigns_changed) {
    auto it = views_.assigns().find(id);
    auto p = published_.find(id);
    if (it == views_.assigns().end() || !it->second.readable || it->second.rec.term != term_ ||
        p == published_.end() || p->second != it->second.rec.splits) {
      assignment_dirty_ = true;
    }
  }
}

void Leadership::departed(const std::vector<std::string>& ids, TimePoint now) {
  for (const auto& id : ids) note_departure(id, now);
  if (!ids.empty()) assignment_dirty_ = true;
}

Leadership::Outcome Leadership::step(TimePoint now) {
  outcome_ = {};
  if (!leader_views_.caught_up() || !views_.caught_up()) return outcome_;
  // Elected from a worker's views, which hold only its own assignment record: now that the
  // fleet's records are in view, a term above ours (a record a destroyed plan forgot) deposes us.
  if (views_.highest_term_seen() > term_) {
    step_down("a newer term exists");
    return outcome_;
  }
  heal(now);
  if (outcome_.kind != Outcome::Kind::lead) return outcome_;
  advance_planning(now);
  if (outcome_.kind != Outcome::Kind::lead) return outcome_;
  tend_residuals(now);
  // Tallies first: a view short of the plan counts less than the store holds, never more, so a
  // `complete` verdict carried over from an earlier term goes back to running while records
  // deleted since are rebuilt (sim operator 18617: members reported AllComplete meanwhile).
  update_tallies(now);
  if (outcome_.kind != Outcome::Kind::lead) return outcome_;
  if (split_view_short(now)) return outcome_;  // wait for the watch to deliver the rest
  publish_assignment(now);
  cleanup_departed(now);
  publish_progress(now);
  return outcome_;
}

TimePoint Leadership::next_due(TimePoint now) const {
  if (seeding_) return now;
  const TimePoint retry = now + kStoreRetry;
  auto later = [&](TimePoint due) { return due > now ? due : retry; };
  TimePoint next = TimePoint::max();
  if (!leader_views_.caught_up() || !views_.caught_up()) return next;
  if (auto due = assignment_due()) next = std::min(next, later(*due));
  next = std::min(next, later(progress_due()));
  if (auto d = delay_.next_deadline()) next = std::min(next, later(*d));
  const auto& plan = views_.plan_view();
  const bool plan_due =
      plan && (!plan->first.planned || plan->first.finality == core::Finality::open || repair_due_);
  if (plan_due && !planning_) next = std::min(next, later(next_plan_at_));
  return next;
}

void Leadership::resign() {
  const auto& l = views_.leader_view();
  ctx_.store.erase(core::kLeaderKey, l ? l->second : leader_rev_);
}

}  // namespace etlc::runtime
