// Properties of a held split's write after a lost or doubtful CAS (core/held_write.hpp), over
// generated writes and generated changes by another writer in between.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/held_write.hpp"

namespace etlc::core {
namespace {

constexpr std::uint64_t kEpoch = 4;

SplitRecord gen_base() {
  SplitRecord r;
  r.id = "s";
  r.epoch = kEpoch;
  r.owner = "me";
  r.owner_nonce = "n1";
  r.weight = *rc::gen::inRange<std::uint64_t>(1, 4);
  const auto wm = *rc::gen::inRange<std::uint64_t>(0, 4);
  const bool has_done = *rc::gen::arbitrary<bool>();
  r.progress =
      SplitProgress{wm, "at " + std::to_string(wm), has_done ? std::optional(wm) : std::nullopt};
  return r;
}

// `r` with each field changed or not: what a writer did to the record it read.
SplitRecord gen_changes(SplitRecord r, bool may_release = false) {
  if (may_release && *rc::gen::arbitrary<bool>()) {  // a release, or a completion that clears it
    r.owner.reset();
    r.owner_nonce.reset();
  }
  if (*rc::gen::arbitrary<bool>()) r.weight += *rc::gen::inRange<std::uint64_t>(1, 3);
  if (*rc::gen::arbitrary<bool>()) r.last_error = *rc::gen::element<std::string>("x", "y");
  if (*rc::gen::arbitrary<bool>()) {
    r.progress.watermark = *rc::gen::inRange<std::uint64_t>(0, 8);
    r.progress.state = "at " + std::to_string(r.progress.watermark);
  }
  if (*rc::gen::arbitrary<bool>()) r.progress.done = *rc::gen::inRange<std::uint64_t>(0, 8);
  if (*rc::gen::arbitrary<bool>()) r.status = SplitStatus::completed;
  return r;
}

struct Fields {
  std::uint64_t weight;
  std::optional<std::string> last_error;
  std::uint64_t watermark;
  std::string state;
  std::optional<std::uint64_t> done;
  SplitStatus status;
};
Fields fields(const SplitRecord& r) {
  return {r.weight,         r.last_error,    r.progress.watermark,
          r.progress.state, r.progress.done, r.status};
}

// Of the same tenancy, and naming no residuals: a retry carries every field the write changed
// with the write's value and every other field with the store's; nothing of either is lost.
RC_GTEST_PROP(HeldWrite, a_retry_loses_neither_the_writes_change_nor_another_writers, ()) {
  const SplitRecord base = gen_base();
  const SplitRecord next = gen_changes(base, /*may_release=*/true);
  const SplitRecord seen = gen_changes(base);
  const ConflictResolution r =
      resolve_held_conflict(base, next, seen, kEpoch, "me", std::string("n1"));
  RC_ASSERT(r.verdict != ConflictVerdict::fenced);
  if (r.verdict == ConflictVerdict::superseded) {  // a later commit of ours holds more progress
    RC_ASSERT(r.record == seen);
    RC_ASSERT(seen.progress.watermark > next.progress.watermark);
  }
  const Fields b = fields(base), n = fields(next), s = fields(seen), out = fields(r.record);
  const bool position = n.watermark != b.watermark || n.state != b.state;
  // Progress never goes back: a later commit of ours in the store keeps its whole progress.
  const bool behind = s.watermark > (position ? n.watermark : s.watermark);
  if (behind) {
    RC_ASSERT(r.record.progress == seen.progress);
  } else {
    RC_ASSERT(out.watermark == (position ? n.watermark : s.watermark));
    RC_ASSERT(out.state == (position ? n.state : s.state));
    RC_ASSERT(out.done == (n.done != b.done ? n.done : s.done));
  }
  RC_ASSERT(out.weight == (n.weight != b.weight ? n.weight : s.weight));
  RC_ASSERT(out.last_error == (n.last_error != b.last_error ? n.last_error : s.last_error));
  RC_ASSERT(out.status == (n.status != b.status ? n.status : s.status));
  RC_ASSERT(r.record.epoch == kEpoch);
  RC_ASSERT(r.record.owner == next.owner && r.record.owner_nonce == next.owner_nonce);
  // Only a retry has something left to write.
  RC_ASSERT((r.verdict == ConflictVerdict::retry) == (r.record != seen));
}

// A record of another tenancy is never written over.
RC_GTEST_PROP(HeldWrite, another_tenancy_always_fences, ()) {
  const SplitRecord base = gen_base();
  SplitRecord seen = gen_changes(base);
  switch (*rc::gen::inRange(0, 3)) {
    case 0:
      seen.epoch = kEpoch + 1;
      break;
    case 1:
      seen.owner = *rc::gen::element<std::optional<std::string>>(std::nullopt, "other");
      break;
    default:
      seen.owner_nonce = *rc::gen::element<std::optional<std::string>>(std::nullopt, "n2");
  }
  const ConflictResolution r =
      resolve_held_conflict(base, gen_changes(base), seen, kEpoch, "me", std::string("n1"));
  RC_ASSERT(r.verdict == ConflictVerdict::fenced);
  RC_ASSERT(r.record == seen);
}

}  // namespace
}  // namespace etlc::core
