// `file-backfill bench`: the pipeline's throughput with 1, 2 and 4 members against a plain
// single-threaded loop over the same files that does the same work without the library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace fb {

struct BenchOptions {
  std::filesystem::path input;
  std::filesystem::path output;  // scratch space; each configuration's output is removed after it
  std::vector<std::uint32_t> members = {1, 2, 4};
  std::uint32_t max_in_flight = 2;
  std::uint64_t split_bytes = 8ull << 20;
  std::int64_t commit_interval_ms = 1000;
  std::int64_t lease_ms = 3000;
  std::uint32_t repeat = 3;  // runs per configuration; the median (by wall time) is reported
};

// Prints a Markdown table; returns a process exit code.
int bench(const BenchOptions& options);

}  // namespace fb
