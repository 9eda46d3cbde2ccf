// MetricsRegistry and the Prometheus text exposition format 0.0.4 (see include/etlc/metrics.hpp).
#include "etlc/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <iterator>

#include "core/utf8.hpp"

namespace etlc {

namespace {

bool is_alpha_(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

void check_metric_name(std::string_view name) {
  if (name.empty()) throw ConfigError("metric name is empty");
  if (name.size() > kMaxMetricNameBytes) {
    throw ConfigError(fmt::format("metric name of {} bytes exceeds kMaxMetricNameBytes ({})",
                                  name.size(), kMaxMetricNameBytes));
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(is_alpha_(c) || c == ':' || (i > 0 && is_digit(c)))) {
      throw ConfigError(
          fmt::format("metric name '{}' does not match [a-zA-Z_:][a-zA-Z0-9_:]* (byte {})",
                      core::is_valid_utf8(name) ? name : std::string_view("<not UTF-8>"), i));
    }
  }
}

void check_utf8(std::string_view what, std::string_view s, std::size_t max_bytes,
                std::string_view limit_name) {
  if (s.size() > max_bytes) {
    throw ConfigError(
        fmt::format("{} of {} bytes exceeds {} ({})", what, s.size(), limit_name, max_bytes));
  }
  if (auto p = core::find_utf8_problem(s)) {
    throw ConfigError(
        fmt::format("{} is not valid UTF-8: {} at byte {}", what, p->rule, p->offset));
  }
}

// Sorts `labels` by name and checks every rule of etlc::Labels.
void normalize_labels(std::string_view metric, MetricType type, Labels& labels) {
  if (labels.size() > kMaxMetricLabels) {
    throw ConfigError(fmt::format("metric '{}': {} labels exceed kMaxMetricLabels ({})", metric,
                                  labels.size(), kMaxMetricLabels));
  }
  for (const auto& [name, value] : labels) {
    bool ok = !name.empty() && name.size() <= kMaxMetricNameBytes;
    for (std::size_t i = 0; ok && i < name.size(); ++i) {
      ok = is_alpha_(name[i]) || (i > 0 && is_digit(name[i]));
    }
    if (!ok) {
      throw ConfigError(fmt::format(
          "metric '{}': label name '{}' does not match [a-zA-Z_][a-zA-Z0-9_]* (at most {} bytes)",
          metric, core::is_valid_utf8(name) ? name : "<not UTF-8>", kMaxMetricNameBytes));
    }
    if (name.starts_with("__")) {
      throw ConfigError(fmt::format(
          "metric '{}': label name '{}' starts with '__' (reserved by Prometheus)", metric, name));
    }
    if (type == MetricType::histogram && name == "le") {
      throw ConfigError(
          fmt::format("metric '{}': label name 'le' is reserved for histogram buckets", metric));
    }
    check_utf8(fmt::format("metric '{}': value of label '{}'", metric, name), value,
               kMaxLabelValueBytes, "kMaxLabelValueBytes");
  }
  std::sort(labels.begin(), labels.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < labels.size(); ++i) {
    if (labels[i - 1].first == labels[i].first) {
      throw ConfigError(
          fmt::format("metric '{}': label '{}' given twice", metric, labels[i].first));
    }
  }
}

void check_bounds(std::string_view metric, std::span<const double> bounds) {
  if (bounds.empty() || bounds.size() > kMaxHistogramBuckets) {
    throw ConfigError(
        fmt::format("histogram '{}': {} bucket bounds; need 1 to kMaxHistogramBuckets ({})", metric,
                    bounds.size(), kMaxHistogramBuckets));
  }
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      throw ConfigError(fmt::format(
          "histogram '{}': bucket bound {} is not finite (+Inf is implicit)", metric, i));
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      throw ConfigError(fmt::format(
          "histogram '{}': bucket bounds must strictly increase (bound {})", metric, i));
    }
  }
}

// Shortest decimal that reads back as `v`, in a form Prometheus parsers accept.
std::string format_double(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  if (ec != std::errc()) return fmt::format("{}", v);  // cannot happen with 64 bytes
  return std::string(buf.data(), end);
}

void append_escaped_help(std::string& out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
}

void append_label_value(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
}

// `{a="x",b="y"}` (plus an optional le label), or "" with no labels at all.
void append_labels(std::string& out, const Labels& labels, const std::string* le = nullptr) {
  if (labels.empty() && le == nullptr) return;
  out.push_back('{');
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out.push_back(',');
    first = false;
    out += name;
    out += "=\"";
    append_label_value(out, value);
    out.push_back('"');
  }
  if (le != nullptr) {
    if (!first) out.push_back(',');
    out += "le=\"";
    out += *le;
    out.push_back('"');
  }
  out.push_back('}');
}

constexpr std::string_view kHistogramSuffixes[] = {"_bucket", "_sum", "_count"};

}  // namespace

std::string_view to_string(MetricType type) noexcept {
  switch (type) {
    case MetricType::counter:
      return "counter";
    case MetricType::gauge:
      return "gauge";
    case MetricType::histogram:
      return "histogram";
  }
  return "unknown";
}

// --- Histogram ---------------------------------------------------------------------------------

std::uint64_t HistogramSnapshot::cumulative(std::size_t i) const noexcept {
  std::uint64_t total = 0;
  for (std::size_t k = 0; k <= i && k < bucket_counts.size(); ++k) total += bucket_counts[k];
  return total;
}

Histogram::Histogram(std::span<const double> upper_bounds)
    : bounds_(upper_bounds.begin(), upper_bounds.end()),
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
  check_bounds("histogram", bounds_);
}

void Histogram::observe(double v) noexcept {
  // First bound >= v, i.e. the first bucket with v <= le. NaN compares false with everything,
  // so it is sent to +Inf explicitly.
  const std::size_t i =
      std::isnan(v) ? bounds_.size()
                    : static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                               bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::uint64_t Histogram::count() const noexcept {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
  }
  return total;
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot s;
  s.upper_bounds = bounds_;
  s.bucket_counts.reserve(bounds_.size() + 1);
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    s.bucket_counts.push_back(counts_[i].load(std::memory_order_relaxed));
    s.count += s.bucket_counts.back();
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> exponential_buckets(double start, double factor, std::size_t count) {
  if (!(start > 0) || !(factor > 1) || count == 0 || count > kMaxHistogramBuckets ||
      !std::isfinite(start) || !std::isfinite(factor)) {
    throw ConfigError(fmt::format(
        "exponential_buckets needs start > 0, factor > 1 and 1 <= count <= {} (got {}, {}, {})",
        kMaxHistogramBuckets, start, factor, count));
  }
  std::vector<double> out;
  double b = start;
  for (std::size_t i = 0; i < count; ++i, b *= factor) out.push_back(b);
  check_bounds("exponential_buckets", out);  // overflow to +Inf
  return out;
}

std::vector<double> linear_buckets(double start, double width, std::size_t count) {
  if (!(width > 0) || count == 0 || count > kMaxHistogramBuckets || !std::isfinite(start) ||
      !std::isfinite(width)) {
    throw ConfigError(
        fmt::format("linear_buckets needs width > 0 and 1 <= count <= {} (got {}, {}, {})",
                    kMaxHistogramBuckets, start, width, count));
  }
  std::vector<double> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(start + width * static_cast<double>(i));
  check_bounds("linear_buckets", out);  // width lost to rounding
  return out;
}

// --- snapshots -----------------------------------------------------------------------------------

const MetricSeriesSnapshot* MetricsSnapshot::find(std::string_view name,
                                                  const Labels& labels) const {
  auto fam = std::lower_bound(
      families.begin(), families.end(), name,
      [](const MetricFamilySnapshot& f, std::string_view n) { return f.name < n; });
  if (fam == families.end() || fam->name != name) return nullptr;
  Labels sorted = labels;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& s : fam->series) {
    if (s.labels == sorted) return &s;
  }
  return nullptr;
}

namespace {
const MetricFamilySnapshot* family_of(const MetricsSnapshot& snap, std::string_view name) {
  for (const auto& f : snap.families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}
}  // namespace

std::optional<std::uint64_t> MetricsSnapshot::counter(std::string_view name,
                                                      const Labels& labels) const {
  const auto* fam = family_of(*this, name);
  const auto* s = find(name, labels);
  if (fam == nullptr || s == nullptr || fam->type != MetricType::counter) return std::nullopt;
  return s->counter;
}

std::optional<double> MetricsSnapshot::gauge(std::string_view name, const Labels& labels) const {
  const auto* fam = family_of(*this, name);
  const auto* s = find(name, labels);
  if (fam == nullptr || s == nullptr || fam->type != MetricType::gauge) return std::nullopt;
  return s->gauge;
}

const HistogramSnapshot* MetricsSnapshot::histogram(std::string_view name,
                                                    const Labels& labels) const {
  const auto* fam = family_of(*this, name);
  const auto* s = find(name, labels);
  if (fam == nullptr || s == nullptr || fam->type != MetricType::histogram) return nullptr;
  return &s->histogram;
}

// --- the registry --------------------------------------------------------------------------------

struct MetricsRegistry::Series {
  Labels labels;  // sorted by name
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;

  static std::unique_ptr<Series> make(MetricType type, std::span<const double> upper_bounds,
                                      Labels series_labels) {
    auto s = std::make_unique<Series>();
    s->labels = std::move(series_labels);
    switch (type) {
      case MetricType::counter:
        s->counter = std::make_unique<Counter>();
        break;
      case MetricType::gauge:
        s->gauge = std::make_unique<Gauge>();
        break;
      case MetricType::histogram:
        s->histogram = std::make_unique<Histogram>(upper_bounds);
        break;
    }
    return s;
  }
};

struct MetricsRegistry::Family {
  using ByName = std::map<std::string, std::unique_ptr<Family>, std::less<>>;

  std::string name;
  std::string help;
  MetricType type = MetricType::counter;
  std::vector<std::string> label_names;  // sorted
  std::vector<double> bounds;            // histograms
  // Keyed by label values in label-name order, so iteration renders in a stable order.
  std::map<std::vector<std::string>, std::unique_ptr<Series>> series;

  static std::unique_ptr<Family> make(std::string_view metric, std::string_view help_text,
                                      MetricType metric_type, const std::vector<std::string>& names,
                                      std::span<const double> upper_bounds) {
    auto f = std::make_unique<Family>();
    f->name = std::string(metric);
    f->help = std::string(help_text);
    f->type = metric_type;
    f->label_names = names;
    if (metric_type == MetricType::histogram) {
      f->bounds.assign(upper_bounds.begin(), upper_bounds.end());
    }
    return f;
  }

  // A series of this family is asked for again: the type, help, label names and bucket bounds
  // must be the ones it was registered with (ConfigError).
  void check_same(std::string_view metric, std::string_view help_text, MetricType metric_type,
                  const std::vector<std::string>& names,
                  std::span<const double> upper_bounds) const {
    if (type != metric_type) {
      throw ConfigError(fmt::format("metric '{}' is a {}, not a {}", metric, to_string(type),
                                    to_string(metric_type)));
    }
    if (help != help_text) {
      throw ConfigError(fmt::format("metric '{}' was registered with another help text", metric));
    }
    if (label_names != names) {
      throw ConfigError(fmt::format("metric '{}' has labels ({}), not ({})", metric,
                                    fmt::join(label_names, ", "), fmt::join(names, ", ")));
    }
    if (metric_type == MetricType::histogram &&
        !std::equal(bounds.begin(), bounds.end(), upper_bounds.begin(), upper_bounds.end())) {
      throw ConfigError(
          fmt::format("histogram '{}' was registered with other bucket bounds", metric));
    }
  }

  // The exposition format puts every sample name in one namespace: a histogram "x" owns
  // x_bucket, x_sum and x_count, which no other family may be called (ConfigError).
  static void check_no_clash(const ByName& families, std::string_view metric,
                             MetricType metric_type) {
    std::vector<std::string> owned = {std::string(metric)};
    if (metric_type == MetricType::histogram) {
      for (auto suffix : kHistogramSuffixes)
        owned.push_back(std::string(metric) + std::string(suffix));
    }
    for (const auto& n : owned) {
      if (n != metric && families.count(n) != 0) {
        throw ConfigError(fmt::format("metric '{}' would clash with metric '{}'", metric, n));
      }
      for (auto suffix : kHistogramSuffixes) {
        if (!n.ends_with(suffix)) continue;
        auto base = families.find(std::string_view(n).substr(0, n.size() - suffix.size()));
        if (base != families.end() && base->first != metric &&
            base->second->type == MetricType::histogram) {
          throw ConfigError(
              fmt::format("metric '{}' would clash with histogram '{}'", metric, base->first));
        }
      }
    }
  }
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Series& MetricsRegistry::series(std::string_view name, std::string_view help,
                                                 MetricType type,
                                                 std::span<const double> upper_bounds,
                                                 Labels labels) {
  check_metric_name(name);
  check_utf8(fmt::format("help of metric '{}'", name), help, kMaxMetricHelpBytes,
             "kMaxMetricHelpBytes");
  normalize_labels(name, type, labels);
  if (type == MetricType::histogram) check_bounds(name, upper_bounds);
  std::vector<std::string> names;
  std::vector<std::string> values;
  for (auto& [n, v] : labels) {
    names.push_back(n);
    values.push_back(v);
  }

  MutexLock lock(mu_);
  auto fam_it = families_.find(name);
  Family* fam = fam_it == families_.end() ? nullptr : fam_it->second.get();
  if (fam != nullptr) {
    fam->check_same(name, help, type, names, upper_bounds);
    auto it = fam->series.find(values);
    if (it != fam->series.end()) return *it->second;
  } else {
    Family::check_no_clash(families_, name, type);
  }
  if (series_count_ >= kMaxMetricSeries) {
    throw ConfigError(
        fmt::format("metric '{}': registry already holds kMaxMetricSeries ({}) series", name,
                    kMaxMetricSeries));
  }

  auto s = Series::make(type, upper_bounds, std::move(labels));
  if (fam == nullptr) {
    auto f = Family::make(name, help, type, names, upper_bounds);
    fam = f.get();
    families_.emplace(std::string(name), std::move(f));
  }
  Series& ref = *s;
  fam->series.emplace(std::move(values), std::move(s));
  ++series_count_;
  return ref;
}

Counter& MetricsRegistry::counter(std::string_view name, std::string_view help, Labels labels) {
  return *series(name, help, MetricType::counter, {}, std::move(labels)).counter;
}

Gauge& MetricsRegistry::gauge(std::string_view name, std::string_view help, Labels labels) {
  return *series(name, help, MetricType::gauge, {}, std::move(labels)).gauge;
}

Histogram& MetricsRegistry::histogram(std::string_view name, std::string_view help,
                                      std::span<const double> upper_bounds, Labels labels) {
  return *series(name, help, MetricType::histogram, upper_bounds, std::move(labels)).histogram;
}

MetricsSnapshot MetricsRegistry::snapshot() const {
  MetricsSnapshot snap;
  MutexLock lock(mu_);
  snap.families.reserve(families_.size());
  for (const auto& [name, fam] : families_) {
    MetricFamilySnapshot f;
    f.name = fam->name;
    f.help = fam->help;
    f.type = fam->type;
    f.series.reserve(fam->series.size());
    for (const auto& [values, s] : fam->series) {
      MetricSeriesSnapshot ss;
      ss.labels = s->labels;
      if (s->counter) ss.counter = s->counter->value();
      if (s->gauge) ss.gauge = s->gauge->value();
      if (s->histogram) ss.histogram = s->histogram->snapshot();
      f.series.push_back(std::move(ss));
    }
    snap.families.push_back(std::move(f));
  }
  return snap;
}

std::string MetricsRegistry::render_prometheus() const {
  const MetricsSnapshot snap = snapshot();
  std::string out;
  for (const auto& fam : snap.families) {
    out += "# HELP ";
    out += fam.name;
    out.push_back(' ');
    append_escaped_help(out, fam.help);
    out += "\n# TYPE ";
    out += fam.name;
    out.push_back(' ');
    out += to_string(fam.type);
    out.push_back('\n');
    for (const auto& s : fam.series) {
      switch (fam.type) {
        case MetricType::counter:
          out += fam.name;
          append_labels(out, s.labels);
          out += fmt::format(" {}\n", s.counter);
          break;
        case MetricType::gauge:
          out += fam.name;
          append_labels(out, s.labels);
          out += fmt::format(" {}\n", format_double(s.gauge));
          break;
        case MetricType::histogram: {
          const HistogramSnapshot& h = s.histogram;
          std::uint64_t cumulative = 0;
          for (std::size_t i = 0; i < h.bucket_counts.size(); ++i) {
            cumulative += h.bucket_counts[i];
            const std::string le =
                i < h.upper_bounds.size() ? format_double(h.upper_bounds[i]) : "+Inf";
            out += fam.name;
            out += "_bucket";
            append_labels(out, s.labels, &le);
            out += fmt::format(" {}\n", cumulative);
          }
          out += fam.name;
          out += "_sum";
          append_labels(out, s.labels);
          out += fmt::format(" {}\n", format_double(h.sum));
          out += fam.name;
          out += "_count";
          append_labels(out, s.labels);
          out += fmt::format(" {}\n", h.count);
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace etlc
