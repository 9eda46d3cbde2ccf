// A strict reader of the Prometheus text exposition format (0.0.4), for tests that scrape an
// endpoint: it checks the grammar and the rules a scraper relies on and returns the samples.
//
// Checked: every line is a "# HELP", a "# TYPE" or a sample (or empty); HELP and TYPE come at
// most once per family and before its samples; every sample belongs to a family with a TYPE
// (histogram samples through their _bucket/_sum/_count suffixes); a family's samples are
// contiguous; label syntax with escapes; values parse as floats (+Inf, -Inf, NaN allowed);
// histogram buckets are cumulative (non-decreasing in le order), end with le="+Inf", and
// +Inf equals _count.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace etlc::testing {

struct PromSample {
  std::string name;  // as written (with _bucket/_sum/_count for histograms)
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string name;
  std::string type;  // counter, gauge, histogram, summary, untyped
  std::string help;
  std::vector<PromSample> samples;
};

struct PromText {
  std::map<std::string, PromFamily> families;
  // Sum of the samples named exactly `name` (over all label sets).
  double sum(const std::string& name) const;
};

// Throws std::runtime_error naming the line and the rule it breaks.
PromText parse_prometheus_text(const std::string& text);

}  // namespace etlc::testing
