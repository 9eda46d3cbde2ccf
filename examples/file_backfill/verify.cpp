#include "verify.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "csv.hpp"
#include "mapped_file.hpp"
#include "plan.hpp"

namespace fb {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxProblems = 10;

struct Hasher {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64 over column, value, column, ...
  void add(std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // separator: ("ab","c") and ("a","bc") differ
    h *= 1099511628211ull;
  }
};

struct Expected {
  std::uint64_t offset;
  std::uint64_t hash;
  std::uint32_t seen = 0;
};

struct FileRows {
  std::vector<Expected> rows;  // sorted by offset (the order they were read)
  Expected* find(std::uint64_t offset) {
    auto it = std::lower_bound(rows.begin(), rows.end(), offset,
                               [](const Expected& e, std::uint64_t o) { return e.offset < o; });
    return it != rows.end() && it->offset == offset ? &*it : nullptr;
  }
};

void problem(VerifyReport& r, std::string what) {
  if (r.problems.size() < kMaxProblems) r.problems.push_back(std::move(what));
}

}  // namespace

VerifyReport verify(const fs::path& input, const fs::path& output) {
  VerifyReport rep;
  const Listing listing = list_input(input);
  std::error_code ec;
  if (!fs::is_directory(output, ec)) {
    throw UserError("output directory " + output.string() + " does not exist");
  }

  // Expected rows, keyed by (file, offset), each with a digest of its sorted (column, value)s.
  std::unordered_map<std::string, FileRows> expected;
  for (const InputFile& f : listing.files) {
    MappedFile m(listing.dir / f.name);
    CsvFile csv(m.data());
    std::vector<std::size_t> order(csv.header().size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return csv.header()[a] < csv.header()[b]; });
    FileRows& rows = expected[f.name];
    CsvRow row;
    while (csv.next(row)) {
      if (row.malformed) {
        ++rep.malformed;
        continue;
      }
      Hasher h;
      for (std::size_t i : order) {
        h.add(csv.header()[i]);
        h.add(row.fields[i]);
      }
      rows.rows.push_back({row.offset, h.h, 0});
      ++rep.rows;
    }
    ++rep.input_files;
  }

  // Every line of every data file.
  const fs::path data = output / "data";
  std::vector<fs::path> outputs;
  if (fs::is_directory(data, ec)) {
    for (const auto& e : fs::directory_iterator(data, ec)) {
      if (e.path().extension() == ".jsonl") outputs.push_back(e.path());
    }
  }
  std::sort(outputs.begin(), outputs.end());
  for (const fs::path& p : outputs) {
    ++rep.output_files;
    MappedFile m(p);
    const std::string_view d = m.data();
    std::size_t pos = 0;
    std::uint64_t line_no = 0;
    while (pos < d.size()) {
      const std::size_t nl = d.find('\n', pos);
      if (nl == std::string_view::npos) {
        ++rep.torn;
        break;
      }
      const std::string_view line = d.substr(pos, nl - pos);
      pos = nl + 1;
      ++line_no;
      ++rep.output_lines;
      const std::string where = p.filename().string() + ":" + std::to_string(line_no);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const std::exception&) {
        ++rep.invalid;
        problem(rep, where + ": not JSON");
        continue;
      }
      const auto file = j.find("file");
      const auto offset = j.find("offset");
      const auto row = j.find("row");
      if (!j.is_object() || j.size() != 3 || file == j.end() || !file->is_string() ||
          offset == j.end() || !offset->is_number_unsigned() || row == j.end() ||
          !row->is_object()) {
        ++rep.invalid;
        problem(rep, where + ": not a row line");
        continue;
      }
      auto rows = expected.find(file->get<std::string>());
      Expected* e =
          rows == expected.end() ? nullptr : rows->second.find(offset->get<std::uint64_t>());
      if (e == nullptr) {
        ++rep.unknown;
        problem(rep, where + ": names no input row (" + file->get<std::string>() + " @" +
                         std::to_string(offset->get<std::uint64_t>()) + ")");
        continue;
      }
      Hasher h;
      bool strings = true;
      for (const auto& [k, v] : row->items()) {  // nlohmann orders object keys bytewise
        if (!v.is_string()) {
          strings = false;
          break;
        }
        h.add(k);
        h.add(v.get_ref<const std::string&>());
      }
      if (!strings || h.h != e->hash) {
        ++rep.wrong;
        problem(rep, where + ": content differs from the input row");
        continue;
      }
      if (e->seen++ > 0) ++rep.duplicates;
    }
  }
  for (auto& [name, rows] : expected) {
    for (const Expected& e : rows.rows) {
      if (e.seen == 0) {
        ++rep.missing;
        problem(rep, "missing: " + name + " @" + std::to_string(e.offset));
      }
    }
  }
  return rep;
}

}  // namespace fb
