// Unit tests of the metrics registry (include/etlc/metrics.hpp), including a small parser that
// checks rendered text against the Prometheus text exposition grammar (format 0.0.4).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "etlc/metrics.hpp"
#include "records/generators.hpp"

namespace etlc {
namespace {

// --- a strict parser of the exposition format, independent of the renderer ----------------------

struct Sample {
  std::string name;
  Labels labels;  // in text order
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> help;  // unescaped
  std::map<std::string, std::string> type;
  std::vector<Sample> samples;
};

class LineParser {
 public:
  explicit LineParser(std::string_view line) : s_(line) {}

  bool done() const { return i_ == s_.size(); }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool eat(std::string_view word) {
    if (s_.substr(i_).starts_with(word)) {
      i_ += word.size();
      return true;
    }
    return false;
  }
  // [a-zA-Z_:][a-zA-Z0-9_:]* (metric) or [a-zA-Z_][a-zA-Z0-9_]* (label).
  std::optional<std::string> name(bool metric) {
    const std::size_t start = i_;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      const bool alpha =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
      const bool digit = c >= '0' && c <= '9';
      if (!(alpha || (digit && i_ > start))) break;
      ++i_;
    }
    if (i_ == start) return std::nullopt;
    return std::string(s_.substr(start, i_ - start));
  }
  // Rest of the line as help text: only \\ and \n escapes are allowed.
  std::optional<std::string> help_text() {
    std::string out;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ == s_.size()) return std::nullopt;
      const char e = s_[i_++];
      if (e == '\\') {
        out.push_back('\\');
      } else if (e == 'n') {
        out.push_back('\n');
      } else {
        return std::nullopt;
      }
    }
    return out;
  }
  // "..." with \\, \" and \n escapes.
  std::optional<std::string> quoted() {
    if (!eat('"')) return std::nullopt;
    std::string out;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ == s_.size()) return std::nullopt;
      const char e = s_[i_++];
      if (e == '\\' || e == '"') {
        out.push_back(e);
      } else if (e == 'n') {
        out.push_back('\n');
      } else {
        return std::nullopt;
      }
    }
    return std::nullopt;
  }
  // A Go ParseFloat-compatible number or +Inf / -Inf / NaN.
  std::optional<double> value() {
    if (eat("+Inf")) return std::numeric_limits<double>::infinity();
    if (eat("-Inf")) return -std::numeric_limits<double>::infinity();
    if (eat("NaN")) return std::numeric_limits<double>::quiet_NaN();
    const std::size_t end = std::min(s_.find(' ', i_), s_.size());
    const std::string_view tok = s_.substr(i_, end - i_);
    if (tok.empty()) return std::nullopt;
    double v = 0;
    auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec != std::errc() || ptr != tok.data() + tok.size()) return std::nullopt;
    i_ = end;
    return v;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

// Parses `text`; returns an error naming the first bad line, or nullopt.
std::optional<std::string> parse_exposition(const std::string& text, Exposition& out) {
  if (!text.empty() && text.back() != '\n') return "text does not end with a newline";
  std::string current_family;
  std::set<std::string> sampled;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    const std::string where = "line " + std::to_string(line_no) + " '" + line + "': ";
    LineParser p(line);
    if (p.eat("# HELP ")) {
      auto n = p.name(true);
      if (!n || !p.eat(' ')) return where + "bad HELP";
      auto h = p.help_text();
      if (!h) return where + "bad escape in HELP";
      if (!out.help.emplace(*n, *h).second) return where + "second HELP for " + *n;
      continue;
    }
    if (p.eat("# TYPE ")) {
      auto n = p.name(true);
      if (!n || !p.eat(' ')) return where + "bad TYPE";
      std::string t;
      for (const char* k : {"counter", "gauge", "histogram", "summary", "untyped"}) {
        if (p.eat(std::string_view(k))) t = k;
      }
      if (t.empty() || !p.done()) return where + "unknown type";
      if (!out.type.emplace(*n, t).second) return where + "second TYPE for " + *n;
      if (sampled.count(*n) != 0) return where + "TYPE after samples of " + *n;
      current_family = *n;
      continue;
    }
    if (line.starts_with("#")) return where + "unexpected comment";
    Sample s;
    auto n = p.name(true);
    if (!n) return where + "bad metric name";
    s.name = *n;
    if (p.eat('{')) {
      while (!p.eat('}')) {
        auto ln = p.name(false);
        if (!ln || !p.eat('=')) return where + "bad label name";
        auto lv = p.quoted();
        if (!lv) return where + "bad label value";
        s.labels.emplace_back(*ln, *lv);
        if (!p.eat(',')) {
          if (!p.eat('}')) return where + "expected ',' or '}'";
          break;
        }
      }
    }
    if (!p.eat(' ')) return where + "expected a space before the value";
    auto v = p.value();
    if (!v) return where + "bad value";
    if (!p.done()) return where + "trailing text";
    // The sample must belong to the family most recently TYPE'd.
    const auto& type = out.type[current_family];
    bool belongs = s.name == current_family;
    if (type == "histogram") {
      belongs = s.name == current_family + "_bucket" || s.name == current_family + "_sum" ||
                s.name == current_family + "_count";
    }
    if (current_family.empty() || !belongs) return where + "sample outside its family";
    sampled.insert(current_family);
    s.value = *v;
    out.samples.push_back(std::move(s));
  }
  return std::nullopt;
}

Exposition parse_or_fail(const std::string& text) {
  Exposition e;
  auto err = parse_exposition(text, e);
  EXPECT_FALSE(err) << *err << "\n" << text;
  return e;
}

// --- tests ---------------------------------------------------------------------------------------

const std::vector<double> kBounds = {0.5, 1};

void fill_small_registry(MetricsRegistry& reg) {
  reg.counter("etlc_acquisitions_total", "Splits acquired", {{"kind", "takeover"}}).inc();
  reg.counter("etlc_acquisitions_total", "Splits acquired", {{"kind", "fresh"}}).inc(3);
  reg.gauge("etlc_owned", "Splits owned").set(2.5);
  auto& h = reg.histogram("etlc_latency_seconds", "Store op latency", kBounds, {{"op", "get"}});
  for (double v : {0.25, 0.5, 0.75, 3.0}) h.observe(v);
}

TEST(Metrics, RendersGoldenText) {
  MetricsRegistry reg;
  fill_small_registry(reg);
  EXPECT_EQ(reg.render_prometheus(),
            "# HELP etlc_acquisitions_total Splits acquired\n"
            "# TYPE etlc_acquisitions_total counter\n"
            "etlc_acquisitions_total{kind=\"fresh\"} 3\n"
            "etlc_acquisitions_total{kind=\"takeover\"} 1\n"
            "# HELP etlc_latency_seconds Store op latency\n"
            "# TYPE etlc_latency_seconds histogram\n"
            "etlc_latency_seconds_bucket{op=\"get\",le=\"0.5\"} 2\n"
            "etlc_latency_seconds_bucket{op=\"get\",le=\"1\"} 3\n"
            "etlc_latency_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"
            "etlc_latency_seconds_sum{op=\"get\"} 4.5\n"
            "etlc_latency_seconds_count{op=\"get\"} 4\n"
            "# HELP etlc_owned Splits owned\n"
            "# TYPE etlc_owned gauge\n"
            "etlc_owned 2.5\n");
  parse_or_fail(reg.render_prometheus());
}

TEST(Metrics, EmptyRegistryRendersNothing) {
  MetricsRegistry reg;
  EXPECT_EQ(reg.render_prometheus(), "");
  EXPECT_TRUE(reg.snapshot().families.empty());
}

TEST(Metrics, EscapesHelpAndLabelValues) {
  MetricsRegistry reg;
  reg.counter("c", "a \\ backslash\nand \"quotes\"", {{"path", "C:\\dir \"x\"\nnext"}}).inc(2);
  const std::string text = reg.render_prometheus();
  EXPECT_EQ(text,
            "# HELP c a \\\\ backslash\\nand \"quotes\"\n"
            "# TYPE c counter\n"
            "c{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 2\n");
  const Exposition e = parse_or_fail(text);
  EXPECT_EQ(e.help.at("c"), "a \\ backslash\nand \"quotes\"");
  ASSERT_EQ(e.samples.size(), 1U);
  EXPECT_EQ(e.samples[0].labels, (Labels{{"path", "C:\\dir \"x\"\nnext"}}));
}

TEST(Metrics, LabelsAreSortedByNameWhateverTheCallOrder) {
  MetricsRegistry reg;
  Counter& a = reg.counter("ops_total", "Ops", {{"op", "get"}, {"result", "ok"}});
  Counter& b = reg.counter("ops_total", "Ops", {{"result", "ok"}, {"op", "get"}});
  EXPECT_EQ(&a, &b);
  a.inc();
  EXPECT_NE(reg.render_prometheus().find("ops_total{op=\"get\",result=\"ok\"} 1\n"),
            std::string::npos);
}

TEST(Metrics, HistogramBucketsAreCumulativeWithLeSemantics) {
  MetricsRegistry reg;
  const std::vector<double> bounds = {1, 2, 5};
  Histogram& h = reg.histogram("h", "H", bounds);
  // Exactly on a bound counts in that bucket (v <= le); -Inf in the first; +Inf and NaN in the
  // implicit +Inf bucket.
  for (double v : {-std::numeric_limits<double>::infinity(), 0.0, 1.0, 1.5, 2.0, 5.0, 5.5,
                   std::numeric_limits<double>::infinity()}) {
    h.observe(v);
  }
  HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.bucket_counts, (std::vector<std::uint64_t>{3, 2, 1, 2}));
  EXPECT_EQ(s.count, 8U);
  EXPECT_EQ(s.cumulative(0), 3U);
  EXPECT_EQ(s.cumulative(1), 5U);
  EXPECT_EQ(s.cumulative(2), 6U);
  EXPECT_EQ(s.cumulative(3), 8U);
  EXPECT_TRUE(std::isnan(s.sum));  // -Inf + +Inf

  Histogram& g = reg.histogram("g", "G", bounds);
  g.observe(std::nan(""));
  g.observe(4);
  EXPECT_EQ(g.snapshot().bucket_counts, (std::vector<std::uint64_t>{0, 0, 1, 1}));
  EXPECT_EQ(g.count(), 2U);

  const Exposition e = parse_or_fail(reg.render_prometheus());
  std::vector<double> h_buckets;
  for (const auto& sample : e.samples) {
    if (sample.name == "h_bucket") h_buckets.push_back(sample.value);
  }
  EXPECT_EQ(h_buckets, (std::vector<double>{3, 5, 6, 8}));
  EXPECT_NE(reg.render_prometheus().find("h_sum NaN\n"), std::string::npos);
}

TEST(Metrics, GaugesRenderSpecialAndExactValues) {
  MetricsRegistry reg;
  reg.gauge("a", "A").set(std::numeric_limits<double>::infinity());
  reg.gauge("b", "B").set(-std::numeric_limits<double>::infinity());
  reg.gauge("c", "C").set(std::nan(""));
  reg.gauge("d", "D").set(0.1);
  reg.gauge("e", "E").set(1e300);
  Gauge& f = reg.gauge("f", "F");
  f.set(10);
  f.add(-12.5);
  const std::string text = reg.render_prometheus();
  for (const char* line :
       {"a +Inf\n", "b -Inf\n", "c NaN\n", "d 0.1\n", "e 1e+300\n", "f -2.5\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  }
  parse_or_fail(text);
}

TEST(Metrics, ConcurrentUpdatesGiveExactTotals) {
  MetricsRegistry reg;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50'000;
  const std::vector<double> bounds = {10};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&reg, &bounds, t] {
      // Registration races too: every thread must get the same series.
      Counter& c = reg.counter("ops_total", "Ops", {{"op", "put"}});
      Counter& mine = reg.counter("per_thread_total", "Per thread", {{"t", std::to_string(t)}});
      Gauge& g = reg.gauge("level", "Level");
      Histogram& h = reg.histogram("sizes", "Sizes", bounds);
      for (int i = 0; i < kPerThread; ++i) {
        c.inc();
        mine.inc(2);
        g.add(1.0);
        h.observe(i % 2 == 0 ? 1.0 : 100.0);
      }
    });
  }
  for (auto& th : threads) th.join();
  const MetricsSnapshot snap = reg.snapshot();
  EXPECT_EQ(snap.counter("ops_total", {{"op", "put"}}), std::uint64_t{kThreads * kPerThread});
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(snap.counter("per_thread_total", {{"t", std::to_string(t)}}),
              std::uint64_t{2 * kPerThread});
  }
  EXPECT_EQ(snap.gauge("level"), double{kThreads * kPerThread});
  const HistogramSnapshot* h = snap.histogram("sizes");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->bucket_counts,
            (std::vector<std::uint64_t>{kThreads * kPerThread / 2, kThreads * kPerThread / 2}));
  EXPECT_EQ(h->sum, 101.0 * kThreads * kPerThread / 2);  // exact: small integers
}

TEST(Metrics, SnapshotFindsSeriesByNameAndLabels) {
  MetricsRegistry reg;
  fill_small_registry(reg);
  const MetricsSnapshot snap = reg.snapshot();
  EXPECT_EQ(snap.counter("etlc_acquisitions_total", {{"kind", "fresh"}}), 3U);
  EXPECT_EQ(snap.counter("etlc_acquisitions_total", {{"kind", "other"}}), std::nullopt);
  EXPECT_EQ(snap.counter("etlc_owned"), std::nullopt);  // a gauge, not a counter
  EXPECT_EQ(snap.gauge("etlc_owned"), 2.5);
  EXPECT_EQ(snap.gauge("missing"), std::nullopt);
  const HistogramSnapshot* h = snap.histogram("etlc_latency_seconds", {{"op", "get"}});
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->count, 4U);
  EXPECT_EQ(h->sum, 4.5);
  EXPECT_EQ(h->upper_bounds, kBounds);
  EXPECT_EQ(snap.histogram("etlc_latency_seconds"), nullptr);  // labels must match
  ASSERT_EQ(snap.families.size(), 3U);
  EXPECT_EQ(snap.families[0].name, "etlc_acquisitions_total");
  EXPECT_EQ(snap.families[0].type, MetricType::counter);
  EXPECT_EQ(snap.families[0].help, "Splits acquired");
}

TEST(Metrics, ReferencesStayValidAsTheRegistryGrows) {
  MetricsRegistry reg;
  Counter& first = reg.counter("first_total", "First");
  first.inc(7);
  for (int i = 0; i < 2000; ++i) reg.gauge("g" + std::to_string(i), "G").set(i);
  EXPECT_EQ(&reg.counter("first_total", "First"), &first);
  first.inc();
  EXPECT_EQ(reg.snapshot().counter("first_total"), 8U);
}

// The message of the ConfigError `f` throws, or "" if it does not throw.
template <typename F>
std::string config_error(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Metrics, RejectsInvalidNames) {
  MetricsRegistry reg;
  for (const char* bad : {"", "1abc", "a-b", "a b", "caf\xC3\xA9", "a.b"}) {
    EXPECT_NE(config_error([&] { reg.counter(bad, "h"); }), "") << bad;
  }
  EXPECT_EQ(config_error([&] { reg.counter("a-b", "h"); }),
            "metric name 'a-b' does not match [a-zA-Z_:][a-zA-Z0-9_:]* (byte 1)");
  EXPECT_NE(config_error([&] { reg.counter(std::string(kMaxMetricNameBytes + 1, 'a'), "h"); }), "");
  for (const char* ok : {"a", "_a", ":a", "a:b_c9", "A"}) {
    EXPECT_EQ(config_error([&] { reg.counter(ok, "h"); }), "") << ok;
  }
  // Label names.
  for (const char* bad : {"", "1a", "a-b", "a:b"}) {
    EXPECT_NE(config_error([&] { reg.counter("x_total", "h", {{bad, "v"}}); }), "") << bad;
  }
  EXPECT_EQ(config_error([&] {
              reg.counter("x_total", "h", {{"__name", "v"}});
            }),
            "metric 'x_total': label name '__name' starts with '__' (reserved by Prometheus)");
  EXPECT_EQ(config_error([&] {
              reg.histogram("hh", "h", kBounds, {{"le", "1"}});
            }),
            "metric 'hh': label name 'le' is reserved for histogram buckets");
  EXPECT_EQ(config_error([&] {
              reg.counter("x_total", "h", {{"a", "1"}, {"a", "2"}});
            }),
            "metric 'x_total': label 'a' given twice");
  EXPECT_NE(config_error([&] { reg.counter("x_total", "h", {{"a", "\xC3"}}); }), "");
  EXPECT_NE(config_error([&] { reg.counter("x_total", "\xFF"); }), "");  // help not UTF-8
  // Nothing was registered by the failed calls.
  EXPECT_EQ(reg.snapshot().families.size(), 5U);
}

TEST(Metrics, RejectsConflictingRegistrations) {
  MetricsRegistry reg;
  reg.counter("ops_total", "Ops", {{"op", "get"}});
  EXPECT_EQ(config_error([&] {
              reg.gauge("ops_total", "Ops", {{"op", "get"}});
            }),
            "metric 'ops_total' is a counter, not a gauge");
  EXPECT_EQ(config_error([&] {
              reg.counter("ops_total", "Other", {{"op", "get"}});
            }),
            "metric 'ops_total' was registered with another help text");
  EXPECT_EQ(config_error([&] {
              reg.counter("ops_total", "Ops", {{"kind", "get"}});
            }),
            "metric 'ops_total' has labels (op), not (kind)");
  EXPECT_NE(config_error([&] { reg.counter("ops_total", "Ops"); }), "");
  reg.histogram("lat", "Latency", kBounds);
  const std::vector<double> other = {1, 2};
  EXPECT_EQ(config_error([&] { reg.histogram("lat", "Latency", other); }),
            "histogram 'lat' was registered with other bucket bounds");
  // Sample names share one namespace with family names.
  EXPECT_EQ(config_error([&] { reg.counter("lat_count", "c"); }),
            "metric 'lat_count' would clash with histogram 'lat'");
  EXPECT_EQ(config_error([&] { reg.gauge("lat_bucket", "c"); }),
            "metric 'lat_bucket' would clash with histogram 'lat'");
  reg.counter("q_sum", "c");
  EXPECT_EQ(config_error([&] { reg.histogram("q", "Q", kBounds); }),
            "metric 'q' would clash with metric 'q_sum'");
}

TEST(Metrics, RejectsInvalidBuckets) {
  MetricsRegistry reg;
  const auto bad = [&](std::vector<double> b) {
    return config_error([&] { reg.histogram("h", "h", b); });
  };
  EXPECT_NE(bad({}), "");
  EXPECT_NE(bad({2, 1}), "");
  EXPECT_NE(bad({1, 1}), "");
  EXPECT_NE(bad({1, std::nan("")}), "");
  EXPECT_NE(bad({1, std::numeric_limits<double>::infinity()}), "");
  EXPECT_NE(bad(std::vector<double>(kMaxHistogramBuckets + 1, 1.0)), "");
  const std::vector<double> unsorted = {2, 1};
  EXPECT_THROW(Histogram{unsorted}, ConfigError);  // direct construction validates too
  EXPECT_EQ(exponential_buckets(0.001, 10, 4), (std::vector<double>{0.001, 0.01, 0.1, 1}));
  EXPECT_EQ(linear_buckets(0, 5, 3), (std::vector<double>{0, 5, 10}));
  EXPECT_THROW(exponential_buckets(0, 2, 3), ConfigError);
  EXPECT_THROW(exponential_buckets(1, 1, 3), ConfigError);
  EXPECT_THROW(exponential_buckets(1e300, 1e10, 3), ConfigError);  // overflows to +Inf
  EXPECT_THROW(linear_buckets(0, 0, 3), ConfigError);
  EXPECT_THROW(linear_buckets(0, 1, 0), ConfigError);
}

TEST(Metrics, EnforcesSeriesAndLabelLimits) {
  MetricsRegistry reg;
  Labels many;
  for (std::size_t i = 0; i <= kMaxMetricLabels; ++i)
    many.emplace_back("l" + std::to_string(i), "v");
  EXPECT_NE(config_error([&] { reg.counter("c_total", "c", many); }), "");
  EXPECT_NE(config_error([&] {
              reg.counter("c_total", "c", {{"l", std::string(kMaxLabelValueBytes + 1, 'v')}});
            }),
            "");
  for (std::size_t i = 0; i < kMaxMetricSeries; ++i) {
    reg.counter("series_total", "s", {{"i", std::to_string(i)}});
  }
  EXPECT_EQ(config_error([&] {
              reg.counter("series_total", "s", {{"i", "one more"}});
            }),
            "metric 'series_total': registry already holds kMaxMetricSeries (10000) series");
  EXPECT_EQ(config_error([&] { reg.gauge("another", "s"); }),
            "metric 'another': registry already holds kMaxMetricSeries (10000) series");
  // Existing series are still returned.
  EXPECT_EQ(config_error([&] { reg.counter("series_total", "s", {{"i", "7"}}).inc(); }), "");
}

// Rendering then parsing recovers every label value and every gauge value exactly, whatever the
// bytes (quotes, backslashes, newlines, multi-byte UTF-8) and whatever the double.
RC_GTEST_PROP(MetricsProperties, RenderedTextParsesBackExactly, ()) {
  MetricsRegistry reg;
  const auto values =
      *rc::gen::container<std::set<std::string>>(rc::gen::map(testgen::text(), [](std::string s) {
        if (s.size() > kMaxLabelValueBytes) s.resize(0);
        return s;
      }));
  std::map<std::string, double> expected;
  for (const auto& v : values) {
    const double d =
        *rc::gen::oneOf(rc::gen::arbitrary<double>(),
                        rc::gen::element(0.0, -0.0, 1e-310, std::numeric_limits<double>::max(),
                                         std::numeric_limits<double>::infinity(),
                                         -std::numeric_limits<double>::infinity(),
                                         std::numeric_limits<double>::quiet_NaN()));
    reg.gauge("g", "gauge with \\ and\nnewline", {{"v", v}}).set(d);
    expected[v] = d;
  }
  const std::string text = reg.render_prometheus();
  Exposition e;
  const auto err = parse_exposition(text, e);
  RC_ASSERT(!err.has_value());
  RC_ASSERT(e.samples.size() == expected.size());
  for (const auto& s : e.samples) {
    RC_ASSERT(s.labels.size() == 1U);
    const auto it = expected.find(s.labels[0].second);
    RC_ASSERT(it != expected.end());
    if (std::isnan(it->second)) {
      RC_ASSERT(std::isnan(s.value));
    } else {
      RC_ASSERT(
          std::memcmp(&s.value, &it->second, sizeof(double)) == 0 ||
          (s.value == 0 && it->second == 0 && std::signbit(s.value) == std::signbit(it->second)));
    }
  }
}

}  // namespace
}  // namespace etlc
