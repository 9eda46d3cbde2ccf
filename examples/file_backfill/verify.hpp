// `file-backfill verify`: checks that every valid input row appears in the output at least once
// with exactly its content. Reads the input with the same CSV rules as the lanes, and the output
// with an independent JSON parser (nlohmann_json).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace fb {

struct VerifyReport {
  std::uint64_t input_files = 0;
  std::uint64_t rows = 0;       // valid input rows
  std::uint64_t malformed = 0;  // malformed input rows (expected in rejects/, not in data/)
  std::uint64_t output_files = 0;
  std::uint64_t output_lines = 0;
  std::uint64_t missing = 0;     // valid rows found in no output line
  std::uint64_t duplicates = 0;  // output lines beyond the first for a row
  std::uint64_t wrong = 0;       // lines naming a row but with other content
  std::uint64_t unknown = 0;     // lines naming a row that does not exist
  std::uint64_t invalid = 0;     // lines that are not the expected JSON
  std::uint64_t torn = 0;        // unterminated last lines (a crash mid-write; never committed)
  std::vector<std::string> problems;  // the first few problems, for the operator

  bool ok() const { return missing == 0 && wrong == 0 && unknown == 0 && invalid == 0; }
};

// Throws UserError if the input cannot be listed or the output directory does not exist.
VerifyReport verify(const std::filesystem::path& input, const std::filesystem::path& output);

}  // namespace fb
