// MetricsServer on cpp-httplib (Debian's libcpp-httplib). The listener runs on a thread of ours;
// httplib's own pool (sized by options.threads) serves the requests.
//
// httplib's Server::stop() is a no-op until the listen loop has marked itself running, so the
// constructor waits (bounded) for that before returning: a stop() right after construction
// would otherwise leave the listener running forever.
#include "etlc/metrics_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "etlc/detail/mutex.hpp"
#include "etlc/metrics.hpp"

namespace etlc {

namespace {
// Waiting for the listen loop: at most kStartPolls sleeps of kStartPoll (5 s).
constexpr int kStartPolls = 5000;
constexpr auto kStartPoll = std::chrono::milliseconds(1);
constexpr char kPrometheusType[] = "text/plain; version=0.0.4; charset=utf-8";

void validate(const MetricsServerOptions& o) {
  if (o.bind_address.empty()) throw ConfigError("metrics server: bind_address is empty");
  if (o.threads < 1 || o.threads > kMaxMetricsServerThreads) {
    throw ConfigError(fmt::format("metrics server: threads must be 1..{}, got {}",
                                  kMaxMetricsServerThreads, o.threads));
  }
  if (o.io_timeout < std::chrono::milliseconds(1) || o.io_timeout > std::chrono::seconds(60)) {
    throw ConfigError(fmt::format("metrics server: io_timeout must be 1 ms .. 60 s, got {} ms",
                                  o.io_timeout.count()));
  }
}
}  // namespace

struct MetricsServer::Impl {
  std::shared_ptr<const MetricsRegistry> registry;
  MetricsServerOptions options;
  std::function<HealthReport()> health;
  httplib::Server server;
  std::thread listener;
  std::atomic<bool> listen_returned{false};
  std::uint16_t port = 0;
  Mutex stop_mu;  // serialises stop(): the destructor's and a failed start's, and the owner's
  bool stopped ETLC_GUARDED_BY(stop_mu) = false;
};

MetricsServer::MetricsServer(std::shared_ptr<const MetricsRegistry> registry,
                             MetricsServerOptions options, std::function<HealthReport()> health)
    : impl_(std::make_unique<Impl>()) {
  if (!registry) throw ConfigError("metrics server: the registry is null");
  validate(options);
  Impl& im = *impl_;
  im.registry = std::move(registry);
  im.options = std::move(options);
  im.health = std::move(health);

  const std::size_t threads = im.options.threads;
  im.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  im.server.set_keep_alive_max_count(1);
  im.server.set_read_timeout(im.options.io_timeout);
  im.server.set_write_timeout(im.options.io_timeout);
  im.server.set_payload_max_length(64 * 1024);
  // httplib's default sets SO_REUSEPORT, which lets a second server (another process too) bind
  // the same port and silently take half the scrapes. SO_REUSEADDR alone allows a quick restart
  // and refuses a port that is really taken.
  im.server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });

  const MetricsRegistry* reg = im.registry.get();
  im.server.Get("/metrics", [reg](const httplib::Request&, httplib::Response& res) {
    res.set_content(reg->render_prometheus(), kPrometheusType);
  });
  Impl* self = &im;
  im.server.Get("/healthz", [self](const httplib::Request&, httplib::Response& res) {
    HealthReport h;
    if (self->health) {
      try {
        h = self->health();
      } catch (const std::exception& e) {
        h = HealthReport{false, std::string("health check threw: ") + e.what()};
      }
    }
    res.status = h.healthy ? 200 : 503;
    std::string body = h.detail.empty() ? (h.healthy ? "ok" : "unhealthy") : h.detail;
    res.set_content(body + "\n", "text/plain; charset=utf-8");
  });
  im.server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content("internal error\n", "text/plain; charset=utf-8");
      });

  int bound = 0;
  if (im.options.port == 0) {
    bound = im.server.bind_to_any_port(im.options.bind_address);
  } else {
    bound = im.server.bind_to_port(im.options.bind_address, im.options.port) ? im.options.port : -1;
  }
  if (bound <= 0) {
    throw Error(
        fmt::format("metrics server: cannot bind {}:{} (address in use, or not an address "
                    "of this host)",
                    im.options.bind_address, im.options.port));
  }
  im.port = static_cast<std::uint16_t>(bound);
  im.listener = std::thread([self] {
    self->server.listen_after_bind();
    self->listen_returned.store(true);
  });
  for (int i = 0; i < kStartPolls && !im.server.is_running() && !im.listen_returned.load(); ++i) {
    std::this_thread::sleep_for(kStartPoll);
  }
  if (!im.server.is_running()) {
    stop();
    throw Error(fmt::format("metrics server: the listener on {}:{} did not start",
                            im.options.bind_address, im.port));
  }
}

MetricsServer::~MetricsServer() {
  stop();
}

void MetricsServer::stop() {
  MutexLock lk(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

std::uint16_t MetricsServer::port() const noexcept {
  return impl_->port;
}

const std::string& MetricsServer::bind_address() const noexcept {
  return impl_->options.bind_address;
}

std::string MetricsServer::url() const {
  const std::string& a = impl_->options.bind_address;
  if (a.find(':') != std::string::npos) return fmt::format("http://[{}]:{}", a, impl_->port);
  return fmt::format("http://{}:{}", a, impl_->port);
}

}  // namespace etlc
