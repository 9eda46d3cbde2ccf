// A test fixture that runs a real PostgreSQL server (the Debian package's initdb and postgres) in
// a temporary directory on a random loopback port.
//
// The server refuses to run as root, and CI runs the tests as root: then initdb and postgres run
// as an unprivileged user, $ETLC_PG_USER or `etlc-pg` (scripts/bootstrap creates it), and the
// temporary directory is handed to that user. As a normal user they run as that user.
//
// PgServer runs initdb (trust authentication for the superuser `etlc`, UTF8, no fsync during
// initdb), starts `postgres` listening on 127.0.0.1:<random port> with its socket in the
// temporary directory, waits (bounded) until it answers, and creates the databases asked for.
// stop() is a fast shutdown (SIGINT, escalating to SIGQUIT and SIGKILL, each bounded), start()
// brings it back on the same port and data directory, kill() sends any signal. The destructor
// stops the server and removes the directory (kept when ETLC_KEEP_TEST_DIRS is set); the server
// log stays readable until then (log_tail, diagnostics) for failure messages. The server dies
// with the test process (PR_SET_PDEATHSIG), so a crashed test leaves none behind.
//
// Binaries: $ETLC_PG_BIN (a directory), else `pg_config --bindir`, else the newest
// /usr/lib/postgresql/*/bin. Every wait is bounded; failures throw std::runtime_error with the
// tail of the server log. Not thread-safe: drive a fixture from the thread that created it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/nats_server.hpp"  // TempDir, pick_free_port

namespace etlc::testing {

struct PgServerConfig {
  // Created (owned by the superuser) once the server answers.
  std::vector<std::string> databases{"etlc"};
  // fsync and synchronous commit on (benchmarks measure real commits); off by default, which is
  // enough for correctness tests (a server that is stopped cleanly loses nothing).
  bool durable = false;
  // Extra server settings (-c name=value).
  std::vector<std::pair<std::string, std::string>> settings;
  // Bound on initdb, and on each start (process up and answering).
  std::chrono::milliseconds start_timeout{60'000};
};

class PgServer {
 public:
  explicit PgServer(PgServerConfig config = {});
  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  static constexpr std::string_view kUser = "etlc";

  // "postgresql://etlc@127.0.0.1:<port>/<database>".
  std::string url(std::string_view database = "etlc") const;
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  const std::filesystem::path& dir() const { return dir_.path(); }

  // Fast shutdown (SIGINT), bounded; no-op when not running. The data directory stays.
  void stop();
  // Starts again on the same port and data directory (stops it first if running).
  void start();
  // Sends `signal`; for SIGKILL/SIGQUIT/SIGTERM/SIGINT waits (bounded) until it exited.
  void kill(int signal);

  // Runs SQL as the superuser on `database` (one connection per call); throws with the server's
  // message on failure.
  void exec(std::string_view database, std::string_view sql) const;
  // The first column of the first row of `sql` as an integer (throws if there is none).
  std::int64_t query_int(std::string_view database, std::string_view sql) const;

  std::string log_tail(std::size_t bytes = 4000) const;
  // For failure messages: running or not (and how it ended), and the tail of the server log.
  std::string diagnostics(std::size_t bytes = 3000);

 private:
  void init_data_dir();
  void launch();
  bool wait_ready(std::string& why);

  PgServerConfig config_;
  TempDir dir_;
  std::filesystem::path bin_;
  uid_t uid_ = 0;  // who runs initdb and postgres (switched to when the test runs as root)
  gid_t gid_ = 0;
  bool switch_user_ = false;
  pid_t pid_ = -1;
  int port_ = -1;
};

}  // namespace etlc::testing
