// See nats_server.hpp.
#include "support/nats_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <tuple>

namespace etlc::testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kPollPause{5};
constexpr milliseconds kStopTimeout{10'000};

// The nats-server binary: $ETLC_NATS_SERVER, else the first match on PATH, /usr/sbin, /usr/bin.
std::string nats_server_binary() {
  if (const char* env = std::getenv("ETLC_NATS_SERVER"); env != nullptr && *env != '\0') {
    return env;
  }
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream ss(path);
    for (std::string d; std::getline(ss, d, ':');) {
      if (!d.empty()) dirs.push_back(d);
    }
  }
  for (const char* d : {"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"}) {
    dirs.emplace_back(d);
  }
  for (const auto& d : dirs) {
    fs::path candidate = fs::path(d) / "nats-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw std::runtime_error(
      "nats-server not found on PATH or in /usr/sbin (install the Debian package nats-server, "
      "or set ETLC_NATS_SERVER)");
}

// Reads a whole file; empty if it cannot be read.
std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The port of the first URL in the JSON array after "<field>":[ in a ports file; -1 if absent.
int port_from_ports_file(const std::string& text, std::string_view field) {
  // Built by appending: GCC 12 -O3 warns falsely (-Wrestrict) on "literal" + std::string.
  std::string needle = "\"";
  needle.append(field).append("\":[\"");
  auto pos = text.find(needle);
  if (pos == std::string::npos) return -1;
  auto end = text.find('"', pos + needle.size());
  if (end == std::string::npos) return -1;
  std::string url = text.substr(pos + needle.size(), end - pos - needle.size());
  auto colon = url.rfind(':');
  if (colon == std::string::npos) return -1;
  try {
    return std::stoi(url.substr(colon + 1));
  } catch (const std::exception&) {
    return -1;
  }
}

// Connects to 127.0.0.1:port with send/receive timeouts; -1 on failure.
int connect_loopback(int port, milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads from fd until `needle` appears, EOF, an error or the socket timeout.
bool read_until(int fd, std::string_view needle, std::string& got) {
  char buf[1024];
  while (got.find(needle) == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    got.append(buf, static_cast<std::size_t>(n));
    if (got.size() > 64 * 1024) break;
  }
  return got.find(needle) != std::string::npos;
}

// The server greets every client with "INFO {...}" (before any TLS upgrade in 2.9).
bool accepts_clients(int port) {
  int fd = connect_loopback(port, milliseconds(1000));
  if (fd < 0) return false;
  std::string got;
  bool ok = read_until(fd, "INFO", got);
  ::close(fd);
  return ok;
}

// The state letter of /proc/<pid>/stat ('R', 'S', 'T' stopped, 'Z' zombie, ...); '?' if unknown.
char process_state(pid_t pid) {
  std::string stat = read_file(fs::path("/proc") / std::to_string(pid) / "stat");
  auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return '?';
  return stat[close_paren + 2];
}

bool is_terminating(int signal) {
  return signal == SIGKILL || signal == SIGTERM || signal == SIGINT || signal == SIGQUIT;
}

// Runs a shell command; throws with its log on failure.
void run_or_throw(const std::string& command, const fs::path& log) {
  std::string full = command + " >>'" + log.string() + "' 2>&1";
  int rc = std::system(full.c_str());
  if (rc != 0) {
    throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + command + "\n" +
                             read_file(log));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
TempDir::TempDir(std::string_view tag) {
  const char* tmp = std::getenv("TMPDIR");
  fs::path base = (tmp != nullptr && *tmp != '\0') ? fs::path(tmp) : fs::path("/tmp");
  std::string pattern = (base / (std::string(tag) + "-XXXXXX")).string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  }
  path_ = buf.data();
}

TempDir::~TempDir() {
  if (std::getenv("ETLC_KEEP_TEST_DIRS") != nullptr) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

// ---------------------------------------------------------------------------------------------
NatsServer::NatsServer(NatsServerConfig config) : config_(std::move(config)), dir_("etlc-nats") {
  if (config_.port > 0) port_ = config_.port;
  start();
}

NatsServer::~NatsServer() {
  try {
    stop();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw
  }
}

std::string NatsServer::url() const {
  std::string scheme = config_.tls.cert_file.empty() ? "nats" : "tls";
  return scheme + "://127.0.0.1:" + std::to_string(port_);
}

fs::path NatsServer::store_dir() const {
  return dir_.path() / "store";
}

std::vector<std::string> NatsServer::command_line() const {
  std::vector<std::string> args{nats_server_binary(),
                                "-a",
                                "127.0.0.1",
                                "-p",
                                std::to_string(port_),
                                "-m",
                                std::to_string(monitor_port_),
                                "--ports_file_dir",
                                dir_.path().string(),
                                "-l",
                                (dir_.path() / "server.log").string()};
  if (config_.jetstream) {
    args.insert(args.end(), {"-js", "-sd", store_dir().string()});
  }
  if (!config_.user.empty()) {
    args.insert(args.end(), {"--user", config_.user, "--pass", config_.password});
  }
  if (!config_.token.empty()) args.insert(args.end(), {"--auth", config_.token});
  if (!config_.tls.cert_file.empty()) {
    args.insert(args.end(),
                {"--tls", "--tlscert", config_.tls.cert_file, "--tlskey", config_.tls.key_file});
    if (config_.tls.verify_clients) {
      args.insert(args.end(), {"--tlsverify", "--tlscacert", config_.tls.ca_file});
    }
  }
  if (!config_.server_name.empty()) args.insert(args.end(), {"--server_name", config_.server_name});
  if (config_.cluster_port > 0) {
    args.insert(args.end(),
                {"--cluster_name", config_.cluster_name.empty() ? "etlc" : config_.cluster_name,
                 "--cluster", "nats://127.0.0.1:" + std::to_string(config_.cluster_port)});
    std::string routes;
    for (int p : config_.route_ports) {
      if (!routes.empty()) routes += ",";
      routes += "nats://127.0.0.1:" + std::to_string(p);
    }
    if (!routes.empty()) args.insert(args.end(), {"--routes", routes});
  }
  args.insert(args.end(), config_.extra_args.begin(), config_.extra_args.end());
  return args;
}

void NatsServer::start() {
  // Ports files of earlier runs would be mistaken for this one's.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_.path(), ec)) {
    if (entry.path().extension() == ".ports") fs::remove(entry.path(), ec);
  }
  std::vector<std::string> args = command_line();
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string out_log = (dir_.path() / "stdout.log").string();
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    int fd = ::open(out_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  try {
    wait_started();
  } catch (...) {
    kill(SIGKILL);
    throw;
  }
}

void NatsServer::wait_started() {
  const auto deadline = Clock::now() + config_.start_timeout;
  const fs::path ports_file = dir_.path() / ("nats-server_" + std::to_string(pid_) + ".ports");
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("nats-server (" + dir_.path().string() + "): " + why + "\n" +
                             log_tail() + read_file(dir_.path() / "stdout.log"));
  };
  bool accepting = false;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      fail("exited during start-up (status " + std::to_string(status) + ")");
    }
    if (port_ < 0 || monitor_port_ < 0) {
      std::string text = read_file(ports_file);
      int p = port_from_ports_file(text, "nats");
      int m = port_from_ports_file(text, "monitoring");
      if (p > 0 && m > 0) {
        port_ = p;
        monitor_port_ = m;
      }
    }
    if (port_ > 0 && !accepting) accepting = accepts_clients(port_);
    if (accepting && (!config_.wait_healthy || healthy())) return;
    if (Clock::now() >= deadline) {
      fail("not ready within " + std::to_string(config_.start_timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(kPollPause);
  }
}

void NatsServer::kill(int signal) {
  if (pid_ <= 0) return;
  if (is_terminating(signal)) ::kill(pid_, SIGCONT);  // a stopped process cannot exit on TERM
  ::kill(pid_, signal);
  if (signal == SIGSTOP || signal == SIGCONT) {
    // kill() only queues the signal: wait until the process really is (not) stopped, or a test
    // could still get answers from a server it believes frozen.
    const bool want_stopped = signal == SIGSTOP;
    const auto deadline = Clock::now() + kStopTimeout;
    while (((process_state(pid_) == 'T') != want_stopped) && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    return;
  }
  if (!is_terminating(signal)) return;
  const auto deadline = Clock::now() + kStopTimeout;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) break;
    if (Clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(kPollPause);
  }
  pid_ = -1;
}

void NatsServer::stop() {
  kill(SIGTERM);
}

void NatsServer::restart() {
  stop();
  start();
}

bool NatsServer::healthy() const {
  if (monitor_port_ <= 0 || pid_ <= 0) return false;
  int fd = connect_loopback(monitor_port_, milliseconds(1000));
  if (fd < 0) return false;
  static constexpr std::string_view kRequest =
      "GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  bool ok = ::send(fd, kRequest.data(), kRequest.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(kRequest.size());
  std::string got;
  if (ok) ok = read_until(fd, "\r\n", got);
  ::close(fd);
  return ok && got.find(" 200 ") != std::string::npos;
}

bool NatsServer::wait_healthy(milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (healthy()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

std::string NatsServer::log_tail(std::size_t bytes) const {
  std::string text = read_file(dir_.path() / "server.log");
  if (text.size() > bytes) text = text.substr(text.size() - bytes);
  return text;
}

std::string NatsServer::diagnostics(std::size_t bytes) {
  std::string state;
  if (pid_ <= 0) {
    state = "not running (stopped by the test)";
  } else {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      state = WIFSIGNALED(status) ? "died of signal " + std::to_string(WTERMSIG(status))
                                  : "exited with status " + std::to_string(WEXITSTATUS(status));
      pid_ = -1;
    } else {
      state = "running (pid " + std::to_string(pid_) + ", state " + process_state(pid_) +
              ", healthz " + (healthy() ? "ok" : "not ok") + ")";
    }
  }
  std::string out = read_file(dir_.path() / "stdout.log");
  if (out.size() > bytes) out = out.substr(out.size() - bytes);
  return "nats-server " + url() + ": " + state + "\n--- server log ---\n" + log_tail(bytes) +
         "--- server stdout/stderr ---\n" + out;
}

// ---------------------------------------------------------------------------------------------
NatsCluster::NatsCluster(std::size_t size, NatsServerConfig base, std::string name) {
  if (size < 1) throw std::invalid_argument("NatsCluster needs at least one node");
  // The cluster ports are picked free and released before the nodes bind them, so another process
  // (a suite starting servers at the same time) can take one in between, and the node that cannot
  // bind it exits during start-up. Start again on fresh ports, a bounded number of times.
  constexpr int kStartAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    try {
      start_nodes(size, base, name);
      break;
    } catch (const std::runtime_error&) {
      nodes_.clear();  // stops the nodes that did start
      if (attempt == kStartAttempts) throw;
    }
  }
  const auto timeout = base.start_timeout;
  if (!wait_healthy(timeout)) {
    std::string logs;
    for (const auto& n : nodes_) logs += n->server_name() + ":\n" + n->log_tail(1500) + "\n";
    throw std::runtime_error("NatsCluster: not healthy within " + std::to_string(timeout.count()) +
                             " ms\n" + logs);
  }
}

void NatsCluster::start_nodes(std::size_t size, const NatsServerConfig& base,
                              const std::string& name) {
  std::vector<int> cluster_ports;
  for (std::size_t i = 0; i < size; ++i) cluster_ports.push_back(pick_free_port());
  for (std::size_t i = 0; i < size; ++i) {
    NatsServerConfig config = base;
    config.server_name = name + "-n" + std::to_string(i + 1);
    config.cluster_name = name;
    config.cluster_port = cluster_ports[i];
    config.route_ports = cluster_ports;  // a route to itself is ignored by the server
    config.wait_healthy = false;         // healthy needs a quorum: the constructor waits
    nodes_.push_back(std::make_unique<NatsServer>(std::move(config)));
  }
}

std::vector<std::string> NatsCluster::urls() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back(n->url());
  return out;
}

std::optional<std::size_t> NatsCluster::index_of(std::string_view server_name) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->server_name() == server_name) return i;
  }
  return std::nullopt;
}

bool NatsCluster::wait_healthy(milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  for (const auto& n : nodes_) {
    if (!n->running()) continue;
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (!n->wait_healthy(std::max(left, milliseconds(0)))) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::system_error(err, std::generic_category(), "bind/getsockname");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

TestCertificates make_test_certificates(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path log = dir / "openssl.log";
  auto q = [](const fs::path& p) {
    std::string quoted = "'";
    quoted.append(p.string()).append("'");
    return quoted;
  };
  TestCertificates c{dir / "ca.pem", dir / "server.pem", dir / "server.key", dir / "client.pem",
                     dir / "client.key"};
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  {
    std::ofstream(dir / "server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                         "extendedKeyUsage=serverAuth\n";
    std::ofstream(dir / "client.ext") << "extendedKeyUsage=clientAuth\n";
  }
  run_or_throw("openssl req -x509 " + ec + " -keyout " + q(dir / "ca.key") + " -out " +
                   q(c.ca_cert) +
                   " -days 2 -subj /CN=etlc-test-ca"
                   " -addext basicConstraints=critical,CA:TRUE"
                   " -addext keyUsage=critical,keyCertSign,cRLSign",
               log);
  for (const auto& [cert, key, name, ext] :
       {std::tuple{c.server_cert, c.server_key, std::string("server"), dir / "server.ext"},
        std::tuple{c.client_cert, c.client_key, std::string("client"), dir / "client.ext"}}) {
    fs::path csr = dir / (name + ".csr");
    run_or_throw("openssl req " + ec + " -keyout " + q(key) + " -out " + q(csr) +
                     " -subj /CN=" + (name == "server" ? std::string("localhost") : name),
                 log);
    run_or_throw("openssl x509 -req -in " + q(csr) + " -CA " + q(c.ca_cert) + " -CAkey " +
                     q(dir / "ca.key") + " -CAcreateserial -out " + q(cert) + " -days 2 -extfile " +
                     q(ext),
                 log);
  }
  return c;
}

}  // namespace etlc::testing
