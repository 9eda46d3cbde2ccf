// Tables of projection runs (projection.hpp) and the growth laws fitted to them.
//
// Every cell is a measured number unless the run of its (watches, members) was refused as too
// large: then it is a power law a * members^b fitted by least squares on log-log over the
// measured sizes of the same watch mode (at least two), and printed as "~value*". The fit
// table gives each law with its residuals (measured / fitted) so the reader can judge it.
#pragma once

#include <string>
#include <vector>

#include "projection.hpp"

namespace etlc::sim {

struct PowerLaw {
  double a = 0, b = 0;
  std::vector<double> residuals;  // measured / fitted, per measured point, in size order
  bool ok = false;                // two or more positive points
  double at(double members) const;
};

// Fits y = a * x^b to the points with y > 0; ok = false if fewer than two such points.
PowerLaw fit_power_law(const std::vector<double>& x, const std::vector<double>& y);

// A configuration that was not run, and why.
struct Refused {
  int members = 0;
  bool targeted = false;
  std::string why;
};

// Markdown: per phase a table of sizes x watch modes, the per-kind totals, the limits (leader
// CPU per assignment, view memory, NATS resources) and the fitted laws.
std::string markdown_report(const std::vector<ProjectionResult>& runs,
                            const std::vector<Refused>& refused);

// One CSV row per (run, phase, member): every count, for further analysis.
std::string csv_report(const std::vector<ProjectionResult>& runs);

}  // namespace etlc::sim
