// The file backfill's lanes: read a split's CSV file ranges in bounded steps, write one JSON line
// per row to the split's output file for this tenancy (data/<split>.e<epoch>.jsonl; malformed
// rows to rejects/<split>.e<epoch>.jsonl), and make the output durable (write + fdatasync) before
// reporting progress.
//
// Progress: the watermark is a byte position in the split's ranges taken end to end (their
// bounds come from the descriptor), always at a record boundary; the state is
// "<rows> <malformed>" counted up to the watermark, so a takeover resumes both the position and
// the counts. A lane that split itself (Lane::split) ends before the descriptor's end: its state
// is then "<rows> <malformed> <end>", `end` that position, where a lane resumed from it stops.
#pragma once

#include <etlc/split_source.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace fb {

// Counters of one member, shared by its lanes, read by the progress display.
struct MemberCounters {
  std::atomic<std::uint64_t> bytes_read{0};    // input consumed (replays included)
  std::atomic<std::uint64_t> rows_read{0};     // valid rows converted (replays included)
  std::atomic<std::uint64_t> rows_written{0};  // rows whose lines reached an output file
  std::atomic<std::uint64_t> malformed_read{0};
  std::atomic<std::uint64_t> splits_completed{0};
  // Residuals its lanes cut off (Lane::split): splits the plan did not have. A cut whose commit
  // never lands (the split lost first) is counted all the same.
  std::atomic<std::uint64_t> splits_cut{0};
  std::atomic<std::uint64_t> rows_completed{0};  // valid rows of the splits it completed
  std::atomic<std::uint64_t> malformed_completed{0};
};

// A lane opened: who resumed which split from where (the run shows takeovers with it).
struct LaneOpened {
  std::string split;
  std::string instance;
  std::uint64_t epoch = 0;
  std::uint64_t resume = 0;  // watermark, bytes into the split
  std::uint64_t split_bytes = 0;
};

// Job-wide view of how far the splits got (the highest watermark any lane of this process
// reached, per split), and of the lanes opened. Thread-safe.
class JobProgress {
 public:
  void advance(const std::string& split, std::uint64_t watermark);
  std::uint64_t covered_bytes() const;
  void opened(LaneOpened event);
  // The lanes opened since the last call.
  std::vector<LaneOpened> take_opened();

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::uint64_t> max_;
  std::uint64_t covered_ = 0;
  std::vector<LaneOpened> opened_;
};

// Limits a read rate, a member's or a lane's (0 = unlimited). Thread-safe.
class Pacer {
 public:
  explicit Pacer(std::uint64_t bytes_per_s) : rate_(bytes_per_s) {}
  // Sleeps (in short slices, giving up when `stop` is requested) so that the bytes paced so far
  // never run ahead of the rate.
  void pace(std::uint64_t bytes, const std::stop_token& stop);

 private:
  std::uint64_t rate_;
  std::mutex mu_;
  std::int64_t next_free_ns_ = 0;  // steady_clock time when the budget is next free
};

struct LaneSettings {
  std::filesystem::path input_dir;
  std::filesystem::path output_dir;   // holds data/ and rejects/
  std::size_t step_bytes = 1 << 20;   // input read per step
  std::size_t flush_bytes = 1 << 20;  // output buffered before a write()
  MemberCounters* counters = nullptr;
  JobProgress* progress = nullptr;     // may be null
  Pacer* pacer = nullptr;              // the member's, shared by its lanes; may be null
  std::uint64_t lane_bytes_per_s = 0;  // each lane's own limit (0 = none)
  // Lane::split declines to give away less than this (the residual's bytes).
  std::uint64_t min_split_bytes = 256 << 10;
};

class FileSource final : public etlc::SplitSource {
 public:
  explicit FileSource(LaneSettings settings) : settings_(std::move(settings)) {}
  // Throws (the split is then failed as poison) if the descriptor cannot be read or the output
  // file cannot be opened.
  std::unique_ptr<etlc::Lane> open(const etlc::LaneContext& context) override;

 private:
  LaneSettings settings_;
};

// A lane's progress state: the counts up to the watermark, and where the lane ends when it split
// itself (none: at the descriptor's end).
struct LaneState {
  std::uint64_t rows = 0;
  std::uint64_t malformed = 0;
  std::optional<std::uint64_t> end;
  friend bool operator==(const LaneState&, const LaneState&) = default;
};

// "<rows> <malformed>" or "<rows> <malformed> <end>" <-> LaneState ("" is all zeros, no end).
// Throws std::invalid_argument on anything else.
std::string encode_state(const LaneState& state);
LaneState decode_state(const std::string& state);

// A split id as a file name: bytes other than ASCII letters, digits and "-_.~" (and a leading
// '.') as %XX, so an id never names a path elsewhere. The planner's and the runtime's ids
// ("split-00003", "split-00003~7.1") are unchanged.
std::string file_name_of(const std::string& split);

// data/<split>.e<epoch>.jsonl and rejects/<split>.e<epoch>.jsonl under the output directory,
// <split> as file_name_of writes it.
std::filesystem::path data_file(const std::filesystem::path& output, const std::string& split,
                                std::uint64_t epoch);
std::filesystem::path rejects_file(const std::filesystem::path& output, const std::string& split,
                                   std::uint64_t epoch);

}  // namespace fb
