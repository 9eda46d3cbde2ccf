// `pg-backfill verify`: compares the source table with the sink table row by row (both streamed in
// id order through cursors, merged on the client, so the two may live in different databases).
#pragma once

#include <cstdint>
#include <string>

namespace pgb {

struct VerifyOptions {
  std::string source_pg, sink_pg;
  std::string table, sink_table;
};

struct VerifyReport {
  std::uint64_t source_rows = 0;
  std::uint64_t sink_rows = 0;
  std::uint64_t missing = 0;     // source rows with no copy in the sink
  std::uint64_t duplicates = 0;  // extra copies (a row written 3 times counts 2)
  std::uint64_t unexpected = 0;  // sink rows whose id is not in the source
  std::uint64_t wrong = 0;       // copies whose payload differs from the source's
  bool ok() const { return missing == 0 && duplicates == 0 && unexpected == 0 && wrong == 0; }
};

// Throws UserError (a table missing) or PgError.
VerifyReport verify(const VerifyOptions& options);

}  // namespace pgb
