#include "csv.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace fb {

namespace {

// Start of the line after the first '\n' at or after `from` (or the end of the data).
std::size_t next_line(std::string_view data, std::size_t from) {
  const std::size_t nl = data.find('\n', from);
  return nl == std::string_view::npos ? data.size() : nl + 1;
}

CsvParse bad(std::size_t start, std::size_t next, std::string why) {
  return CsvParse{CsvParse::Kind::malformed, start, next, std::move(why)};
}

// Past blank lines (LF or CRLF), which are not records.
std::size_t skip_blank_lines(std::string_view data, std::size_t pos) {
  const std::size_t n = data.size();
  while (pos < n &&
         (data[pos] == '\n' || (data[pos] == '\r' && pos + 1 < n && data[pos + 1] == '\n'))) {
    pos += data[pos] == '\n' ? 1 : 2;
  }
  return pos;
}

// Where reading records from `pos` first stands at or past `target`: a record's start or the
// position after a record (or the end of the data). `memo` maps record starts below `target`
// read before to their answer, so line starts read on the same path cost nothing again.
std::size_t reach(std::string_view data, std::size_t pos, std::size_t target,
                  std::unordered_map<std::size_t, std::size_t>& memo,
                  std::vector<std::string>& fields) {
  std::vector<std::size_t> path;
  std::size_t at = 0;
  for (;;) {
    pos = skip_blank_lines(data, pos);
    if (pos >= target) {
      at = pos;
      break;
    }
    if (const auto hit = memo.find(pos); hit != memo.end()) {
      at = hit->second;
      break;
    }
    path.push_back(pos);
    const CsvParse p = parse_csv_record(data, pos, fields);
    pos = p.next;
  }
  for (std::size_t p : path) memo[p] = at;
  return at;
}

}  // namespace

bool valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int len;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (end - p < len) return false;
    for (int i = 1; i < len; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    p += len;
  }
  return true;
}

CsvParse parse_csv_record(std::string_view data, std::size_t pos,
                          std::vector<std::string>& fields) {
  const std::size_t n = data.size();
  pos = skip_blank_lines(data, pos);
  if (pos >= n) return CsvParse{CsvParse::Kind::end, n, n, {}};
  const std::size_t start = pos;
  std::size_t count = 0;
  auto field = [&]() -> std::string& {
    if (count == fields.size()) fields.emplace_back();
    std::string& f = fields[count++];
    f.clear();
    return f;
  };

  for (;;) {
    std::string& f = field();
    if (pos < n && data[pos] == '"') {
      const std::size_t open = pos;
      ++pos;
      for (;;) {
        const std::size_t q = data.find('"', pos);
        if (q == std::string_view::npos || q - start > kMaxRecordBytes) {
          return bad(start, next_line(data, open), "unterminated quoted field");
        }
        f.append(data.data() + pos, q - pos);
        if (q + 1 < n && data[q + 1] == '"') {  // "" is one quote
          f.push_back('"');
          pos = q + 2;
          continue;
        }
        pos = q + 1;
        break;
      }
      if (pos >= n) break;
      if (data[pos] == ',') {
        ++pos;
        continue;
      }
      if (data[pos] == '\n') {
        ++pos;
        break;
      }
      if (data[pos] == '\r' && pos + 1 < n && data[pos + 1] == '\n') {
        pos += 2;
        break;
      }
      return bad(start, next_line(data, pos), "text after a closing quote");
    }
    // Unquoted: up to the next comma or line end.
    std::size_t end = pos;
    while (end < n && data[end] != ',' && data[end] != '\n' && data[end] != '"') ++end;
    if (end < n && data[end] == '"') {
      return bad(start, next_line(data, end), "quote inside an unquoted field");
    }
    if (end - start > kMaxRecordBytes) {
      return bad(start, next_line(data, end), "record longer than 1 MiB");
    }
    std::size_t value_end = end;
    if (end < n && data[end] == '\n' && value_end > pos && data[value_end - 1] == '\r') {
      --value_end;  // CRLF
    }
    f.append(data.data() + pos, value_end - pos);
    pos = end;
    if (pos >= n) break;
    if (data[pos] == ',') {
      ++pos;
      continue;
    }
    ++pos;  // '\n'
    break;
  }
  fields.resize(count);
  for (const std::string& f : fields) {
    if (!valid_utf8(f)) return bad(start, pos, "a field is not valid UTF-8");
  }
  return CsvParse{CsvParse::Kind::record, start, pos, {}};
}

CsvFile::CsvFile(std::string_view data, std::size_t from) : data_(data) {
  CsvParse h = parse_csv_record(data_, 0, header_);
  if (h.kind == CsvParse::Kind::end) {
    header_.clear();
    pos_ = data_.size();
    return;
  }
  if (h.kind == CsvParse::Kind::malformed) {
    header_ok_ = false;
    header_error_ = "the file's header is malformed: " + h.error;
    header_.clear();
  } else {
    std::set<std::string_view> names(header_.begin(), header_.end());
    if (names.size() != header_.size()) {
      header_ok_ = false;
      header_error_ = "the file's header names a column twice";
    }
  }
  pos_ = std::max(h.next, from);
}

bool CsvFile::next(CsvRow& row) {
  CsvParse p = parse_csv_record(data_, pos_, row.fields);
  if (p.kind == CsvParse::Kind::end) {
    pos_ = data_.size();
    return false;
  }
  row.offset = p.start;
  row.next = p.next;
  pos_ = p.next;
  row.malformed = false;
  row.error.clear();
  if (p.kind == CsvParse::Kind::malformed) {
    row.malformed = true;
    row.error = std::move(p.error);
  } else if (!header_ok_) {
    row.malformed = true;
    row.error = header_error_;
  } else if (row.fields.size() != header_.size()) {
    row.malformed = true;
    row.error = std::to_string(row.fields.size()) + " fields, the header has " +
                std::to_string(header_.size());
  }
  return true;
}

std::optional<std::size_t> next_boundary(std::string_view data, std::size_t known,
                                         std::size_t target) {
  std::unordered_map<std::size_t, std::size_t> memo;
  std::vector<std::string> fields;
  if (target <= known || target - known <= kCutWindow) {
    return reach(data, known, target, memo, fields);
  }
  // Read from every line start in [from, last], `last` the first line start past
  // from + kMaxRecordBytes. The true reading stands on one of them: a record's interior line
  // starts all lie within kMaxRecordBytes of its start, so no record spans all of them. If they
  // all reach the same boundary, so does the true reading. The line starts after `last` are not
  // asked: those inside a field spanning lines may not have fallen in step by the target.
  const std::size_t from = target - kCutWindow;
  const std::size_t last_nl = data.find('\n', from + kMaxRecordBytes);
  if (last_nl == std::string_view::npos || last_nl + 1 >= target) return std::nullopt;
  const std::size_t last = last_nl + 1;
  std::optional<std::size_t> agreed;
  for (std::size_t nl = data.find('\n', from - 1); nl != std::string_view::npos && nl < last;) {
    const std::size_t line = nl + 1;
    const std::size_t at = reach(data, line, target, memo, fields);
    if (agreed && *agreed != at) return std::nullopt;
    agreed = at;
    // The blank lines after `line` read as it does: the next line worth reading from is the one
    // after the next line that is not blank.
    nl = data.find('\n', skip_blank_lines(data, line));
  }
  return agreed;
}

}  // namespace fb
