// What users see of a split: its immutable spec and its durable progress.
#pragma once

#include <cstdint>
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

  friend bool operator==(const SplitProgress&, const SplitProgress&) = default;
};

}  // namespace etlc
