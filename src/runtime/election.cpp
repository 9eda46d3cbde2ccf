// Election: job.leader, then the term fence on job.plan (election.hpp).
#include "runtime/election.hpp"

#include <fmt/format.h>

#include "core/keys.hpp"
#include "core/protocol_assert.hpp"
#include "log.hpp"

namespace etlc::runtime {

namespace {
constexpr int kTermAttempts = 8;

// Bumps (or creates) the plan record at `e.term` (moving our leader record past a term found
// there). False if a newer term exists or our leader record moved.
bool take_term(const MemberContext& ctx, FleetViews& views, const std::string& nonce, Election& e) {
  for (int attempt = 0; attempt < kTermAttempts; ++attempt) {
    auto cur = ctx.store.get(core::kPlanKey);
    if (!cur) {
      core::PlanRecord plan;
      plan.fingerprint = ctx.fingerprint;
      plan.term = e.term;
      const WriteResult r = ctx.store.create(core::kPlanKey, core::encode(plan));
      if (r.ok) {
        views.set_plan_view(std::move(plan), r.revision);
        return true;
      }
      continue;
    }
    core::PlanRecord plan;
    try {
      plan = core::decode_plan(core::kPlanKey, cur->value);
    } catch (const core::RecordError& err) {
      // Unreadable: take the term over it with the last plan we read, or a fresh one (which
      // re-plans; seeding keeps every spec and split record that exists).
      log().warn("etlc: {}: replacing the unreadable plan record: {}", ctx.instance, err.what());
      plan = views.plan_view() ? views.plan_view()->first : core::PlanRecord{};
      plan.fingerprint = ctx.fingerprint;
    }
    if (plan.fingerprint != ctx.fingerprint) {
      e.kind = Election::Kind::fatal;
      e.message = fmt::format(
          "job fingerprint mismatch: job.plan was planned with '{}', this member's planner has "
          "'{}' (another input or configuration? run it under another job, or `etlc reset` the "
          "job first)",
          plan.fingerprint, ctx.fingerprint);
      return false;
    }
    if (plan.term >= e.term) {
      // A term at least ours exists (a leader we did not see yet). Move past it in our own
      // leader record so terms stay unique, then bump.
      core::LeaderRecord rec{ctx.instance, nonce, plan.term + 1};
      const WriteResult lr = ctx.store.update(core::kLeaderKey, core::encode(rec), e.leader_rev);
      if (!lr.ok) return false;  // our leader record moved: we are not the leader
      e.term = rec.term;
      e.leader_rev = lr.revision;
      views.set_leader_view(std::move(rec), lr.revision);
    }
    ETLC_ASSERT(e.term > plan.term, "taking term {} over a plan of term {}", e.term, plan.term);
    plan.term = e.term;
    const WriteResult r = ctx.store.update(core::kPlanKey, core::encode(plan), cur->revision);
    if (r.ok) {
      views.set_plan_view(std::move(plan), r.revision);
      return true;
    }
  }
  return false;
}

}  // namespace

Election run_election(const MemberContext& ctx, FleetViews& views, const std::string& nonce) {
  Election e;
  if (!views.caught_up() || views.leader_damage()) return e;  // unreadable: it holds the key
  core::LeaderRecord rec;
  if (const auto& l = views.leader_view()) {
    if (l->first.owner != ctx.instance || l->first.nonce != nonce) return e;
    rec = l->first;  // ours, not acted on: finish that election
    e.leader_rev = l->second;
  } else {
    rec = core::LeaderRecord{ctx.instance, nonce, views.highest_term_seen() + 1};
    const WriteResult r = ctx.store.create(core::kLeaderKey, core::encode(rec));
    if (!r.ok) return e;  // someone else won; the watch will tell us who
    e.leader_rev = r.revision;
  }
  e.term = rec.term;
  views.set_leader_view(rec, e.leader_rev);
  if (!take_term(ctx, views, nonce, e)) {
    if (e.kind != Election::Kind::fatal) {
      log().info("etlc: {}: could not take the plan term", ctx.instance);
    }
    return e;
  }
  e.kind = Election::Kind::elected;
  return e;
}

}  // namespace etlc::runtime
