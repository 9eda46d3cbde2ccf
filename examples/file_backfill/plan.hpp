// The file backfill's planning: list the input directory once, cut the files larger than the
// split target into ranges at record boundaries, bin-pack files and ranges into splits by bytes,
// and describe each split so that any member can process it without listing again.
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

// A byte range [begin, end) of one input file, cut at record boundaries (csv.hpp's
// next_boundary); the whole file when begin is 0 and end its size. A range past the file's start
// still reads the file's header (its first record) for the column names.
struct FileRange {
  std::string name;              // file name inside the input directory
  std::uint64_t file_bytes = 0;  // the file's size when planned: a lane refuses a changed file
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t bytes() const { return end - begin; }
  bool whole() const { return begin == 0 && end == file_bytes; }
  friend bool operator==(const FileRange&, const FileRange&) = default;
};

FileRange whole_file(const InputFile& file);

struct SplitPlan {
  std::string id;
  std::vector<FileRange> ranges;  // sorted by (name, begin); processed in this order
  std::uint64_t bytes = 0;        // the ranges' bytes: the split's weight
};

// A file larger than `target_bytes` cut into about equal ranges of at most about that size, at
// the record boundaries next_boundary finds near the even cut points (a cut it cannot place is
// left out: its neighbours merge); a smaller file whole. `data` is the file's contents.
// Deterministic: it depends only on the bytes.
std::vector<FileRange> cut_file(std::string_view data, const InputFile& file,
                                std::uint64_t target_bytes);

// Bin-packs `ranges` into splits of at most `target_bytes` (first fit, largest first); a range at
// or above the target is a split of its own. Deterministic: the same ranges and target always
// give the same splits with the same ids ("split-00000", ... in order of their first range).
std::vector<SplitPlan> pack_splits(const std::vector<FileRange>& ranges,
                                   std::uint64_t target_bytes);

// Planned ranges are at least this long (whatever the target): a --split-bytes far below a
// file's size means "a file per split" to some users, not a split per row.
inline constexpr std::uint64_t kMinRangeBytes = 64 << 10;

// The job's splits: every listed file, those above max(target, min_range) cut into ranges of
// about that size (cut_file), packed into splits of at most `target_bytes` (pack_splits).
// Throws UserError if a file cannot be read or changed size since it was listed.
std::vector<SplitPlan> plan_splits(const Listing& listing, std::uint64_t target_bytes,
                                   std::uint64_t min_range_bytes = kMinRangeBytes);

// The split descriptor (the id travels separately):
//   {"files":[{"name":..,"bytes":..},{"name":..,"bytes":..,"begin":..,"end":..},..]}
// `bytes` is the file's size; `begin` and `end` bound a part of it and are written only for a
// part (so a whole file's entry reads as it did before ranges existed; either defaults).
std::string encode_descriptor(const SplitPlan& split);
// Throws UserError on a descriptor this program did not write.
SplitPlan decode_descriptor(std::string_view id, std::string_view descriptor);

// A digest of what the job processes: the file names and sizes, the split target, the range
// floor and the rules that plan with them (v2: large files cut into ranges). Members started on a
// different input, or planning by other rules, are refused by the coordinator.
std::string job_fingerprint(const Listing& listing, std::uint64_t split_bytes,
                            std::uint64_t min_range_bytes = kMinRangeBytes);

// Plans once, from the listing taken when the member started (a final plan).
class FilePlanner final : public etlc::Planner {
 public:
  FilePlanner(Listing listing, std::uint64_t split_bytes,
              std::uint64_t min_range_bytes = kMinRangeBytes);
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
