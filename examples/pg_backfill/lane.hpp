// The range-scan source: one lane per split reads its id range by keyset pagination (id > last
// ORDER BY id LIMIT batch) and writes each page to the sink in one transaction (sink.hpp), so a
// batch is the unit of both reading and exactly-once writing. Progress: watermark = rows written
// in the split, state = the last id written (and the range's end once cut; cut.hpp).
//
// A lane splits (Lane::split) by key: the ids it has not read, from the lowest to the highest one
// the source holds (two index probes), are cut so that `keep` of that key span stays with the
// lane; the residual "cut hi" weighs the planned rows left times its share of the span. With
// fewer than two ids left, the source out of reach, or a batch of unknown outcome that cannot be
// settled, the lane declines.
//
// A database that cannot be reached is not poison: the step waits a little (bounded, watching
// the stop token), says so in the log (at most every few seconds per lane, naming the database
// and libpq's reason) and returns; the next step retries. Anything else a statement fails with
// (a table dropped mid-run, a fence row changed by hand) is thrown: the split fails with that
// message as its last error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include <etlc/split_source.hpp>

#include "pool.hpp"
#include "sink.hpp"

namespace pgb {

// A per-member rate limit (rows per second) shared by its lanes.
class Pacer {
 public:
  explicit Pacer(std::uint64_t rows_per_s) : rate_(rows_per_s) {}
  // Sleeps (in short slices; gives up when `stop` is requested) until `rows` more fit the rate.
  void pace(std::uint64_t rows, const std::stop_token& stop);

 private:
  std::uint64_t rate_;
  std::mutex mu_;
  std::int64_t next_free_ns_ = 0;
};

// What one member's lanes did (for the summary line and the benchmark).
struct Counters {
  std::atomic<std::uint64_t> rows_written{0};
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> refused{0};  // batches the fence refused
  std::atomic<std::uint64_t> lapsed{0};   // batches rolled back because the session may have lapsed
  std::atomic<std::uint64_t> retries{0};  // steps that found a database unreachable
};

struct LaneSettings {
  std::shared_ptr<ConnPool> source;
  std::shared_ptr<ConnPool> sink;
  std::string table;
  SinkTarget target;
  std::uint32_t batch_rows = 500;
  Pacer* pacer = nullptr;  // may be null
  Counters* counters = nullptr;
  std::chrono::milliseconds retry_pause{200};
};

class PgSource final : public etlc::SplitSource {
 public:
  explicit PgSource(LaneSettings s) : s_(std::move(s)) {}
  // Throws (poison) for a descriptor that is not an id range.
  std::unique_ptr<etlc::Lane> open(const etlc::LaneContext& context) override;

 private:
  LaneSettings s_;
};

}  // namespace pgb
