// What users see of a split: its immutable spec and its durable progress.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace etlc {

// Limits on what a planner may produce (checked by the leader, named in errors).
inline constexpr std::size_t kMaxSplitIdBytes = 256;
inline constexpr std::size_t kMaxDescriptorBytes = 256 * 1024;
inline constexpr std::size_t kMaxProgressStateBytes = 64 * 1024;

// One leasable unit of work, as planned. Immutable once published.
struct SplitSpec {
  std::string id;            // deterministic, non-empty UTF-8, at most kMaxSplitIdBytes
  std::string descriptor;    // opaque bytes: everything a worker needs to process the split
  std::uint64_t weight = 1;  // balancing weight (for example bytes); 0 is allowed

  friend bool operator==(const SplitSpec&, const SplitSpec&) = default;
};

// Durable progress of a split: a monotone watermark plus opaque source state. A commit may never
// lower the watermark; the state travels with it to the next owner.
struct SplitProgress {
  std::uint64_t watermark = 0;
  std::string state;  // opaque bytes, at most kMaxProgressStateBytes
  // Optional: how much of the split's weight is done, in the weight's units (bytes read of a
  // file planned by its size). The leader balances on what remains (weight - done, a value above
  // the weight counting as all of it), pins a split that is nearly done where it is, and reports
  // the job's percent done and ETA. An estimate, not a fence: it may go down. A commit that
  // leaves it empty keeps the last value committed, so a source that never sets it balances on
  // planned weights as before. (The initializer keeps SplitProgress{watermark, state} free of
  // -Wmissing-field-initializers.)
  std::optional<std::uint64_t> done = std::nullopt;

  friend bool operator==(const SplitProgress&, const SplitProgress&) = default;
};

}  // namespace etlc
