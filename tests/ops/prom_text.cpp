#include "prom_text.hpp"

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>

namespace etlc::testing {

namespace {

[[noreturn]] void fail(std::size_t line_no, const std::string& line, const std::string& why) {
  throw std::runtime_error("line " + std::to_string(line_no) + " (" + line + "): " + why);
}

bool name_char(char c, bool first) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  return alpha || (!first && c >= '0' && c <= '9');
}

double parse_value(const std::string& s, std::size_t n, const std::string& line) {
  if (s == "+Inf") return INFINITY;
  if (s == "-Inf") return -INFINITY;
  if (s == "NaN") return NAN;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) fail(n, line, "bad value '" + s + "'");
  return v;
}

// The family a sample name belongs to, given the declared types.
std::string family_of(const std::string& sample, const std::map<std::string, PromFamily>& fams) {
  if (fams.count(sample)) return sample;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string sfx(suffix);
    if (sample.size() > sfx.size() &&
        sample.compare(sample.size() - sfx.size(), sfx.size(), sfx) == 0) {
      const std::string base = sample.substr(0, sample.size() - sfx.size());
      auto it = fams.find(base);
      if (it != fams.end() && it->second.type == "histogram") return base;
    }
  }
  return {};
}

PromSample parse_sample(const std::string& line, std::size_t n) {
  PromSample s;
  std::size_t i = 0;
  while (i < line.size() && name_char(line[i], i == 0)) ++i;
  if (i == 0) fail(n, line, "sample without a metric name");
  s.name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      std::size_t start = i;
      while (i < line.size() && name_char(line[i], i == start)) ++i;
      if (i == start) fail(n, line, "bad label name");
      const std::string lname = line.substr(start, i - start);
      if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
        fail(n, line, "expected =\"");
      i += 2;
      std::string value;
      for (;; ++i) {
        if (i >= line.size()) fail(n, line, "unterminated label value");
        if (line[i] == '"') break;
        if (line[i] == '\\') {
          if (++i >= line.size()) fail(n, line, "dangling escape");
          if (line[i] == 'n') {
            value += '\n';
          } else if (line[i] == '\\' || line[i] == '"') {
            value += line[i];
          } else {
            fail(n, line, "bad escape");
          }
        } else {
          value += line[i];
        }
      }
      ++i;  // closing quote
      if (!s.labels.emplace(lname, value).second) fail(n, line, "duplicate label " + lname);
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) fail(n, line, "unterminated label set");
    ++i;  // '}'
  }
  if (i >= line.size() || line[i] != ' ') fail(n, line, "expected a space before the value");
  const std::string rest = line.substr(i + 1);
  const std::size_t space = rest.find(' ');  // an optional timestamp may follow
  s.value = parse_value(rest.substr(0, space), n, line);
  return s;
}

void check_histogram(const PromFamily& f) {
  // Group by the labels other than le.
  std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
  std::map<std::map<std::string, std::string>, double> counts;
  for (const PromSample& s : f.samples) {
    auto labels = s.labels;
    if (s.name == f.name + "_bucket") {
      auto le = labels.find("le");
      if (le == labels.end()) throw std::runtime_error(f.name + ": bucket without le");
      const double bound =
          le->second == "+Inf" ? INFINITY : std::strtod(le->second.c_str(), nullptr);
      labels.erase(le);
      buckets[labels].emplace_back(bound, s.value);
    } else if (s.name == f.name + "_count") {
      counts[labels] = s.value;
    }
  }
  for (const auto& [labels, bs] : buckets) {
    for (std::size_t i = 1; i < bs.size(); ++i) {
      if (!(bs[i].first > bs[i - 1].first))
        throw std::runtime_error(f.name + ": le not increasing");
      if (bs[i].second < bs[i - 1].second)
        throw std::runtime_error(f.name + ": buckets not cumulative");
    }
    if (bs.empty() || !std::isinf(bs.back().first))
      throw std::runtime_error(f.name + ": no +Inf bucket");
    auto c = counts.find(labels);
    if (c == counts.end() || c->second != bs.back().second) {
      throw std::runtime_error(f.name + ": +Inf bucket differs from _count");
    }
  }
}

}  // namespace

double PromText::sum(const std::string& name) const {
  double total = 0;
  for (const auto& [fname, f] : families) {
    for (const PromSample& s : f.samples) {
      if (s.name == name) total += s.value;
    }
  }
  return total;
}

PromText parse_prometheus_text(const std::string& text) {
  PromText out;
  std::istringstream in(text);
  std::string line;
  std::size_t n = 0;
  std::string current;  // family whose samples are being read
  std::set<std::string> finished;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const bool help = line[2] == 'H';
      const std::string rest = line.substr(7);
      const std::size_t sp = rest.find(' ');
      const std::string name = rest.substr(0, sp);
      const std::string arg = sp == std::string::npos ? "" : rest.substr(sp + 1);
      PromFamily& f = out.families[name];
      if (!f.samples.empty()) fail(n, line, "HELP/TYPE after the family's samples");
      f.name = name;
      if (help) {
        if (!f.help.empty()) fail(n, line, "second HELP");
        f.help = arg;
      } else {
        static const std::set<std::string> kTypes{"counter", "gauge", "histogram", "summary",
                                                  "untyped"};
        if (!f.type.empty()) fail(n, line, "second TYPE");
        if (!kTypes.count(arg)) fail(n, line, "unknown type");
        f.type = arg;
      }
      continue;
    }
    if (line[0] == '#') continue;  // other comments are allowed
    PromSample s = parse_sample(line, n);
    const std::string fam = family_of(s.name, out.families);
    if (fam.empty() || out.families[fam].type.empty()) fail(n, line, "sample without a TYPE");
    if (fam != current) {
      if (finished.count(fam)) fail(n, line, "family samples are not contiguous");
      if (!current.empty()) finished.insert(current);
      current = fam;
    }
    out.families[fam].samples.push_back(std::move(s));
  }
  for (const auto& [name, f] : out.families) {
    if (f.type.empty()) throw std::runtime_error(name + ": HELP without TYPE");
    if (f.type == "histogram") check_histogram(f);
  }
  return out;
}

}  // namespace etlc::testing
