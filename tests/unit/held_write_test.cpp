// Unit tests of a held split's write after a lost or doubtful CAS (core/held_write.hpp).
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "core/held_write.hpp"

namespace etlc::core {
namespace {

constexpr std::uint64_t kEpoch = 4;

// A record held by "me" (nonce "n1") at kEpoch.
SplitRecord held(std::uint64_t watermark, std::optional<std::uint64_t> done = std::nullopt) {
  SplitRecord r;
  r.id = "s";
  r.epoch = kEpoch;
  r.owner = "me";
  r.owner_nonce = "n1";
  r.weight = 100;
  r.progress = SplitProgress{watermark, "at " + std::to_string(watermark), done};
  return r;
}

SplitRecord committed(SplitRecord r, std::uint64_t watermark) {
  r.progress.watermark = watermark;
  r.progress.state = "at " + std::to_string(watermark);
  return r;
}

ConflictResolution resolve(const SplitRecord& base, const SplitRecord& next,
                           const SplitRecord& seen) {
  return resolve_held_conflict(base, next, seen, kEpoch, "me", std::string("n1"));
}

TEST(HeldWrite, the_record_read_back_being_the_write_means_it_landed) {
  const SplitRecord base = held(10);
  const SplitRecord next = committed(base, 20);
  const ConflictResolution r = resolve(base, next, next);
  EXPECT_EQ(r.verdict, ConflictVerdict::landed);
  EXPECT_EQ(r.record, next);
}

TEST(HeldWrite, another_tenancy_fences_the_write) {
  const SplitRecord base = held(10);
  SplitRecord seen = base;
  seen.epoch = kEpoch + 1;
  seen.owner = "other";
  EXPECT_EQ(resolve(base, committed(base, 20), seen).verdict, ConflictVerdict::fenced);
  seen = base;
  seen.owner_nonce = "n0";  // our instance, another session
  EXPECT_EQ(resolve(base, committed(base, 20), seen).verdict, ConflictVerdict::fenced);
  seen = base;
  seen.owner.reset();  // released (by a late write of ours, or the record was rebuilt)
  seen.owner_nonce.reset();
  EXPECT_EQ(resolve(base, committed(base, 20), seen).verdict, ConflictVerdict::fenced);
}

TEST(HeldWrite, a_later_commit_of_ours_supersedes_an_earlier_one) {
  const SplitRecord base = held(10);
  const SplitRecord seen = committed(base, 30);
  const ConflictResolution r = resolve(base, committed(base, 20), seen);
  EXPECT_EQ(r.verdict, ConflictVerdict::superseded);
  EXPECT_EQ(r.record, seen);
}

// Finding 5 of issue 39: the retry used to send `next` as built on `base`, overwriting whatever
// the record read back held in the fields the write does not touch.
TEST(HeldWrite, a_retry_keeps_another_writers_change_of_a_field_the_write_does_not_touch) {
  const SplitRecord base = held(10);
  SplitRecord seen = base;
  seen.weight = 250;  // an operator re-weighted the split
  seen.last_error = "checked by an operator";
  const SplitRecord next = committed(base, 20);
  const ConflictResolution r = resolve(base, next, seen);
  ASSERT_EQ(r.verdict, ConflictVerdict::retry);
  EXPECT_EQ(r.record.weight, 250u);
  EXPECT_EQ(r.record.last_error, "checked by an operator");
  EXPECT_EQ(r.record.progress, next.progress);
}

TEST(HeldWrite, what_the_write_changed_wins_over_the_record_read) {
  const SplitRecord base = held(10);
  SplitRecord seen = base;
  seen.weight = 250;
  SplitRecord release = base;  // a release clears the owner and keeps the progress
  release.owner.reset();
  release.owner_nonce.reset();
  const ConflictResolution r = resolve(base, release, seen);
  ASSERT_EQ(r.verdict, ConflictVerdict::retry);
  EXPECT_FALSE(r.record.owner.has_value());
  EXPECT_FALSE(r.record.owner_nonce.has_value());
  EXPECT_EQ(r.record.weight, 250u);
}

TEST(HeldWrite, a_release_after_a_commit_that_landed_unseen_keeps_its_progress) {
  const SplitRecord base = held(10);
  const SplitRecord seen = committed(base, 30);  // our commit, its outcome unknown, landed
  SplitRecord release = base;
  release.owner.reset();
  release.owner_nonce.reset();
  const ConflictResolution r = resolve(base, release, seen);
  ASSERT_EQ(r.verdict, ConflictVerdict::retry);
  EXPECT_EQ(r.record.progress, seen.progress) << "a release must not take progress back";
  EXPECT_FALSE(r.record.owner.has_value());
}

// Finding 6 of issue 39: a commit that reports no `done` carries the one it was built on; after a
// commit of ours that landed unseen (its re-read failed), that older `done` was written back.
TEST(HeldWrite, a_commit_without_done_keeps_the_done_of_a_commit_that_landed_unseen) {
  const SplitRecord base = held(10, 3);
  SplitRecord seen = committed(base, 20);
  seen.progress.done = 7;  // our commit of 20 with done 7, its outcome unknown, landed
  SplitRecord next = committed(base, 30);  // built on base: done 3
  ConflictResolution r = resolve(base, next, seen);
  ASSERT_EQ(r.verdict, ConflictVerdict::retry);
  EXPECT_EQ(r.record.progress.watermark, 30u);
  EXPECT_EQ(r.record.progress.done, 7u) << "an older done was written back";
  // A commit that reports its own `done` keeps it, even a lower one (an estimate may go down).
  next.progress.done = 5;
  r = resolve(base, next, seen);
  ASSERT_EQ(r.verdict, ConflictVerdict::retry);
  EXPECT_EQ(r.record.progress.done, 5u);
}

TEST(HeldWrite, a_completion_behind_a_later_commit_of_ours_completes_at_that_progress) {
  const SplitRecord base = held(10);
  const SplitRecord seen = committed(base, 30);  // our commit, its outcome unknown, landed
  SplitRecord complete = committed(base, 20);
  complete.status = SplitStatus::completed;
  const ConflictResolution r = resolve(base, complete, seen);
  ASSERT_EQ(r.verdict, ConflictVerdict::retry) << "the completion would be lost";
  EXPECT_EQ(r.record.status, SplitStatus::completed);
  EXPECT_EQ(r.record.progress, seen.progress) << "progress never goes back";
}

TEST(HeldWrite, a_write_that_finds_its_intent_already_there_has_landed) {
  const SplitRecord base = held(10);
  SplitRecord seen = committed(base, 20);
  seen.weight = 250;  // our commit landed, then another writer changed the weight
  const ConflictResolution r = resolve(base, committed(base, 20), seen);
  EXPECT_EQ(r.verdict, ConflictVerdict::landed);
  EXPECT_EQ(r.record, seen);
}

TEST(HeldWrite, a_commit_after_a_cut_that_landed_unseen_keeps_the_cut) {
  const SplitRecord base = held(10);
  SplitRecord seen = committed(base, 12);
  seen.children = {"s~4.1"};
  seen.weight = 60;
  seen.progress.state = "at 12, end 70";
  // A commit built on the record before the cut, not ahead of the cut's progress.
  SplitRecord next = committed(base, 12);
  ConflictResolution r = resolve(base, next, seen);
  EXPECT_EQ(r.verdict, ConflictVerdict::landed);
  EXPECT_EQ(r.record.children, seen.children);
  EXPECT_EQ(r.record.progress.state, "at 12, end 70");
  // Ahead of it: its own progress, still naming the residual, at the cut's weight.
  next = committed(base, 15);
  next.progress.state = "at 15, end 70";
  r = resolve(base, next, seen);
  ASSERT_EQ(r.verdict, ConflictVerdict::retry);
  EXPECT_EQ(r.record.children, seen.children);
  EXPECT_EQ(r.record.weight, 60u);
  EXPECT_EQ(r.record.progress.watermark, 15u);
}

}  // namespace
}  // namespace etlc::core
