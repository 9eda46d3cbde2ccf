#include "plan.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <system_error>

#include "csv.hpp"

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

std::vector<SplitPlan> pack_splits(const std::vector<InputFile>& files,
                                   std::uint64_t target_bytes) {
  std::vector<InputFile> order = files;
  std::sort(order.begin(), order.end(), [](const InputFile& a, const InputFile& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name;
  });
  std::vector<SplitPlan> bins;
  for (const InputFile& f : order) {
    SplitPlan* home = nullptr;
    if (f.bytes < target_bytes) {
      for (SplitPlan& b : bins) {
        if (b.bytes < target_bytes && b.bytes + f.bytes <= target_bytes) {
          home = &b;
          break;
        }
      }
    }
    if (home == nullptr) home = &bins.emplace_back();
    home->files.push_back(f);
    home->bytes += f.bytes;
  }
  for (SplitPlan& b : bins) {
    std::sort(b.files.begin(), b.files.end(),
              [](const InputFile& x, const InputFile& y) { return x.name < y.name; });
  }
  std::sort(bins.begin(), bins.end(), [](const SplitPlan& a, const SplitPlan& b) {
    return a.files.front().name < b.files.front().name;
  });
  for (std::size_t i = 0; i < bins.size(); ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "split-%05zu", i);
    bins[i].id = id;
  }
  return bins;
}

std::string encode_descriptor(const SplitPlan& split) {
  nlohmann::json files = nlohmann::json::array();
  for (const InputFile& f : split.files) files.push_back({{"name", f.name}, {"bytes", f.bytes}});
  return nlohmann::json{{"files", files}}.dump();
}

SplitPlan decode_descriptor(std::string_view id, std::string_view descriptor) {
  SplitPlan s;
  s.id = std::string(id);
  try {
    auto j = nlohmann::json::parse(descriptor);
    for (const auto& f : j.at("files")) {
      InputFile file{f.at("name").get<std::string>(), f.at("bytes").get<std::uint64_t>()};
      if (file.name.empty() || file.name.find('/') != std::string::npos) {
        throw UserError("bad file name");
      }
      s.bytes += file.bytes;
      s.files.push_back(std::move(file));
    }
  } catch (const std::exception& e) {
    throw UserError("split " + std::string(id) +
                    " has a descriptor this program cannot read: " + e.what());
  }
  return s;
}

std::string job_fingerprint(const Listing& listing, std::uint64_t split_bytes) {
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
  for (const InputFile& f : listing.files) {
    mix(f.name);
    mix(std::to_string(f.bytes));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "file-backfill/v1/%zu-files/%016llx", listing.files.size(),
                static_cast<unsigned long long>(h));
  return buf;
}

FilePlanner::FilePlanner(Listing listing, std::uint64_t split_bytes)
    : listing_(std::move(listing)),
      splits_(pack_splits(listing_.files, split_bytes)),
      fingerprint_(job_fingerprint(listing_, split_bytes)) {}

etlc::Plan FilePlanner::plan(const etlc::PlanContext&) {
  etlc::Plan p;
  p.finality = etlc::PlanFinality::final;
  for (const SplitPlan& s : splits_) {
    p.splits.push_back({etlc::SplitSpec{s.id, encode_descriptor(s), s.bytes}, std::nullopt});
  }
  return p;
}

}  // namespace fb
