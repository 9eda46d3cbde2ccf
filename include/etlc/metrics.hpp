// Metrics: counters, gauges and histograms in a registry that renders the Prometheus text
// exposition format (version 0.0.4), with a snapshot API for programmatic reads.
//
// Model: a *family* is a metric name with one type, one help text, one set of label names (and,
// for histograms, one set of bucket bounds). A *series* is a family plus one tuple of label
// values. The registry creates a series on first use and hands out a reference that stays valid
// for the registry's whole lifetime, so hot paths register once and then only touch atomics.
//
// Thread safety: Counter, Gauge and Histogram updates and reads are lock-free atomic operations
// (relaxed ordering: metrics order nothing) and may run from any thread. MetricsRegistry methods
// may be called from any thread; registration, snapshot() and render_prometheus() take the
// registry's mutex (they never block updates). A snapshot taken while updates are in flight may
// mix old and new values across series, and a histogram's sum may lag its buckets by the
// observations in flight; each single value is exact.
//
// Limits (ConfigError past them, naming the limit): kMaxMetricSeries series per registry,
// kMaxMetricLabels labels per series, kMaxHistogramBuckets bounds per histogram,
// kMaxMetricNameBytes per metric or label name, kMaxLabelValueBytes per label value,
// kMaxMetricHelpBytes per help text.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "etlc/detail/mutex.hpp"
#include "etlc/errors.hpp"

namespace etlc {

inline constexpr std::size_t kMaxMetricSeries = 10'000;
inline constexpr std::size_t kMaxMetricLabels = 8;
inline constexpr std::size_t kMaxHistogramBuckets = 64;
inline constexpr std::size_t kMaxMetricNameBytes = 200;
inline constexpr std::size_t kMaxLabelValueBytes = 1024;
inline constexpr std::size_t kMaxMetricHelpBytes = 1024;

// Label (name, value) pairs of one series. The order callers pass them in does not matter: the
// registry sorts them by name. Names match [a-zA-Z_][a-zA-Z0-9_]*, must not start with "__"
// (reserved by Prometheus), must be unique within a series, and "le" is reserved for histogram
// buckets. Values are any valid UTF-8.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType : std::uint8_t { counter, gauge, histogram };
std::string_view to_string(MetricType type) noexcept;

// A monotonically increasing count. Wraps modulo 2^64 (not reachable in practice).
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void inc(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// A value that goes up and down.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void set(double v) noexcept { value_.store(v, std::memory_order_relaxed); }
  void add(double d) noexcept { value_.fetch_add(d, std::memory_order_relaxed); }
  double value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Point-in-time copy of a histogram.
struct HistogramSnapshot {
  std::vector<double> upper_bounds;  // finite, strictly increasing; +Inf is implicit
  // Per bucket, NOT cumulative: bucket_counts[i] counts observations v with
  // upper_bounds[i-1] < v <= upper_bounds[i]; the last element (index upper_bounds.size())
  // counts v > upper_bounds.back() and NaN. Size upper_bounds.size() + 1.
  std::vector<std::uint64_t> bucket_counts;
  std::uint64_t count = 0;  // sum of bucket_counts
  double sum = 0.0;         // sum of observed values

  // Observations <= upper_bounds[i] (i == upper_bounds.size() means +Inf, i.e. count).
  std::uint64_t cumulative(std::size_t i) const noexcept;
};

// Counts observations into fixed buckets (Prometheus `le` semantics: v <= bound).
class Histogram {
 public:
  // Throws ConfigError unless `upper_bounds` holds 1 to kMaxHistogramBuckets finite, strictly
  // increasing values. Usually made by MetricsRegistry::histogram, which exposes it.
  explicit Histogram(std::span<const double> upper_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // O(log buckets), lock-free. NaN lands in the +Inf bucket and makes the sum NaN.
  void observe(double v) noexcept;

  std::uint64_t count() const noexcept;
  double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }
  const std::vector<double>& upper_bounds() const noexcept { return bounds_; }
  HistogramSnapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<double> sum_{0.0};
};

// Bucket bounds start, start*factor, ... (count of them). ConfigError unless start > 0,
// factor > 1 and 1 <= count <= kMaxHistogramBuckets.
std::vector<double> exponential_buckets(double start, double factor, std::size_t count);
// Bucket bounds start, start+width, ... (count of them). ConfigError unless width > 0 and
// 1 <= count <= kMaxHistogramBuckets.
std::vector<double> linear_buckets(double start, double width, std::size_t count);

// Point-in-time copy of one series.
struct MetricSeriesSnapshot {
  Labels labels;                // sorted by name
  std::uint64_t counter = 0;    // counters only
  double gauge = 0.0;           // gauges only
  HistogramSnapshot histogram;  // histograms only
};

struct MetricFamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::counter;
  std::vector<MetricSeriesSnapshot> series;  // sorted by label values
};

// Point-in-time copy of a registry, for tests and tools that read values without parsing text.
struct MetricsSnapshot {
  std::vector<MetricFamilySnapshot> families;  // sorted by name

  // The series (name, labels) if it exists (labels in any order). Null otherwise.
  const MetricSeriesSnapshot* find(std::string_view name, const Labels& labels = {}) const;
  // Typed reads: nullopt / null if the series is absent or has another type.
  std::optional<std::uint64_t> counter(std::string_view name, const Labels& labels = {}) const;
  std::optional<double> gauge(std::string_view name, const Labels& labels = {}) const;
  const HistogramSnapshot* histogram(std::string_view name, const Labels& labels = {}) const;
};

// A set of metric families. Not copyable or movable (it hands out references into itself).
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Each returns the series (name, labels), creating the family and/or the series on first use.
  // The reference stays valid for the registry's lifetime. Throws ConfigError (registering
  // nothing) when: the name does not match [a-zA-Z_:][a-zA-Z0-9_:]*; a label breaks the rules
  // of Labels; the family exists with another type, another help text, other label names or
  // (histograms) other bounds; a limit would be exceeded. Histogram bounds must be finite and
  // strictly increasing (at least one; +Inf is added implicitly). Takes the registry mutex:
  // call once and keep the reference rather than looking a series up on every update.
  Counter& counter(std::string_view name, std::string_view help, Labels labels = {})
      ETLC_EXCLUDES(mu_);
  Gauge& gauge(std::string_view name, std::string_view help, Labels labels = {}) ETLC_EXCLUDES(mu_);
  Histogram& histogram(std::string_view name, std::string_view help,
                       std::span<const double> upper_bounds, Labels labels = {}) ETLC_EXCLUDES(mu_);

  // Every family and series, sorted (families by name, series by label values).
  MetricsSnapshot snapshot() const ETLC_EXCLUDES(mu_);

  // Text exposition format 0.0.4: per family "# HELP" and "# TYPE" lines once, then its series
  // (families sorted by name, series by label values). Help escapes \ and newline; label values
  // escape \, " and newline. Histograms render name_bucket{...,le="b"} cumulative counts for
  // every bound and le="+Inf", then name_sum and name_count. A family with no series renders
  // only its HELP and TYPE lines. Values: integers for counters and bucket counts, shortest
  // round-trip decimal for doubles, "+Inf", "-Inf", "NaN".
  std::string render_prometheus() const ETLC_EXCLUDES(mu_);

 private:
  struct Family;
  struct Series;
  Series& series(std::string_view name, std::string_view help, MetricType type,
                 std::span<const double> upper_bounds, Labels labels) ETLC_EXCLUDES(mu_);

  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Family>, std::less<>> families_ ETLC_GUARDED_BY(mu_);
  std::size_t series_count_ ETLC_GUARDED_BY(mu_) = 0;
};

}  // namespace etlc
