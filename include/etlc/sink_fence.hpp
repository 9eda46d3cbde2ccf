// SinkFence: exactly-once output, with the split's epoch as a fencing token the sink checks.
//
// Every tenancy of a split has an epoch that only grows: a new owner's claim bumps it through a
// compare-and-swap on the split's record, before the new owner is told (SplitGranted::epoch). A
// sink that keeps, per split, a fence row (the highest epoch it was opened for, and the sink's
// own progress of the split) and that writes every batch in one transaction with that row makes
// the pipeline exactly-once (docs/exactly-once.md has the argument):
//
//   open     on a grant, atomically: if the stored epoch is <= the grant's, store the grant's
//            epoch and return the sink's progress; otherwise refuse (a newer tenancy exists).
//   batch    in ONE sink transaction: lock the fence row, check that its epoch is still the
//            lane's (a newer one means the split moved: refuse, write nothing), write the rows,
//            advance the row's progress past them. Commit.
//   resume   the lane starts from the larger of the coordination record's progress and the sink's
//            (a batch can be durable in the sink before the coordination commit that follows it).
//   commit   the coordination progress is committed only after the sink transaction, so it never
//            runs ahead of the sink.
//
// The row lock serialises a zombie's batch and the new owner's open: either the batch commits
// first and the new owner resumes after it, or the open raises the epoch first and the batch is
// refused. The higher epoch wins; a row is written by exactly one tenancy.
//
// What a sink must offer: a transaction covering the rows and the fence row (or one conditional
// write covering both), and a row lock or compare-and-set on the fence row. A relational
// database does (examples/pg_backfill/sink.cpp is one for PostgreSQL); so does a key-value store
// with CAS when a batch and its progress live in one value.
//
// How the Driver uses it (DriverOptions::sink_fence): it calls open() before it opens a lane and
// resumes the lane as above; `refused` (here, or a batch refused later: StepResult::fenced, or
// SinkFenced thrown by a lane) ends the lane: the Driver reports the split failed with the
// sink's reason, which the coordination store answers `fenced` when it already knows the newer
// owner (the lane is then simply lost), and counts as a delivery attempt only when the sink is
// ahead of every grant (an operator's mistake, or a coordination store reset under a kept sink):
// the split then ends quarantined with the reason, its rows untouched.
//
// Thread safety: open() is called from the Driver's worker threads, concurrently for different
// splits, never twice at once for the same split.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "etlc/errors.hpp"
#include "etlc/split.hpp"

namespace etlc {

enum class FenceStatus : std::uint8_t {
  open,       // the fence stands at the caller's epoch now; `progress` is the sink's
  refused,    // the sink holds a newer epoch for the split: another tenancy owns it. Stop.
  retryable,  // the sink could not be reached; nothing is known to have changed. Retry later.
};

std::string_view to_string(FenceStatus status) noexcept;

struct FenceResult {
  FenceStatus status = FenceStatus::retryable;
  // open: the sink's own durable progress of the split (watermark 0 and empty state if it never
  // saw the split).
  SplitProgress progress;
  // refused: the epoch the sink holds (above the caller's).
  std::uint64_t sink_epoch = 0;
  std::string detail;  // why, for logs and the split's last error
};

class SinkFence {
 public:
  virtual ~SinkFence() = default;

  // Raises the split's fence to `epoch` (see the top of this file). Idempotent for one epoch:
  // opening again at the same epoch returns the same answer, so a call whose outcome was unknown
  // is simply retried. Throwing counts as poison for the split (the exception's message is its
  // last error); a sink that cannot be reached returns `retryable` instead.
  virtual FenceResult open(std::string_view split_id, std::uint64_t epoch) = 0;
};

// Thrown by a lane (from step(), durable_progress() or drain()) whose sink refused a batch
// because the split's fence stands at a newer epoch: the Driver handles it like
// StepResult::fenced. Nothing of the refused batch may have been written.
class SinkFenced : public Error {
 public:
  using Error::Error;
};

}  // namespace etlc
