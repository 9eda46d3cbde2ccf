// MetricsServer: a small HTTP endpoint for a MetricsRegistry, for Prometheus to scrape.
//
//   GET /metrics  200, the registry's text exposition (format 0.0.4,
//                 Content-Type "text/plain; version=0.0.4; charset=utf-8")
//   GET /healthz  200 "ok" when the health callback (if any) reports healthy, else 503 with its
//                 detail; a callback that throws counts as unhealthy
//   anything else 404
//
// It is optional: nothing in the library starts one. Bind it to loopback (the default) and let
// a sidecar or the node's agent scrape it, or set bind_address to expose it; there is no
// authentication and no TLS. Each connection serves one request and is closed (no keep-alive),
// so a few idle scrapers cannot occupy the request threads; reads and writes time out after
// io_timeout.
//
// Ownership: shares ownership of the registry. The destructor stops the server: it stops
// accepting, lets requests in progress finish (bounded by io_timeout) and joins its threads.
// Thread safety: every method may be called from any thread. The health callback runs on a
// request thread, possibly concurrently with itself: it must be thread-safe and quick.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "etlc/errors.hpp"

namespace etlc {

class MetricsRegistry;

struct MetricsServerOptions {
  // An IPv4 or IPv6 address literal or a host name to bind to. "0.0.0.0" listens everywhere.
  std::string bind_address = "127.0.0.1";
  // TCP port; 0 = an ephemeral port chosen by the kernel (read it back with port()).
  std::uint16_t port = 0;
  // Request threads, 1..kMaxMetricsServerThreads.
  std::size_t threads = 2;
  // Per read and per write on a connection, 1 ms .. 60 s.
  std::chrono::milliseconds io_timeout{5'000};
};

inline constexpr std::size_t kMaxMetricsServerThreads = 16;

struct HealthReport {
  bool healthy = true;
  std::string detail;  // shown in the /healthz body
};

class MetricsServer {
 public:
  // Binds and starts serving before it returns. Throws ConfigError for invalid options and
  // Error naming the address when it cannot bind (address in use, not an address of this host).
  explicit MetricsServer(std::shared_ptr<const MetricsRegistry> registry,
                         MetricsServerOptions options = {},
                         std::function<HealthReport()> health = {});
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port (the chosen one when options.port was 0).
  std::uint16_t port() const noexcept;
  const std::string& bind_address() const noexcept;
  // "http://<bind_address>:<port>" (IPv6 literals in brackets).
  std::string url() const;

  // Stops serving as the destructor does. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace etlc
