// CSV reading for the file backfill: RFC 4180 records (quoted fields, "" escapes, embedded commas
// and newlines, LF or CRLF line ends) with a header row, over a whole file held in memory.
//
// A record that cannot be read is *malformed*: it is reported with a reason and skipped, and
// reading resumes at the next line, so one bad row never stops a file. Malformed means: a quote
// inside an unquoted field, text after a closing quote, an unterminated quoted field, a record
// longer than kMaxRecordBytes, a field that is not UTF-8, or a field count that differs from the
// header's. Blank lines are skipped. If the header itself is malformed (or names a column
// twice), every record of the file is malformed.
//
// The lane and `verify` both read through CsvFile, so they agree on what a row is; the parser is
// tested on its own against hand-written cases (tests/examples/csv_test.cpp).
//
// A file can be read in byte ranges (a split of part of a file): next_boundary finds where one
// range may end and the next begin, by reading a little around the cut point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fb {

inline constexpr std::size_t kMaxRecordBytes = 1 << 20;

// One physical record parsed at a position.
struct CsvParse {
  enum class Kind : std::uint8_t { record, malformed, end };
  Kind kind = Kind::end;
  std::size_t start = 0;  // where the record starts (after skipped blank lines)
  std::size_t next = 0;   // where the next record starts
  std::string error;      // malformed only
};

// Parses the record at `pos` of `data` into `fields` (reusing its strings). `pos` must be a
// record boundary. Returns Kind::end when only blank lines remain.
CsvParse parse_csv_record(std::string_view data, std::size_t pos, std::vector<std::string>& fields);

// How far before a cut point next_boundary reads when no boundary is known nearer: a record's
// interior line starts all lie within kMaxRecordBytes of its start (only quoted fields span lines,
// and each ends by then or is malformed), so a window longer than that holds a record boundary.
inline constexpr std::size_t kCutSlack = 64 << 10;
inline constexpr std::size_t kCutWindow = kMaxRecordBytes + 1 + kCutSlack;

// Where a range of the file may end and the next begin so that each record is read by exactly
// one of them: the start of the first record (the header counts) at or after `target`, as read
// from the file's start; data.size() if none. `known` must be a position that reading from the
// file's start stands on (0, a record's start or the position after a record): reading starts
// there when it is within kCutWindow of `target`, else from every line start in the window
// before `target`, and nullopt if they do not all agree (rare: a field spanning many lines) or no
// line starts in the window's last kCutSlack bytes (a long line).
std::optional<std::size_t> next_boundary(std::string_view data, std::size_t known,
                                         std::size_t target);

// True if `s` is valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string_view s) noexcept;

// One row of a file, as the lane and verify see it.
struct CsvRow {
  std::size_t offset = 0;  // byte offset of the record in its file: the row's identity
  std::size_t next = 0;    // offset of the next record
  bool malformed = false;
  std::string error;                // malformed only
  std::vector<std::string> fields;  // valid rows only, one per header column
};

// Reads the rows of one file's contents, header first.
class CsvFile {
 public:
  // `data` must outlive the CsvFile. Reading starts at `from`, which must be 0 or a record
  // boundary past the header (a resume point); the header is read either way.
  explicit CsvFile(std::string_view data, std::size_t from = 0);

  // The next row, or false at the end of the file.
  bool next(CsvRow& row);

  const std::vector<std::string>& header() const { return header_; }
  bool header_ok() const { return header_ok_; }
  const std::string& header_error() const { return header_error_; }
  std::size_t position() const { return pos_; }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
  std::vector<std::string> header_;
  bool header_ok_ = true;
  std::string header_error_;
};

}  // namespace fb
