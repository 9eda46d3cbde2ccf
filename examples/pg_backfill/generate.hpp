// `pg-backfill generate`: a source table with sparse ids and dense hot ranges, the shape that
// defeats planning by id span (most rows sit in a few narrow id ranges, the rest are scattered
// over a range 10^6 times wider). Deterministic: the same seed gives the same rows.
#pragma once

#include <cstdint>
#include <string>

namespace pgb {

struct GenerateOptions {
  std::string pg;     // database URL
  std::string table;  // replaced if it exists
  std::uint64_t rows = 100'000;
  std::uint64_t seed = 1;
  std::uint32_t clusters = 6;  // dense hot ranges holding 70 % of the rows
};

struct GenerateReport {
  std::uint64_t rows = 0;
  std::int64_t min_id = 0, max_id = 0;
  std::uint64_t dense_rows = 0;  // rows inside the hot ranges
};

// The ids (sorted, unique) and the payload of an id, as generate writes them.
std::string payload_for(std::uint64_t seed, std::int64_t id);

// Drops and recreates the table, fills it with COPY, ANALYZEs it. Throws UserError / PgError.
GenerateReport generate(const GenerateOptions& options);

}  // namespace pgb
