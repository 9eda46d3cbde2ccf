// The pipeline's tables.
//
//   source   <table>(id bigint PRIMARY KEY, payload text NOT NULL): what is copied, keyset-paged
//            by id (`generate` makes one).
//   sink     <table>_sink(id, payload, split, epoch, writer): every row written, with the
//            tenancy that wrote it. No unique key on purpose: at-least-once runs (--no-fence)
//            can write a row twice, and `verify` counts it.
//   fence    etlc_sink_fence(job, split, epoch, watermark, state): one row per split, in the
//            sink database: the epoch the split's fence stands at and the sink's own progress of
//            the split (rows written; state = the last id written, and the range's end once
//            cut: cut.hpp). See sink.hpp.
#pragma once

#include <string>
#include <string_view>

#include "pg.hpp"

namespace pgb {

inline constexpr std::string_view kFenceTable = "etlc_sink_fence";

// Bad input or configuration: exit code 2 with the message on one line.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Validates a table name: 1..63 bytes of [A-Za-z0-9_], not starting with a digit (so that it is
// the same name quoted or not). Throws UserError naming the rule.
void check_table_name(std::string_view name, std::string_view what);

std::string default_sink_table(std::string_view source_table);

// CREATE TABLE IF NOT EXISTS for the sink table and the fence table.
void create_sink(Connection& sink, std::string_view sink_table);

// Whether the table exists (in the connection's search path).
bool table_exists(Connection& c, std::string_view table);

// Throws UserError naming the table, the database and the fix when a table is missing.
void require_source(Connection& source, std::string_view table);
void require_sink(Connection& sink, std::string_view sink_table, bool fenced);

}  // namespace pgb
