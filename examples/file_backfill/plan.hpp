// The file backfill's planning: list the input directory once, bin-pack the files into splits by
// bytes, and describe each split so that any member can process it without listing again.
#pragma once

#include <etlc/planner.hpp>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fb {

// A problem with what the user gave us (paths, options, input). The message is one line.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct InputFile {
  std::string name;  // file name inside the input directory (UTF-8, no '/')
  std::uint64_t bytes = 0;
  friend bool operator==(const InputFile&, const InputFile&) = default;
};

// The input: every regular file named *.csv directly inside `dir`, sorted by name.
struct Listing {
  std::filesystem::path dir;
  std::vector<InputFile> files;
  std::uint64_t total_bytes = 0;
};

// Throws UserError if `dir` is missing, not a directory or unreadable, or a name is not UTF-8.
Listing list_input(const std::filesystem::path& dir);

struct SplitPlan {
  std::string id;
  std::vector<InputFile> files;  // sorted by name; processed in this order
  std::uint64_t bytes = 0;
};

// Bin-packs `files` into splits of at most `target_bytes` (first fit, largest first); a file at or
// above the target is a split of its own. Deterministic: the same files and target always give
// the same splits with the same ids ("split-00000", ... in order of their first file name).
std::vector<SplitPlan> pack_splits(const std::vector<InputFile>& files, std::uint64_t target_bytes);

// The split descriptor: {"files":[{"name":..,"bytes":..},..]} (the id travels separately).
std::string encode_descriptor(const SplitPlan& split);
// Throws UserError on a descriptor this program did not write.
SplitPlan decode_descriptor(std::string_view id, std::string_view descriptor);

// A digest of what the job processes: the file names and sizes and the split target. Members
// started on a different input are refused by the coordinator.
std::string job_fingerprint(const Listing& listing, std::uint64_t split_bytes);

// Plans once, from the listing taken when the member started (a final plan).
class FilePlanner final : public etlc::Planner {
 public:
  FilePlanner(Listing listing, std::uint64_t split_bytes);
  std::string fingerprint() const override { return fingerprint_; }
  etlc::Plan plan(const etlc::PlanContext& context) override;
  const std::vector<SplitPlan>& splits() const { return splits_; }
  const Listing& listing() const { return listing_; }

 private:
  Listing listing_;
  std::vector<SplitPlan> splits_;
  std::string fingerprint_;
};

}  // namespace fb
