// `file-backfill generate`: a deterministic, skewed CSV input set (part-NNNNN.csv).
#pragma once

#include <cstdint>
#include <filesystem>

namespace fb {

struct GenerateOptions {
  std::filesystem::path output;
  std::uint64_t files = 100;
  std::uint64_t total_bytes = 100'000'000;
  std::uint64_t seed = 1;
  std::uint64_t malformed = 0;  // malformed rows to plant (spread over the files)
  // > 0: every file of one size but the last, one_big times larger (a straggler); 0: Pareto.
  std::uint64_t one_big = 0;
};

struct GenerateReport {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
  std::uint64_t rows = 0;  // valid rows
  std::uint64_t malformed = 0;
};

// Writes options.files files whose sizes follow a heavy-tailed (Pareto) distribution and add up to
// about total_bytes. Rows carry quoted fields with commas, quotes, newlines and non-ASCII text;
// about one file in ten uses CRLF line ends. The same options always produce the same bytes.
// Existing part-*.csv files in the directory are replaced. Throws UserError on bad options or
// an unwritable directory.
GenerateReport generate(const GenerateOptions& options);

}  // namespace fb
