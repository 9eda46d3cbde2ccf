#include "schema.hpp"

namespace pgb {

void check_table_name(std::string_view name, std::string_view what) {
  bool ok = !name.empty() && name.size() <= 63 && !(name[0] >= '0' && name[0] <= '9');
  for (char c : name) {
    ok = ok &&
         ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (!ok) {
    throw UserError(std::string(what) + " '" + std::string(name) +
                    "' must be 1..63 characters of [A-Za-z0-9_], not starting with a digit");
  }
}

std::string default_sink_table(std::string_view source_table) {
  return std::string(source_table) + "_sink";
}

void create_sink(Connection& sink, std::string_view sink_table) {
  sink.exec("CREATE TABLE IF NOT EXISTS " + quote_ident(sink_table) +
            " (id bigint NOT NULL, payload text NOT NULL, split text NOT NULL, "
            "epoch bigint NOT NULL, writer text NOT NULL)");
  sink.exec("CREATE TABLE IF NOT EXISTS " + quote_ident(kFenceTable) +
            " (job text NOT NULL, split text NOT NULL, epoch bigint NOT NULL, "
            "watermark bigint NOT NULL, state text NOT NULL, PRIMARY KEY (job, split))");
}

bool table_exists(Connection& c, std::string_view table) {
  Result r = c.exec("SELECT to_regclass($1) IS NOT NULL", {quote_ident(table)});
  return r.rows() == 1 && r.text(0, 0) == "t";
}

void require_source(Connection& source, std::string_view table) {
  if (!table_exists(source, table)) {
    throw UserError("the source table '" + std::string(table) + "' does not exist in " +
                    source.url() + " (make one with: pg-backfill generate)");
  }
}

void require_sink(Connection& sink, std::string_view sink_table, bool fenced) {
  for (std::string_view t : {sink_table, fenced ? kFenceTable : std::string_view()}) {
    if (t.empty() || table_exists(sink, t)) continue;
    throw UserError("the sink table '" + std::string(t) + "' does not exist in " + sink.url() +
                    " (create the sink tables with: pg-backfill init-sink --sink-pg URL --table " +
                    "T" + (t == kFenceTable ? ")" : " [--sink-table " + std::string(t) + "])"));
  }
}

}  // namespace pgb
