// Unit tests of the repair rules that decide what a parked or quarantined record says.
#include <gtest/gtest.h>

#include "core/repair_rules.hpp"

namespace etlc::core {
namespace {

SplitRecord held(std::uint64_t epoch) {
  SplitRecord r;
  r.id = "s";
  r.epoch = epoch;
  r.owner = "me";
  r.owner_nonce = "n1";
  r.attempts = 1;
  return r;
}

TEST(RepairRules, a_quarantine_after_a_requeued_park_is_not_taken_for_a_park) {
  SplitRecord r = park_for_spec(held(4), "spec.s is missing");
  ASSERT_TRUE(parked_for_spec(r));
  r.status = SplitStatus::runnable;  // the leader requeued it once the spec was back
  const SplitRecord q = quarantine_for_attempts(r, 2);
  EXPECT_EQ(q.status, SplitStatus::quarantined);
  EXPECT_EQ(q.attempts, 2u);
  EXPECT_FALSE(q.owner.has_value());
  EXPECT_FALSE(q.owner_nonce.has_value());
  EXPECT_FALSE(parked_for_spec(q)) << q.last_error.value_or("");
  EXPECT_EQ(q.last_error, "quarantined after 2 delivery attempts");
}

TEST(RepairRules, a_quarantine_keeps_the_sources_last_error) {
  SplitRecord r = held(4);
  r.last_error = "row 17: bad utf-8";
  const SplitRecord q = quarantine_for_attempts(r, 3);
  EXPECT_EQ(q.last_error, "row 17: bad utf-8");
  EXPECT_EQ(q.epoch, 4u);
}

TEST(RepairRules, seeding_starts_at_zero_only_in_the_jobs_first_term) {
  EXPECT_EQ(seeded_epoch(1, 0), 0u);
  // A later term: the split may have been claimed and deleted unseen, so above any epoch an
  // earlier term can have given (the term floor), and above its lease's epoch.
  EXPECT_EQ(seeded_epoch(2, 0), rebuilt_epoch(0, 0, 2));
  EXPECT_GT(seeded_epoch(2, 0), rebuilt_epoch(0, 0, 1));
  EXPECT_GT(seeded_epoch(3, 7), 7u);
  EXPECT_GT(seeded_epoch(1, 7), 7u);  // a lease names an epoch: never below it
}

}  // namespace
}  // namespace etlc::core
