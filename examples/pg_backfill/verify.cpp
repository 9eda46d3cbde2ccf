#include "verify.hpp"

#include <deque>

#include "pg.hpp"
#include "schema.hpp"

namespace pgb {

namespace {

constexpr int kFetchRows = 20'000;

// (id, md5 of payload) in id order, fetched through a cursor in a read-only snapshot.
class OrderedRows {
 public:
  OrderedRows(const std::string& url, const std::string& table) : c_(url, "pg-backfill verify") {
    c_.exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    c_.exec("DECLARE rows NO SCROLL CURSOR FOR SELECT id, md5(payload) FROM " + quote_ident(table) +
            " ORDER BY id");
  }
  // The next row, or false at the end.
  bool next(std::int64_t& id, std::string& hash) {
    if (buf_.empty() && !done_) {
      Result r = c_.exec("FETCH " + std::to_string(kFetchRows) + " FROM rows");
      for (int i = 0; i < r.rows(); ++i)
        buf_.emplace_back(r.int64(i, 0), std::string(r.text(i, 1)));
      done_ = r.rows() < kFetchRows;
    }
    if (buf_.empty()) return false;
    id = buf_.front().first;
    hash = std::move(buf_.front().second);
    buf_.pop_front();
    return true;
  }

 private:
  Connection c_;
  std::deque<std::pair<std::int64_t, std::string>> buf_;
  bool done_ = false;
};

}  // namespace

VerifyReport verify(const VerifyOptions& o) {
  check_table_name(o.table, "--table");
  check_table_name(o.sink_table, "--sink-table");
  {
    Connection s(o.source_pg, "pg-backfill verify");
    require_source(s, o.table);
    Connection k(o.sink_pg, "pg-backfill verify");
    require_sink(k, o.sink_table, false);
  }
  OrderedRows source(o.source_pg, o.table), sink(o.sink_pg, o.sink_table);
  VerifyReport rep;
  std::int64_t sid = 0, kid = 0;
  std::string shash, khash;
  bool has_s = source.next(sid, shash), has_k = sink.next(kid, khash);
  rep.source_rows += has_s ? 1 : 0;
  rep.sink_rows += has_k ? 1 : 0;
  auto next_sink = [&] {
    has_k = sink.next(kid, khash);
    rep.sink_rows += has_k ? 1 : 0;
  };
  while (has_s) {
    while (has_k && kid < sid) {
      ++rep.unexpected;
      next_sink();
    }
    std::uint64_t copies = 0;
    while (has_k && kid == sid) {
      ++copies;
      if (khash != shash) ++rep.wrong;
      next_sink();
    }
    if (copies == 0) ++rep.missing;
    if (copies > 1) rep.duplicates += copies - 1;
    has_s = source.next(sid, shash);
    rep.source_rows += has_s ? 1 : 0;
  }
  while (has_k) {
    ++rep.unexpected;
    next_sink();
  }
  return rep;
}

}  // namespace pgb
