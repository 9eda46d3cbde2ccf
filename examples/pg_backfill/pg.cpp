#include "pg.hpp"

#include <charconv>

namespace pgb {

namespace {

std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

// SQLSTATEs after which the connection is unusable or the server refuses connections for now.
bool connection_class(const std::string& sqlstate) {
  return sqlstate.rfind("08", 0) == 0 ||  // connection exception
         sqlstate == "57P01" ||           // admin_shutdown
         sqlstate == "57P02" ||           // crash_shutdown
         sqlstate == "57P03" ||           // cannot_connect_now (starting up, shutting down)
         sqlstate == "53300" ||           // too_many_connections
         sqlstate == "25P03";             // idle_in_transaction_session_timeout
}

}  // namespace

std::string redact_url(std::string_view url) {
  // scheme://user:password@host -> scheme://user:***@host
  const auto scheme = url.find("://");
  const auto at = url.find('@');
  if (scheme == std::string_view::npos || at == std::string_view::npos || at < scheme) {
    return std::string(url);
  }
  const auto colon = url.find(':', scheme + 3);
  if (colon == std::string_view::npos || colon > at) return std::string(url);
  return std::string(url.substr(0, colon + 1)) + "***" + std::string(url.substr(at));
}

std::string quote_ident(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::int64_t Result::int64(int row, int col) const {
  const std::string_view t = text(row, col);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size()) {
    throw std::runtime_error("not an integer: '" + std::string(t) + "'");
  }
  return v;
}

std::uint64_t Result::affected() const {
  const char* n = PQcmdTuples(r_.get());
  return n == nullptr || *n == '\0' ? 0 : std::strtoull(n, nullptr, 10);
}

Connection::Connection(const std::string& url, std::string_view application_name,
                       const std::vector<std::string>& setup, int connect_timeout_s)
    : url_(redact_url(url)) {
  const std::string timeout = std::to_string(connect_timeout_s);
  const std::string app(application_name);
  const char* keys[] = {"dbname", "connect_timeout", "application_name", nullptr};
  const char* values[] = {url.c_str(), timeout.c_str(), app.c_str(), nullptr};
  c_.reset(PQconnectdbParams(keys, values, /*expand_dbname=*/1));
  if (!c_) throw PgError("out of memory connecting to " + url_, "", true);
  if (PQstatus(c_.get()) != CONNECTION_OK) {
    throw PgError("cannot connect to " + url_ + ": " + one_line(PQerrorMessage(c_.get())), "",
                  true);
  }
  // Server notices ("table does not exist, skipping") are not errors: keep them off stderr.
  PQsetNoticeProcessor(
      c_.get(), [](void*, const char*) {}, nullptr);
  for (const auto& s : setup) exec(s);
}

void Connection::fail(std::string_view what, PGresult* r) {
  std::string state;
  if (r != nullptr) {
    if (const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE)) state = s;
  }
  std::string msg = r != nullptr && *PQresultErrorMessage(r) != '\0' ? PQresultErrorMessage(r)
                                                                     : PQerrorMessage(c_.get());
  if (r != nullptr) PQclear(r);
  const bool lost = PQstatus(c_.get()) != CONNECTION_OK || connection_class(state) ||
                    (state.empty() && msg.find("server closed") != std::string::npos);
  throw PgError(std::string(what) + " on " + url_ + ": " + one_line(msg), state, lost);
}

Result Connection::exec(const std::string& sql,
                        const std::vector<std::optional<std::string>>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  PGresult* r = PQexecParams(c_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, 0);
  const auto st = r == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    const std::string head = sql.substr(0, sql.find(' ', 12));
    fail(head, r);
  }
  return Result(r);
}

void Connection::copy_in(const std::string& copy_statement, std::string_view data) {
  PGresult* r = PQexec(c_.get(), copy_statement.c_str());
  if (r == nullptr || PQresultStatus(r) != PGRES_COPY_IN) fail("COPY", r);
  PQclear(r);
  if (PQputCopyData(c_.get(), data.data(), static_cast<int>(data.size())) != 1 ||
      PQputCopyEnd(c_.get(), nullptr) != 1) {
    fail("COPY data", nullptr);
  }
  r = PQgetResult(c_.get());
  const bool ok = r != nullptr && PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) {
    // Drain whatever else the server sent for this command before reporting.
    while (PGresult* extra = PQgetResult(c_.get())) PQclear(extra);
    fail("COPY", r);
  }
  PQclear(r);
  while (PGresult* extra = PQgetResult(c_.get())) PQclear(extra);
}

void Connection::rollback_quietly() noexcept {
  if (!c_ || PQstatus(c_.get()) != CONNECTION_OK) return;
  if (PGresult* r = PQexec(c_.get(), "ROLLBACK")) PQclear(r);
}

void copy_escape(std::string_view field, std::string& out) {
  for (char c : field) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
}

}  // namespace pgb
