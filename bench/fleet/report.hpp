// What a scenario run produces: headline figures (named numbers, compared across runs and
// versions), a detail object, and table rows for people. main() prints the table, or with --json
// one stable JSON document (schema "fleet_bench/1": keys are only ever added, never renamed).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace etlc::bench {

using Json = nlohmann::ordered_json;

struct Result {
  // Named figures in display order, e.g. {"handoff_ms_p50", 0.41}. Units in the name.
  std::vector<std::pair<std::string, double>> headline;
  Json detail = Json::object();
  // Table: a header row and data rows (already formatted).
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;  // printed under the table (what limited a figure, warnings)

  void add(std::string name, double value) { headline.emplace_back(std::move(name), value); }
};

void print_table(const std::vector<std::string>& columns,
                 const std::vector<std::vector<std::string>>& rows);
std::string fmt_num(double v, int decimals = 2);

}  // namespace etlc::bench
