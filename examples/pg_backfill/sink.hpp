// The PostgreSQL sink, written through the split's epoch as a fencing token (etlc/sink_fence.hpp;
// docs/exactly-once.md).
//
// The fence table etlc_sink_fence has one row per (job, split): the epoch the split's fence
// stands at, and the sink's own progress of the split (watermark = rows written, state = the
// lane's state after the batch: the last id written and, once a split cut the range, its end;
// cut.hpp).
//
//   open     INSERT ... ON CONFLICT DO UPDATE SET epoch = <mine> WHERE stored epoch <= <mine>
//            RETURNING watermark, state: one statement that takes the row lock, raises the fence
//            and reads the sink's progress; no row back = refused (a newer epoch holds it).
//   batch    BEGIN; UPDATE the fence row SET watermark, state WHERE epoch = <mine> AND watermark =
//            <expected> (takes the row lock; 0 rows = refused, or the watermark moved); COPY the
//            rows; COMMIT. The row lock makes a zombie's batch and the new owner's open take turns:
//            whichever commits second sees the other's effect.
//
// Without the fence (at-least-once, --no-fence) a batch is BEGIN; COPY; COMMIT.
//
// Before COMMIT the writer checks that the lane's member session is still provably live
// (LaneContext::live) and rolls back if not. A process stopped between that check and COMMIT
// does not commit after waking: sink connections set idle_in_transaction_session_timeout, so
// the server ends a transaction that idles past it (a pause past the lease does).
//
// A connection lost during COMMIT leaves the outcome unknown: with the fence the writer reads
// the fence row before the next batch (our watermark there = it landed); without it the batch is
// assumed lost and rewritten (a possible duplicate, which verify counts).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <etlc/sink_fence.hpp>
#include <etlc/split.hpp>

#include "pool.hpp"

namespace pgb {

struct Row {
  std::int64_t id = 0;
  std::string payload;
};

struct SinkTarget {
  std::string job;         // the fence rows' job column
  std::string sink_table;  // rows go here
  bool fenced = true;
};

// SinkFence::open over the fence table. Throws PgError for anything but an unreachable server
// (which is `retryable`): a missing fence table, for example, is poison for the split.
class PgSinkFence final : public etlc::SinkFence {
 public:
  PgSinkFence(std::shared_ptr<ConnPool> pool, std::string job)
      : pool_(std::move(pool)), job_(std::move(job)) {}
  etlc::FenceResult open(std::string_view split_id, std::uint64_t epoch) override;

 private:
  std::shared_ptr<ConnPool> pool_;
  std::string job_;
};

// One lane's batches. Not thread-safe (one lane, one thread at a time).
class SinkWriter {
 public:
  enum class Outcome : std::uint8_t {
    written,  // durable in the sink; progress() moved past the batch
    refused,  // the fence stands at a newer epoch: the lane is lost (detail says why)
    lapsed,   // the session may have lapsed: rolled back, nothing written
    retry,    // the sink could not be reached (detail says why): nothing known written yet
  };

  SinkWriter(ConnPool& pool, SinkTarget target, std::string split_id, std::uint64_t epoch,
             std::string writer, etlc::SplitProgress start);
  ~SinkWriter();
  SinkWriter(const SinkWriter&) = delete;
  SinkWriter& operator=(const SinkWriter&) = delete;

  // Settles a batch whose COMMIT outcome is unknown (call before reading the next page: the
  // progress may move). written = settled (progress() is the truth), refused, or retry.
  Outcome settle(std::string& detail);
  // Writes `rows` (the next ones after progress(), in id order) in one transaction. `live` is
  // checked right before COMMIT. Throws PgError/std::runtime_error for a statement that fails
  // for another reason than the connection (a dropped table: poison).
  Outcome write(std::span<const Row> rows, const std::function<bool()>& live, std::string& detail);

  const etlc::SplitProgress& progress() const { return progress_; }

  // From the next batch on, the state written also carries the range's end `hi` (a split cut the
  // range), so a next owner that resumes from the sink's progress stops at the cut as well.
  void set_end(std::int64_t hi) { end_ = hi; }

 private:
  Outcome check_fence(const etlc::SplitProgress& next, std::string& detail);
  bool connect(std::string& detail);

  ConnPool& pool_;
  SinkTarget target_;
  std::string split_;
  std::uint64_t epoch_;
  std::string writer_;
  etlc::SplitProgress progress_;
  std::optional<std::int64_t> end_;
  std::optional<etlc::SplitProgress> unsettled_;  // a batch whose COMMIT outcome is unknown
  std::unique_ptr<Connection> conn_;
  std::string copy_sql_;
};

}  // namespace pgb
