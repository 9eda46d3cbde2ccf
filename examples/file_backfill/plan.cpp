#include "plan.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <system_error>

#include "csv.hpp"
#include "mapped_file.hpp"

namespace fb {

namespace fs = std::filesystem;

Listing list_input(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw UserError("input directory " + dir.string() + " does not exist");
  if (!fs::is_directory(dir, ec)) throw UserError("input " + dir.string() + " is not a directory");
  Listing l;
  l.dir = dir;
  fs::directory_iterator it(dir, ec);
  if (ec) throw UserError("cannot read input directory " + dir.string() + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw UserError("cannot read input directory " + dir.string() + ": " + ec.message());
    const fs::path& p = it->path();
    if (p.extension() != ".csv" || !it->is_regular_file(ec)) continue;
    std::string name = p.filename().string();
    if (!valid_utf8(name)) throw UserError("input file name is not UTF-8: " + p.string());
    const std::uint64_t bytes = it->file_size(ec);
    if (ec) throw UserError("cannot stat " + p.string() + ": " + ec.message());
    if (std::FILE* f = std::fopen(p.c_str(), "rb")) {
      std::fclose(f);
    } else {
      throw UserError("cannot read input file " + p.string());
    }
    l.files.push_back({std::move(name), bytes});
    l.total_bytes += bytes;
  }
  std::sort(l.files.begin(), l.files.end(),
            [](const InputFile& a, const InputFile& b) { return a.name < b.name; });
  return l;
}

FileRange whole_file(const InputFile& file) {
  return {file.name, file.bytes, 0, file.bytes};
}

namespace {

bool by_position(const FileRange& a, const FileRange& b) {
  return a.name != b.name ? a.name < b.name : a.begin < b.begin;
}

// k/n of `bytes`, without overflowing for any k < n.
std::uint64_t fraction_of(std::uint64_t bytes, std::uint64_t k, std::uint64_t n) {
  return k * (bytes / n) + k * (bytes % n) / n;
}

}  // namespace

std::vector<FileRange> cut_file(std::string_view data, const InputFile& file,
                                std::uint64_t target_bytes) {
  if (file.bytes <= target_bytes || data.size() != file.bytes) return {whole_file(file)};
  const std::uint64_t pieces = (file.bytes + target_bytes - 1) / target_bytes;
  std::vector<FileRange> out;
  std::uint64_t begin = 0;
  for (std::uint64_t k = 1; k < pieces; ++k) {
    const std::uint64_t point = fraction_of(file.bytes, k, pieces);
    if (point <= begin) continue;  // the previous cut landed past this point
    const std::optional<std::size_t> cut = next_boundary(data, begin, point);
    if (!cut) continue;
    if (*cut >= file.bytes) break;  // no record starts after the point
    out.push_back({file.name, file.bytes, begin, *cut});
    begin = *cut;
  }
  out.push_back({file.name, file.bytes, begin, file.bytes});
  return out;
}

std::vector<SplitPlan> pack_splits(const std::vector<FileRange>& ranges,
                                   std::uint64_t target_bytes) {
  std::vector<FileRange> order = ranges;
  std::sort(order.begin(), order.end(), [](const FileRange& a, const FileRange& b) {
    return a.bytes() != b.bytes() ? a.bytes() > b.bytes() : by_position(a, b);
  });
  std::vector<SplitPlan> bins;
  for (const FileRange& r : order) {
    SplitPlan* home = nullptr;
    if (r.bytes() < target_bytes) {
      for (SplitPlan& b : bins) {
        if (b.bytes < target_bytes && b.bytes + r.bytes() <= target_bytes) {
          home = &b;
          break;
        }
      }
    }
    if (home == nullptr) home = &bins.emplace_back();
    home->ranges.push_back(r);
    home->bytes += r.bytes();
  }
  for (SplitPlan& b : bins) std::sort(b.ranges.begin(), b.ranges.end(), by_position);
  std::sort(bins.begin(), bins.end(), [](const SplitPlan& a, const SplitPlan& b) {
    return by_position(a.ranges.front(), b.ranges.front());
  });
  for (std::size_t i = 0; i < bins.size(); ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "split-%05zu", i);
    bins[i].id = id;
  }
  return bins;
}

std::vector<SplitPlan> plan_splits(const Listing& listing, std::uint64_t target_bytes,
                                   std::uint64_t min_range_bytes) {
  const std::uint64_t range_bytes = std::max(target_bytes, min_range_bytes);
  std::vector<FileRange> ranges;
  for (const InputFile& f : listing.files) {
    if (f.bytes <= range_bytes) {
      ranges.push_back(whole_file(f));
      continue;
    }
    const fs::path path = listing.dir / f.name;
    try {
      MappedFile m(path);
      if (m.size() != f.bytes) throw UserError("input file " + path.string() + " changed size");
      for (FileRange& r : cut_file(m.data(), f, range_bytes)) ranges.push_back(std::move(r));
    } catch (const UserError&) {
      throw;
    } catch (const std::exception& e) {
      throw UserError(std::string("cannot plan ") + path.string() + ": " + e.what());
    }
  }
  return pack_splits(ranges, target_bytes);
}

std::string encode_descriptor(const SplitPlan& split) {
  nlohmann::json files = nlohmann::json::array();
  for (const FileRange& r : split.ranges) {
    nlohmann::json f = {{"name", r.name}, {"bytes", r.file_bytes}};
    if (!r.whole()) {
      f["begin"] = r.begin;
      f["end"] = r.end;
    }
    files.push_back(std::move(f));
  }
  return nlohmann::json{{"files", files}}.dump();
}

namespace {

FileRange decode_range(const nlohmann::json& f) {
  FileRange r;
  r.name = f.at("name").get<std::string>();
  r.file_bytes = f.at("bytes").get<std::uint64_t>();
  r.begin = f.contains("begin") ? f.at("begin").get<std::uint64_t>() : 0;
  r.end = f.contains("end") ? f.at("end").get<std::uint64_t>() : r.file_bytes;
  if (r.name.empty() || r.name.find('/') != std::string::npos) throw UserError("bad file name");
  if (r.begin > r.end || r.end > r.file_bytes) throw UserError("bad range of " + r.name);
  return r;
}

}  // namespace

SplitPlan decode_descriptor(std::string_view id, std::string_view descriptor) {
  SplitPlan s;
  s.id = std::string(id);
  try {
    auto j = nlohmann::json::parse(descriptor);
    for (const auto& f : j.at("files")) {
      s.ranges.push_back(decode_range(f));
      s.bytes += s.ranges.back().bytes();
    }
  } catch (const std::exception& e) {
    throw UserError("split " + std::string(id) +
                    " has a descriptor this program cannot read: " + e.what());
  }
  return s;
}

std::string job_fingerprint(const Listing& listing, std::uint64_t split_bytes,
                            std::uint64_t min_range_bytes) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  };
  mix(std::to_string(split_bytes));
  mix(std::to_string(min_range_bytes));
  for (const InputFile& f : listing.files) {
    mix(f.name);
    mix(std::to_string(f.bytes));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "file-backfill/v2/%zu-files/%016llx", listing.files.size(),
                static_cast<unsigned long long>(h));
  return buf;
}

FilePlanner::FilePlanner(Listing listing, std::uint64_t split_bytes, std::uint64_t min_range_bytes)
    : listing_(std::move(listing)),
      splits_(plan_splits(listing_, split_bytes, min_range_bytes)),
      fingerprint_(job_fingerprint(listing_, split_bytes, min_range_bytes)) {}

etlc::Plan FilePlanner::plan(const etlc::PlanContext&) {
  etlc::Plan p;
  p.finality = etlc::PlanFinality::final;
  for (const SplitPlan& s : splits_) {
    p.splits.push_back({etlc::SplitSpec{s.id, encode_descriptor(s), s.bytes}, std::nullopt});
  }
  return p;
}

}  // namespace fb
