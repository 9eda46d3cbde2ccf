// Test fixtures that run real nats-server processes (the Debian package) on loopback.
//
// NatsServer starts `nats-server -js -a 127.0.0.1 -p -1 -m -1` with a fresh temporary directory
// (store, log, ports file), learns its ports from the ports file, and waits until it accepts
// clients and reports healthy. restart() brings it back on the same ports and store directory,
// so data and client reconnects can be tested; kill() sends any signal (SIGKILL, SIGTERM,
// SIGSTOP, SIGCONT). The destructor stops the process (SIGTERM, then SIGKILL), reaps it and
// removes the directory (kept when ETLC_KEEP_TEST_DIRS is set). Child processes die with the
// test process (PR_SET_PDEATHSIG), so a crashed test leaves no server behind.
//
// NatsCluster runs N such servers as one JetStream cluster (routes on loopback ports chosen up
// front, client and monitoring ports random).
//
// Every wait is bounded; failures throw std::runtime_error with the tail of the server log.
// Not thread-safe: drive a fixture from one thread (the thread that created it must outlive it,
// because PR_SET_PDEATHSIG is tied to the creating thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace etlc::testing {

// A directory under $TMPDIR (or /tmp) removed with its contents on destruction, unless the
// environment variable ETLC_KEEP_TEST_DIRS is set.
class TempDir {
 public:
  explicit TempDir(std::string_view tag = "etlc");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct NatsServerTls {
  std::string cert_file;  // server certificate (PEM); TLS is on when set
  std::string key_file;
  std::string ca_file;          // CA for verifying clients (with verify_clients)
  bool verify_clients = false;  // mutual TLS
};

struct NatsServerConfig {
  bool jetstream = true;
  // Client port; 0 = a random free one (learnt from the ports file). A fixed port lets a test
  // point a client at a server before starting it.
  int port = 0;
  // Client authentication: user + password, or a token (at most one).
  std::string user;
  std::string password;
  std::string token;
  NatsServerTls tls;
  // Cluster membership (NatsCluster fills these).
  std::string server_name;
  std::string cluster_name;
  int cluster_port = 0;
  std::vector<int> route_ports;
  // Appended to the command line as is.
  std::vector<std::string> extra_args;
  // Bound on each start (process up, ports known, accepting, healthy).
  std::chrono::milliseconds start_timeout{15'000};
  // Wait for /healthz to report ok before returning from a start. A cluster node cannot be
  // healthy until a quorum runs, so NatsCluster starts all nodes first, then waits.
  bool wait_healthy = true;
};

class NatsServer {
 public:
  explicit NatsServer(NatsServerConfig config = {});
  ~NatsServer();
  NatsServer(const NatsServer&) = delete;
  NatsServer& operator=(const NatsServer&) = delete;

  // "nats://127.0.0.1:<port>", or "tls://..." when the server uses TLS.
  std::string url() const;
  int port() const { return port_; }
  int monitor_port() const { return monitor_port_; }
  // The process id, or -1 when the server is not running.
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  const std::string& server_name() const { return config_.server_name; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::filesystem::path store_dir() const;

  // Sends `signal`. For a terminating signal (SIGKILL, SIGTERM, SIGINT, SIGQUIT) waits until the
  // process exited and reaps it (escalating to SIGKILL after 10 s). For SIGSTOP/SIGCONT waits
  // (bounded) until the process is stopped / running again.
  void kill(int signal = SIGKILL);
  // Graceful stop (SIGTERM), bounded. No-op when not running.
  void stop();
  // Starts again on the same ports and store directory (stops it first if running).
  void restart();

  // GET /healthz on the monitoring port answered 200.
  bool healthy() const;
  // Polls healthy() until true or `timeout`; returns the last answer.
  bool wait_healthy(std::chrono::milliseconds timeout) const;
  // The last `bytes` bytes of the server log (for failure messages).
  std::string log_tail(std::size_t bytes = 4000) const;
  // For failure messages: whether the process is still running (reaping it and reporting its
  // exit status if it died on its own), whether it answers /healthz, and the tails of its log
  // and of its stdout/stderr (a Go panic lands there, not in the log).
  std::string diagnostics(std::size_t bytes = 3000);

 private:
  void start();
  void wait_started();
  std::vector<std::string> command_line() const;

  NatsServerConfig config_;
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = -1;  // -1 until the first start picked one
  int monitor_port_ = -1;
};

class NatsCluster {
 public:
  // Starts `size` (>= 3 for JetStream quorum) nodes named "<name>-n1".. and waits until every
  // node is healthy (JetStream meta leader elected).
  explicit NatsCluster(std::size_t size = 3, NatsServerConfig base = {}, std::string name = "etlc");
  NatsCluster(const NatsCluster&) = delete;
  NatsCluster& operator=(const NatsCluster&) = delete;

  std::size_t size() const { return nodes_.size(); }
  NatsServer& node(std::size_t i) { return *nodes_.at(i); }
  // Client URLs of all nodes (running or not).
  std::vector<std::string> urls() const;
  // Index of the node whose server name is `server_name`.
  std::optional<std::size_t> index_of(std::string_view server_name) const;
  // Waits until every running node is healthy.
  bool wait_healthy(std::chrono::milliseconds timeout) const;

 private:
  // Starts the nodes on freshly picked cluster ports; throws if one exits during start-up.
  void start_nodes(std::size_t size, const NatsServerConfig& base, const std::string& name);
  std::vector<std::unique_ptr<NatsServer>> nodes_;
};

// A loopback TCP port that was free a moment ago (bound to port 0, then closed).
int pick_free_port();

// TLS material made with the Debian `openssl` binary: a CA, a server certificate for
// 127.0.0.1 / localhost and a client certificate, all signed by the CA. Throws on failure.
struct TestCertificates {
  std::filesystem::path ca_cert;
  std::filesystem::path server_cert;
  std::filesystem::path server_key;
  std::filesystem::path client_cert;
  std::filesystem::path client_key;
};
TestCertificates make_test_certificates(const std::filesystem::path& dir);

}  // namespace etlc::testing
