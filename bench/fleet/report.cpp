#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace etlc::bench {

std::string fmt_num(double v, int decimals) {
  if (std::isnan(v)) return "-";
  return fmt::format("{:.{}f}", v, decimals);
}

void print_table(const std::vector<std::string>& columns,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(columns.size(), 0);
  for (std::size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (const auto& r : rows) {
    for (std::size_t c = 0; c < r.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      out +=
          c == 0 ? fmt::format("{:<{}}", cell, width[c]) : fmt::format("  {:>{}}", cell, width[c]);
    }
    fmt::print("{}\n", out);
  };
  line(columns);
  std::string rule;
  for (std::size_t c = 0; c < width.size(); ++c) rule += std::string(width[c] + (c ? 2 : 0), '-');
  fmt::print("{}\n", rule);
  for (const auto& r : rows) line(r);
}

}  // namespace etlc::bench
