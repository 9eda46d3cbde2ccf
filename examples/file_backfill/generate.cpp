#include "generate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "plan.hpp"

namespace fb {

namespace fs = std::filesystem;

namespace {

// splitmix64: a small, fully specified generator (std distributions differ between libraries).
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

constexpr const char* kFirst[] = {"Ada",     "Grace",  "Alan",    "Edsger", "Barbara",
                                  "Ken",     "Dennis", "Frances", "John",   "Margaret",
                                  "Niklaus", "Radia",  "Leslie"};
constexpr const char* kLast[] = {"Lovelace", "Hopper",  "Turing",  "Dijkstra", "Liskov",
                                 "Thompson", "Ritchie", "Allen",   "Backus",   "Hamilton",
                                 "Wirth",    "Perlman", "Lamport", "O'Neil"};
constexpr const char* kCity[] = {
    "Lyon",    "Zürich",   "São Paulo", "Kraków", "Tōkyō", "Oslo", "\"Washington, D.C.\"",
    "Nairobi", "Montréal", "Reykjavík"};
constexpr const char* kWords[] = {"ok",      "late",    "refund", "priority", "gift",
                                  "fragile", "express", "return", "bulk",     "café"};

template <std::size_t N>
const char* pick(Rng& r, const char* const (&arr)[N]) {
  return arr[r.below(N)];
}

void append_row(std::string& out, Rng& r, std::uint64_t id, bool crlf) {
  out += std::to_string(id);
  out += ',';
  const double u = r.unit();
  if (u < 0.03) {  // "Last, First": an embedded comma
    out += '"';
    out += pick(r, kLast);
    out += ", ";
    out += pick(r, kFirst);
    out += '"';
  } else if (u < 0.04) {  // embedded quotes
    out += "\"";
    out += pick(r, kFirst);
    out += " \"\"the\"\" ";
    out += pick(r, kLast);
    out += '"';
  } else {
    out += pick(r, kFirst);
    out += ' ';
    out += pick(r, kLast);
  }
  out += ',';
  out += pick(r, kCity);
  out += ',';
  char buf[64];
  std::snprintf(buf, sizeof buf, "%llu.%02llu", static_cast<unsigned long long>(r.below(100000)),
                static_cast<unsigned long long>(r.below(100)));
  out += buf;
  out += ',';
  const double c = r.unit();
  if (c < 0.6) {
    // empty comment
  } else if (c < 0.85) {
    out += pick(r, kWords);
    out += ' ';
    out += pick(r, kWords);
  } else if (c < 0.97) {
    out += '"';
    out += pick(r, kWords);
    out += ", ";
    out += pick(r, kWords);
    out += '"';
  } else {  // a field spanning lines
    out += '"';
    out += pick(r, kWords);
    out += crlf ? "\r\n" : "\n";
    out += pick(r, kWords);
    out += '"';
  }
  out += ',';
  std::snprintf(buf, sizeof buf, "2024-%02d-%02dT%02d:%02d:%02dZ",
                static_cast<int>(1 + r.below(12)), static_cast<int>(1 + r.below(28)),
                static_cast<int>(r.below(24)), static_cast<int>(r.below(60)),
                static_cast<int>(r.below(60)));
  out += buf;
  out += crlf ? "\r\n" : "\n";
}

void append_malformed(std::string& out, std::uint64_t id, std::uint64_t k, bool crlf) {
  if (k % 2 == 0) {
    out += std::to_string(id) + ",too few fields";  // field count differs from the header
  } else {
    out += std::to_string(id) + ",Jo\"hn,Oslo,1.00,,2024-01-01T00:00:00Z";  // stray quote
  }
  out += crlf ? "\r\n" : "\n";
}

}  // namespace

GenerateReport generate(const GenerateOptions& o) {
  if (o.files == 0 || o.files > 1'000'000) throw UserError("--files must be 1..1000000");
  if (o.total_bytes < o.files * 256) throw UserError("--total-bytes must be at least 256 per file");
  if (o.one_big > 1000) throw UserError("--one-big must be 0..1000");
  std::error_code ec;
  fs::create_directories(o.output, ec);
  if (ec) throw UserError("cannot create " + o.output.string() + ": " + ec.message());
  for (const auto& e : fs::directory_iterator(o.output, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("part-", 0) == 0 && e.path().extension() == ".csv") fs::remove(e.path(), ec);
  }

  // Heavy-tailed sizes: Pareto(alpha 1.2) weights, capped so no file exceeds a sixteenth of the
  // total, then scaled to the total.
  Rng sizes{o.seed * 0x2545f4914f6cdd1dull + 1};
  std::vector<double> w(o.files);
  for (double& x : w) x = std::pow(1.0 - sizes.unit(), -1.0 / 1.2);
  double sum = 0;
  for (double x : w) sum += x;
  const double cap = sum / 16;
  sum = 0;
  for (double& x : w) sum += (x = std::min(x, cap));
  if (o.one_big > 0) {  // a straggler: equal files and one that is one_big times larger
    for (double& x : w) x = 1;
    w.back() = static_cast<double>(o.one_big);
    sum = static_cast<double>(o.files - 1 + o.one_big);
  }

  GenerateReport rep;
  const std::string header_lf = "id,name,city,amount,comment,created_at\n";
  std::string buf;
  for (std::uint64_t i = 0; i < o.files; ++i) {
    Rng r{o.seed ^ (0x9e3779b97f4a7c15ull * (i + 1))};
    const bool crlf = r.below(10) == 0;
    const auto target = std::max<std::uint64_t>(
        128, static_cast<std::uint64_t>(static_cast<double>(o.total_bytes) * w[i] / sum));
    // Malformed rows: spread evenly, one file after another.
    std::uint64_t bad_here = o.malformed / o.files + (i < o.malformed % o.files ? 1 : 0);
    buf.clear();
    buf += crlf ? "id,name,city,amount,comment,created_at\r\n" : header_lf;
    std::uint64_t id = 1;
    while (buf.size() < target || id == 1) {
      if (bad_here > 0 && id % 7 == 3) {
        append_malformed(buf, id, rep.malformed, crlf);
        --bad_here;
        ++rep.malformed;
      } else {
        append_row(buf, r, id, crlf);
        ++rep.rows;
      }
      ++id;
    }
    while (bad_here > 0) {
      append_malformed(buf, id++, rep.malformed, crlf);
      --bad_here;
      ++rep.malformed;
    }
    char name[32];
    std::snprintf(name, sizeof name, "part-%05llu.csv", static_cast<unsigned long long>(i));
    const fs::path p = o.output / name;
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    f.close();
    if (!f) throw UserError("cannot write " + p.string());
    rep.bytes += buf.size();
    ++rep.files;
  }
  return rep;
}

}  // namespace fb
