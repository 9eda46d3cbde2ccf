// What a held split's write does when its CAS lost or its outcome was unknown: the verdict from
// the record read back (HeldSplits::resolve_conflict executes it). Pure and thread-safe.
//
// Every write of a tenancy (commit, cut, complete, fail, release) is built on the record the
// holder last wrote or read (`base`) and sent as a CAS at that record's revision. When the CAS
// loses, the record read back (`seen`) decides:
//   * it is `next`: the write landed (an unknown outcome, or our own echo);
//   * it is not of this tenancy (epoch, owner or nonce differ): fenced, nothing more is written;
//   * a later commit of ours already carries more progress (and names every residual the write
//     names): the write keeps that progress, and if it changed nothing else there is nothing to
//     write;
//   * otherwise the write is retried on top of `seen`, moved there field by field: what the write
//     changed from `base` keeps its value, every other field takes `seen`'s (the progress's
//     position, watermark with state, and its `done` count as two fields). So a write of another
//     writer in between (an operator's change of weight, an earlier write of ours that landed
//     unseen, its `done` too) is kept instead of being overwritten with `base`'s older content.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/records.hpp"

namespace etlc::core {

// `next` (built on `base`) moved onto `seen`, field by field (see above). A cut of ours that landed
// unseen
// (`seen` names residuals `next` does not) keeps its progress, which carries the new end, unless
// the write's progress is ahead of it.
SplitRecord rebase_write(const SplitRecord& base, const SplitRecord& next, const SplitRecord& seen);

enum class ConflictVerdict : std::uint8_t {
  landed,      // the store holds what the write meant: durable
  superseded,  // a later commit of ours holds more progress, and the write changes nothing else
  fenced,      // another tenancy owns the record: the split is lost, nothing written
  retry,       // CAS `record` on top of `seen`'s revision
};

struct ConflictResolution {
  ConflictVerdict verdict = ConflictVerdict::retry;
  SplitRecord record;  // what the holder now holds (landed, superseded) or sends (retry)
};

// The tenancy is (epoch, instance, nonce): the holder's.
ConflictResolution resolve_held_conflict(const SplitRecord& base, const SplitRecord& next,
                                         const SplitRecord& seen, std::uint64_t epoch,
                                         std::string_view instance,
                                         const std::optional<std::string>& nonce);

}  // namespace etlc::core
