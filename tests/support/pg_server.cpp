// See pg_server.hpp.
#include "support/pg_server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace etlc::testing {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kStopTimeout{15'000};
constexpr int kPortAttempts = 4;  // a random free port can be taken before the server binds it

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail(const std::string& text, std::size_t bytes) {
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

// $ETLC_PG_BIN, else `pg_config --bindir` (libpq-dev's pg_config names the server's bin dir),
// else the newest /usr/lib/postgresql/<version>/bin that has initdb.
fs::path find_bin_dir() {
  if (const char* env = std::getenv("ETLC_PG_BIN"); env != nullptr && *env != '\0') return env;
  if (FILE* p = ::popen("pg_config --bindir 2>/dev/null", "r")) {
    char buf[4096] = {};
    const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
    ::pclose(p);
    std::string dir = got ? buf : "";
    while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
    if (!dir.empty() && ::access((fs::path(dir) / "initdb").c_str(), X_OK) == 0) return dir;
  }
  fs::path best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path bin = e.path() / "bin";
    int version = std::atoi(e.path().filename().c_str());
    if (version > best_version && ::access((bin / "initdb").c_str(), X_OK) == 0) {
      best = bin;
      best_version = version;
    }
  }
  if (best_version < 0) {
    throw std::runtime_error(
        "PostgreSQL server binaries not found (install the Debian package postgresql, or set "
        "ETLC_PG_BIN to the directory holding initdb and postgres)");
  }
  return best;
}

// Forks and execs `args` with stdout and stderr appended to `log`, as uid/gid when `as_user`.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log, bool as_user, uid_t uid,
            gid_t gid) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid != 0) return pid;
  // Child: only async-signal-safe calls until exec. The log is opened before dropping
  // privileges, so it may live in a directory only root can write.
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  if (as_user && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
    ::_exit(125);
  }
  // After setuid: a change of credentials clears the parent-death signal.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(126);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

// Waits for `pid` up to `limit`; its exit status, or -1 if it is still running (then killed).
int wait_exit(pid_t pid, milliseconds limit) {
  const auto deadline = SteadyClock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    if (SteadyClock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
}

void chown_tree(const fs::path& root, uid_t uid, gid_t gid) {
  if (::chown(root.c_str(), uid, gid) != 0) {
    throw std::system_error(errno, std::generic_category(), "chown " + root.string());
  }
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(root, ec)) {
    if (::lchown(e.path().c_str(), uid, gid) != 0) {
      throw std::system_error(errno, std::generic_category(), "chown " + e.path().string());
    }
  }
}

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;
using Result = std::unique_ptr<PGresult, ResultDeleter>;

Conn connect_or_throw(const std::string& url) {
  Conn c(PQconnectdb((url + "?connect_timeout=10").c_str()));
  if (!c || PQstatus(c.get()) != CONNECTION_OK) {
    throw std::runtime_error("cannot connect to " + url + ": " +
                             (c ? PQerrorMessage(c.get()) : "out of memory"));
  }
  return c;
}

}  // namespace

PgServer::PgServer(PgServerConfig config) : config_(std::move(config)), dir_("etlc-pg") {
  bin_ = find_bin_dir();
  if (::geteuid() == 0) {
    const char* env = std::getenv("ETLC_PG_USER");
    const std::string user = env != nullptr && *env != '\0' ? env : "etlc-pg";
    const passwd* pw = ::getpwnam(user.c_str());
    if (pw == nullptr || pw->pw_uid == 0) {
      throw std::runtime_error(
          "PostgreSQL refuses to run as root, and the unprivileged user '" + user +
          "' to run it as does not exist: run scripts/bootstrap (it creates etlc-pg) or set "
          "ETLC_PG_USER to an existing unprivileged user");
    }
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    switch_user_ = true;
    chown_tree(dir_.path(), uid_, gid_);
  }
  init_data_dir();
  start();
  for (const auto& db : config_.databases) exec("postgres", "CREATE DATABASE \"" + db + "\"");
}

PgServer::~PgServer() {
  try {
    stop();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw
  }
}

std::string PgServer::url(std::string_view database) const {
  return "postgresql://" + std::string(kUser) + "@127.0.0.1:" + std::to_string(port_) + "/" +
         std::string(database);
}

void PgServer::init_data_dir() {
  const fs::path log = dir_.path() / "initdb.log";
  const pid_t pid = spawn(
      {(bin_ / "initdb").string(), "-D", (dir_.path() / "data").string(), "-U", std::string(kUser),
       "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"},
      log, switch_user_, uid_, gid_);
  const int rc = wait_exit(pid, config_.start_timeout);
  if (rc != 0) {
    throw std::runtime_error("initdb failed (" +
                             (rc < 0 ? std::string("timed out") : "exit " + std::to_string(rc)) +
                             ") in " + dir_.path().string() + ":\n" + tail(read_file(log), 3000));
  }
}

void PgServer::launch() {
  std::vector<std::string> args{(bin_ / "postgres").string(),
                                "-D",
                                (dir_.path() / "data").string(),
                                "-p",
                                std::to_string(port_),
                                "-c",
                                "listen_addresses=127.0.0.1",
                                "-c",
                                "unix_socket_directories=" + dir_.path().string(),
                                "-c",
                                "logging_collector=off",
                                "-c",
                                "max_connections=200",
                                "-c",
                                "shared_buffers=64MB"};
  if (!config_.durable) {
    args.insert(args.end(),
                {"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"});
  }
  for (const auto& [name, value] : config_.settings) {
    args.insert(args.end(), {"-c", name + "=" + value});
  }
  pid_ = spawn(args, dir_.path() / "server.log", switch_user_, uid_, gid_);
}

bool PgServer::wait_ready(std::string& why) {
  const auto deadline = SteadyClock::now() + config_.start_timeout;
  const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port_) +
                               " user=" + std::string(kUser) + " dbname=postgres connect_timeout=2";
  for (;;) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      why = "exited during start-up (status " + std::to_string(status) + ")";
      return false;
    }
    if (PQping(conninfo.c_str()) == PQPING_OK) return true;
    if (SteadyClock::now() >= deadline) {
      why = "not answering within " + std::to_string(config_.start_timeout.count()) + " ms";
      kill(SIGKILL);
      return false;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

void PgServer::start() {
  if (running()) stop();
  std::string why;
  for (int attempt = 1; attempt <= kPortAttempts; ++attempt) {
    const bool fresh = port_ < 0;
    if (fresh) port_ = pick_free_port();
    const std::size_t log_before = read_file(dir_.path() / "server.log").size();
    launch();
    if (wait_ready(why)) return;
    // Only a freshly picked port may be swapped for another: a restart keeps its port, which
    // clients and the test rely on.
    const std::string log = read_file(dir_.path() / "server.log").substr(log_before);
    const bool port_taken = log.find("could not bind") != std::string::npos ||
                            log.find("Address already in use") != std::string::npos;
    if (!(fresh && port_taken)) break;
    port_ = -1;
  }
  throw std::runtime_error("postgres (" + dir_.path().string() + ", port " + std::to_string(port_) +
                           "): " + why + "\n" + log_tail());
}

void PgServer::kill(int signal) {
  if (pid_ <= 0) return;
  const bool ends = signal == SIGKILL || signal == SIGQUIT || signal == SIGTERM || signal == SIGINT;
  if (ends) ::kill(pid_, SIGCONT);  // a stopped process cannot shut down
  ::kill(pid_, signal);
  if (!ends) return;
  wait_exit(pid_, kStopTimeout);  // escalates to SIGKILL past the bound
  pid_ = -1;
}

void PgServer::stop() {
  if (pid_ <= 0) return;
  // Fast shutdown; escalate to an immediate one, then SIGKILL (wait_exit), each bounded.
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGINT);
  const auto deadline = SteadyClock::now() + kStopTimeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || r < 0) break;
    if (SteadyClock::now() >= deadline) {
      ::kill(pid_, SIGQUIT);
      wait_exit(pid_, milliseconds(5000));
      break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  pid_ = -1;
}

void PgServer::exec(std::string_view database, std::string_view sql) const {
  Conn c = connect_or_throw(url(database));
  Result r(PQexec(c.get(), std::string(sql).c_str()));
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    throw std::runtime_error("SQL failed on " + std::string(database) + ": " + std::string(sql) +
                             ": " + PQerrorMessage(c.get()));
  }
}

std::int64_t PgServer::query_int(std::string_view database, std::string_view sql) const {
  Conn c = connect_or_throw(url(database));
  Result r(PQexec(c.get(), std::string(sql).c_str()));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) < 1 ||
      PQgetisnull(r.get(), 0, 0)) {
    throw std::runtime_error("query gave no value on " + std::string(database) + ": " +
                             std::string(sql) + ": " + PQerrorMessage(c.get()));
  }
  return std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10);
}

std::string PgServer::log_tail(std::size_t bytes) const {
  return tail(read_file(dir_.path() / "server.log"), bytes);
}

std::string PgServer::diagnostics(std::size_t bytes) {
  std::string state;
  if (pid_ <= 0) {
    state = "not running (stopped by the test)";
  } else {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      state = WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status))
                                  : "exited with status " + std::to_string(WEXITSTATUS(status));
      pid_ = -1;
    } else {
      state = "running (pid " + std::to_string(pid_) + ")";
    }
  }
  return "postgres " + url() + ": " + state + "\n--- server log ---\n" + log_tail(bytes);
}

}  // namespace etlc::testing
