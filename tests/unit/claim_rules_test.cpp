// Unit tests of claim classification, attempt accounting and the quarantine gate.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>

#include "core/claim_rules.hpp"

namespace etlc::core {
namespace {

constexpr std::uint32_t kCap = 3;

SplitRecord record(std::uint64_t epoch, std::optional<std::string> owner = std::nullopt,
                   std::optional<std::string> nonce = std::nullopt, std::uint32_t attempts = 0) {
  SplitRecord r;
  r.id = "s";
  r.epoch = epoch;
  r.owner = std::move(owner);
  r.owner_nonce = std::move(nonce);
  r.attempts = attempts;
  return r;
}

LeaseRecord lease(std::string owner, std::string nonce) {
  return LeaseRecord{"s", std::move(owner), std::move(nonce), 1};
}

TEST(ClaimRules, a_never_owned_split_is_a_fresh_claim) {
  const ClaimDecision d = decide_claim(record(0), std::nullopt, "me", "n2", kCap);
  EXPECT_EQ(d.refusal, ClaimRefusal::none);
  EXPECT_EQ(d.kind, ClaimKind::fresh);
  EXPECT_FALSE(d.consumes_attempt);
  EXPECT_FALSE(d.quarantine);
  EXPECT_EQ(d.attempts_after, 0u);
}

TEST(ClaimRules, a_gracefully_released_split_costs_no_attempt) {
  const ClaimDecision d =
      decide_claim(record(4, std::nullopt, std::nullopt, 2), std::nullopt, "me", "n2", kCap);
  EXPECT_EQ(d.refusal, ClaimRefusal::none);
  EXPECT_EQ(d.kind, ClaimKind::released);
  EXPECT_FALSE(d.consumes_attempt);
  EXPECT_EQ(d.attempts_after, 2u);
  EXPECT_FALSE(d.quarantine);
}

TEST(ClaimRules, our_own_restart_is_a_reclaim_that_consumes_an_attempt) {
  const ClaimDecision d = decide_claim(record(4, "me", "n1", 0), std::nullopt, "me", "n2", kCap);
  EXPECT_EQ(d.refusal, ClaimRefusal::none);
  EXPECT_EQ(d.kind, ClaimKind::reclaim);
  EXPECT_TRUE(d.consumes_attempt);
  EXPECT_EQ(d.attempts_after, 1u);
  EXPECT_FALSE(d.delete_stale_lease);
}

TEST(ClaimRules, a_leftover_lease_of_our_previous_process_is_deleted_first) {
  const ClaimDecision d =
      decide_claim(record(4, "me", "n1", 0), lease("me", "n1"), "me", "n2", kCap);
  EXPECT_EQ(d.refusal, ClaimRefusal::none);
  EXPECT_EQ(d.kind, ClaimKind::reclaim);
  EXPECT_TRUE(d.delete_stale_lease);
  EXPECT_FALSE(d.adopt_own_lease);
}

TEST(ClaimRules, an_expired_foreign_owner_is_a_takeover_that_consumes_an_attempt) {
  const ClaimDecision d = decide_claim(record(4, "other", "x", 1), std::nullopt, "me", "n2", kCap);
  EXPECT_EQ(d.refusal, ClaimRefusal::none);
  EXPECT_EQ(d.kind, ClaimKind::takeover);
  EXPECT_TRUE(d.consumes_attempt);
  EXPECT_EQ(d.attempts_after, 2u);
  EXPECT_FALSE(d.quarantine);
}

TEST(ClaimRules, a_live_foreign_lease_refuses_the_claim) {
  EXPECT_EQ(decide_claim(record(0), lease("other", "x"), "me", "n2", kCap).refusal,
            ClaimRefusal::foreign_lease);
  EXPECT_EQ(decide_claim(record(4, "other", "x"), lease("other", "x"), "me", "n2", kCap).refusal,
            ClaimRefusal::foreign_lease);
}

TEST(ClaimRules, a_split_we_already_hold_is_refused) {
  EXPECT_EQ(decide_claim(record(4, "me", "n2"), std::nullopt, "me", "n2", kCap).refusal,
            ClaimRefusal::already_held);
  EXPECT_EQ(decide_claim(record(4, "me", "n2"), lease("me", "n2"), "me", "n2", kCap).refusal,
            ClaimRefusal::already_held);
}

TEST(ClaimRules, our_own_lease_without_the_record_is_adopted) {
  // An earlier claim of ours created the lease; its record CAS did not land.
  const ClaimDecision d = decide_claim(record(4), lease("me", "n2"), "me", "n2", kCap);
  EXPECT_EQ(d.refusal, ClaimRefusal::none);
  EXPECT_TRUE(d.adopt_own_lease);
  EXPECT_FALSE(d.delete_stale_lease);
  EXPECT_EQ(d.kind, ClaimKind::released);
}

TEST(ClaimRules, terminal_splits_are_never_claimed) {
  SplitRecord done = record(9);
  done.status = SplitStatus::completed;
  EXPECT_EQ(decide_claim(done, std::nullopt, "me", "n2", kCap).refusal, ClaimRefusal::terminal);
  SplitRecord parked = record(9, std::nullopt, std::nullopt, kCap);
  parked.status = SplitStatus::quarantined;
  EXPECT_EQ(decide_claim(parked, std::nullopt, "me", "n2", kCap).refusal, ClaimRefusal::terminal);
}

TEST(ClaimRules, the_attempt_that_reaches_the_cap_quarantines) {
  const ClaimDecision d =
      decide_claim(record(4, "other", "x", kCap - 1), std::nullopt, "me", "n2", kCap);
  EXPECT_EQ(d.refusal, ClaimRefusal::none);
  EXPECT_EQ(d.attempts_after, kCap);
  EXPECT_TRUE(d.quarantine);
  // A graceful release at the same count does not.
  EXPECT_FALSE(
      decide_claim(record(4, std::nullopt, std::nullopt, kCap - 1), std::nullopt, "me", "n2", kCap)
          .quarantine);
}

TEST(ClaimRules, fail_consumes_one_attempt_and_quarantines_at_the_cap) {
  const FailDecision first = decide_fail(record(1, "me", "n2", 0), kCap);
  EXPECT_EQ(first.attempts_after, 1u);
  EXPECT_FALSE(first.quarantine);
  const FailDecision last = decide_fail(record(1, "me", "n2", kCap - 1), kCap);
  EXPECT_EQ(last.attempts_after, kCap);
  EXPECT_TRUE(last.quarantine);
  const auto max = std::numeric_limits<std::uint32_t>::max();
  EXPECT_EQ(decide_fail(record(1, "me", "n2", max), kCap).attempts_after, max);  // saturates
  EXPECT_EQ(decide_fail(record(1, "me", "n2", 0), 1).quarantine, true);
}

TEST(ClaimRules, a_zero_attempt_cap_is_a_config_error) {
  EXPECT_THROW(decide_claim(record(0), std::nullopt, "me", "n2", 0), ConfigError);
  EXPECT_THROW(decide_fail(record(0), 0), ConfigError);
}

TEST(ClaimRules, kinds_and_refusals_have_names) {
  EXPECT_EQ(to_string(ClaimKind::takeover), "takeover");
  EXPECT_EQ(to_string(ClaimRefusal::foreign_lease), "foreign_lease");
}

// --- phase 1: the lease step

TEST(LeaseStep, no_lease_or_this_very_sessions_lease_proceeds) {
  EXPECT_EQ(decide_lease_step(std::nullopt, "me", "n1", false), LeaseStep::proceed);
  EXPECT_EQ(decide_lease_step(lease("me", "n1"), "me", "n1", true), LeaseStep::proceed);
}

TEST(LeaseStep, a_lease_of_an_earlier_process_of_ours_is_cleared_even_when_listed_live) {
  EXPECT_EQ(decide_lease_step(lease("me", "n0"), "me", "n1", false), LeaseStep::clear_dead);
  EXPECT_EQ(decide_lease_step(lease("me", "n0"), "me", "n1", true), LeaseStep::clear_dead);
}

TEST(LeaseStep, another_members_lease_waits_while_its_session_looks_live) {
  EXPECT_EQ(decide_lease_step(lease("peer", "p1"), "me", "n1", true), LeaseStep::wait);
  EXPECT_EQ(decide_lease_step(lease("peer", "p1"), "me", "n1", false), LeaseStep::clear_dead);
}

// --- phase 2: the claim's steps

ClaimFacts facts(std::optional<std::string> spec_problem = std::nullopt) {
  ClaimFacts f;
  f.self_instance = "me";
  f.self_nonce = "n2";
  f.max_attempts = kCap;
  f.spec_problem = std::move(spec_problem);
  return f;
}

TEST(PlanClaim, a_claim_moves_the_epoch_by_one_and_an_adoption_keeps_it) {
  const ClaimPlan claim = plan_claim(record(4), facts());
  EXPECT_EQ(claim.action, ClaimAction::claim);
  EXPECT_EQ(claim.epoch, 5u);
  const ClaimPlan adopt = plan_claim(record(4, "me", "n2"), facts());
  EXPECT_EQ(adopt.action, ClaimAction::adopt);
  EXPECT_EQ(adopt.epoch, 4u);
}

TEST(PlanClaim, a_terminal_split_is_left_to_the_leader) {
  SplitRecord done = record(3);
  done.status = SplitStatus::completed;
  EXPECT_EQ(plan_claim(done, facts()).action, ClaimAction::retry_later);
  done.status = SplitStatus::quarantined;
  EXPECT_EQ(plan_claim(done, facts()).action, ClaimAction::retry_later);
}

TEST(PlanClaim, a_takeover_at_the_cap_quarantines_unless_its_owner_lives) {
  const SplitRecord crashed = record(7, "peer", "p1", kCap - 1);
  const ClaimPlan p = plan_claim(crashed, facts());
  EXPECT_EQ(p.action, ClaimAction::quarantine);
  EXPECT_EQ(p.decision.attempts_after, kCap);
  ClaimFacts live = facts();
  live.owner_session_live = true;  // it released or never held it: no poison evidence
  const ClaimPlan w = plan_claim(crashed, live);
  EXPECT_EQ(w.action, ClaimAction::claim);
  EXPECT_EQ(w.decision.attempts_after, kCap - 1);
  EXPECT_FALSE(w.decision.consumes_attempt);
}

TEST(PlanClaim, a_takeover_waits_while_the_owners_session_is_unsure) {
  const SplitRecord owned = record(7, "peer", "p1", kCap - 1);
  ClaimFacts unsure = facts();
  unsure.owner_session_unsure = true;  // the view and a point read disagree
  EXPECT_EQ(plan_claim(owned, unsure).action, ClaimAction::skip);
  unsure.spec_problem = "spec.s is unreadable";  // no park either: the owner may hold it
  EXPECT_EQ(plan_claim(owned, unsure).action, ClaimAction::skip);
  // Only a takeover asks: a split nobody owns, or our own, is claimed as before.
  ClaimFacts free_facts = facts();
  free_facts.owner_session_unsure = true;
  EXPECT_EQ(plan_claim(record(3), free_facts).action, ClaimAction::claim);
  EXPECT_EQ(plan_claim(record(2, "me", "n0", 0), free_facts).action, ClaimAction::claim);
}

TEST(PlanClaim, a_benign_reclaim_from_our_own_earlier_session_consumes_no_attempt) {
  const SplitRecord mine = record(2, "me", "n1", kCap - 1);
  EXPECT_EQ(plan_claim(mine, facts()).action, ClaimAction::quarantine);
  ClaimFacts benign = facts();
  benign.owner_nonce_benign = true;
  const ClaimPlan p = plan_claim(mine, benign);
  EXPECT_EQ(p.action, ClaimAction::claim);
  EXPECT_EQ(p.decision.kind, ClaimKind::reclaim);
  EXPECT_EQ(p.decision.attempts_after, kCap - 1);
}

TEST(PlanClaim, an_unusable_spec_parks_the_split_at_the_next_epoch) {
  const ClaimPlan p = plan_claim(record(4), facts("spec.s is unreadable"));
  EXPECT_EQ(p.action, ClaimAction::park);
  EXPECT_EQ(p.epoch, 5u);
}

// A lease protects the tenancy the record names; any other lease is an orphan once it lasts.
TEST(LeaseIsOrphan, a_lease_the_record_does_not_name_protects_nothing) {
  LeaseRecord l{"s", "a", "n1", 5};
  EXPECT_TRUE(lease_is_orphan(l, record(4)));              // the claim never landed
  EXPECT_TRUE(lease_is_orphan(l, record(4, "b", "n2")));   // still the old owner's record
  EXPECT_TRUE(lease_is_orphan(l, record(4, "a", "n0")));   // an earlier process of ours
  EXPECT_TRUE(lease_is_orphan(l, record(5)));              // released; the delete failed (sim 5747)
  EXPECT_TRUE(lease_is_orphan(l, record(9)));              // rebuilt above: a fenced owner's
  EXPECT_TRUE(lease_is_orphan(l, record(5, "b", "n2")));   // a stale claimer's beside b's claim
  EXPECT_FALSE(lease_is_orphan(l, record(5, "a", "n1")));  // landed: the owner's tenancy
  EXPECT_FALSE(lease_is_orphan(l, record(4, "a", "n1")));  // names it (a late CAS landed)
  EXPECT_FALSE(lease_is_orphan(l, record(9, "a", "n1")));  // a reclaim kept the process's lease
}

}  // namespace
}  // namespace etlc::core
