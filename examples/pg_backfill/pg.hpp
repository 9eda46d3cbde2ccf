// A thin RAII layer over libpq: a connection, query results, COPY, and errors that say whether
// the connection itself failed (retry after reconnecting) or the statement did (a bug, or bad
// schema: do not retry). Nothing here knows about the pipeline.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pgb {

// A failed libpq call. `sqlstate` is the server's error code ("" when the server never answered).
class PgError : public std::runtime_error {
 public:
  PgError(std::string message, std::string sqlstate, bool connection_lost)
      : std::runtime_error(std::move(message)),
        sqlstate_(std::move(sqlstate)),
        connection_lost_(connection_lost) {}
  const std::string& sqlstate() const { return sqlstate_; }
  // The connection is gone or unusable (refused, reset, server shut down, idle-in-transaction
  // timeout, too many connections): reconnect and retry. A transaction in flight has an unknown
  // outcome only when this happened during its COMMIT.
  bool connection_lost() const { return connection_lost_; }
  // The relation named in the statement does not exist (42P01).
  bool undefined_table() const { return sqlstate_ == "42P01"; }

 private:
  std::string sqlstate_;
  bool connection_lost_;
};

// A URL for messages: the password (if any) replaced by "***".
std::string redact_url(std::string_view url);
// A double-quoted SQL identifier ("a""b" for a"b).
std::string quote_ident(std::string_view name);

class Result {
 public:
  explicit Result(PGresult* r) : r_(r) {}
  int rows() const { return PQntuples(r_.get()); }
  bool null(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  std::string_view text(int row, int col) const {
    return {PQgetvalue(r_.get(), row, col),
            static_cast<std::size_t>(PQgetlength(r_.get(), row, col))};
  }
  std::int64_t int64(int row, int col) const;
  // Rows affected by an UPDATE/INSERT/DELETE.
  std::uint64_t affected() const;

 private:
  struct Clear {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  std::unique_ptr<PGresult, Clear> r_;
};

class Connection {
 public:
  // Connects (bounded by connect_timeout_s) and runs `setup` statements (SET ...). Throws PgError
  // (connection_lost() when the server could not be reached) naming the redacted URL.
  Connection(const std::string& url, std::string_view application_name,
             const std::vector<std::string>& setup = {}, int connect_timeout_s = 5);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Connection(Connection&&) = default;
  Connection& operator=(Connection&&) = default;

  // Runs a statement with text parameters ($1, $2, ...; nullopt is NULL). Throws PgError.
  Result exec(const std::string& sql, const std::vector<std::optional<std::string>>& params = {});
  // COPY <target> FROM STDIN (text format), `data` already encoded (copy_escape). Throws PgError.
  void copy_in(const std::string& copy_statement, std::string_view data);

  // Whether the connection still looks usable (a failed call may have broken it).
  bool ok() const { return PQstatus(c_.get()) == CONNECTION_OK; }
  // Ends an open transaction, ignoring errors (the connection may be gone).
  void rollback_quietly() noexcept;
  const std::string& url() const { return url_; }

 private:
  [[noreturn]] void fail(std::string_view what, PGresult* r);
  struct Finish {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  std::unique_ptr<PGconn, Finish> c_;
  std::string url_;  // redacted
};

// Appends `field` to `out` escaped for COPY's text format (backslash, tab, newline, CR).
void copy_escape(std::string_view field, std::string& out);

}  // namespace pgb
