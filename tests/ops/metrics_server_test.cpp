// MetricsServer: /metrics and /healthz over real HTTP (cpp-httplib's client), and a scrape of a
// live job's registry while its members run, parsed with a strict text-format reader.
#include <gtest/gtest.h>
#include <httplib.h>

#include "etlc/memory_store.hpp"
#include "etlc/metrics.hpp"
#include "etlc/metrics_server.hpp"
#include "live_job.hpp"
#include "prom_text.hpp"

namespace etlc::testing {
namespace {

using namespace std::chrono_literals;

httplib::Result get(std::uint16_t port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  return client.Get(path.c_str());
}

TEST(MetricsServer, serves_the_registry_on_an_ephemeral_loopback_port) {
  auto registry = std::make_shared<MetricsRegistry>();
  registry->counter("t_requests_total", "Requests", {{"path", "/a"}}).inc(3);
  registry->gauge("t_temperature", "Degrees").set(21.5);
  const std::array<double, 3> bounds{0.1, 1, 10};
  auto& h = registry->histogram("t_latency_seconds", "Latency", bounds);
  h.observe(0.05);
  h.observe(5);
  h.observe(50);

  MetricsServer server(registry);
  ASSERT_NE(server.port(), 0);
  EXPECT_EQ(server.bind_address(), "127.0.0.1");
  EXPECT_EQ(server.url(), "http://127.0.0.1:" + std::to_string(server.port()));

  auto res = get(server.port(), "/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(res->body, registry->render_prometheus());
  PromText text = parse_prometheus_text(res->body);
  EXPECT_EQ(text.families.at("t_requests_total").type, "counter");
  EXPECT_EQ(text.sum("t_requests_total"), 3.0);
  EXPECT_EQ(text.sum("t_temperature"), 21.5);
  EXPECT_EQ(text.sum("t_latency_seconds_count"), 3.0);

  // Later updates show in the next scrape.
  registry->counter("t_requests_total", "Requests", {{"path", "/a"}}).inc();
  EXPECT_EQ(parse_prometheus_text(get(server.port(), "/metrics")->body).sum("t_requests_total"),
            4.0);

  auto health = get(server.port(), "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  auto missing = get(server.port(), "/");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(MetricsServer, healthz_reports_the_callback) {
  auto registry = std::make_shared<MetricsRegistry>();
  std::atomic<bool> healthy{true};
  MetricsServer server(registry, {}, [&] {
    return healthy ? HealthReport{true, ""} : HealthReport{false, "store unreachable"};
  });
  EXPECT_EQ(get(server.port(), "/healthz")->status, 200);
  healthy = false;
  auto res = get(server.port(), "/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->body, "store unreachable\n");

  MetricsServer throwing(registry, {}, []() -> HealthReport { throw std::runtime_error("boom"); });
  auto t = get(throwing.port(), "/healthz");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 503);
  EXPECT_NE(t->body.find("boom"), std::string::npos);
}

TEST(MetricsServer, a_taken_port_and_invalid_options_are_errors) {
  auto registry = std::make_shared<MetricsRegistry>();
  MetricsServer first(registry);
  MetricsServerOptions same;
  same.port = first.port();
  EXPECT_THROW(MetricsServer second(registry, same), Error);

  MetricsServerOptions bad;
  bad.threads = 0;
  EXPECT_THROW(MetricsServer s(registry, bad), ConfigError);
  bad = {};
  bad.io_timeout = 0ms;
  EXPECT_THROW(MetricsServer s(registry, bad), ConfigError);
  EXPECT_THROW(MetricsServer s(nullptr), ConfigError);
}

TEST(MetricsServer, stop_is_idempotent_and_closes_the_port) {
  auto registry = std::make_shared<MetricsRegistry>();
  auto server = std::make_unique<MetricsServer>(registry);
  const std::uint16_t port = server->port();
  ASSERT_TRUE(get(port, "/healthz"));
  server->stop();
  server->stop();
  EXPECT_FALSE(get(port, "/healthz"));
  server.reset();  // the destructor after stop() is fine too

  // Stopping right after construction never hangs (the listener is known to run by then).
  for (int i = 0; i < 20; ++i) MetricsServer quick(registry);
}

TEST(MetricsServer, a_scrape_during_a_run_shows_the_members_at_work) {
  auto registry = std::make_shared<MetricsRegistry>();
  auto store = std::make_shared<MemoryStore>();
  MetricsServer server(registry);
  LiveJob job(
      {"w1", "w2", "w3"}, 12, [&] { return store; }, registry);

  std::size_t scrapes = 0;
  PromText last;
  const bool settled = wait_for([&] {
    auto res = get(server.port(), "/metrics");
    if (!res || res->status != 200) return false;
    ++scrapes;
    last = parse_prometheus_text(res->body);  // every scrape must parse, not just the last
    return last.sum("etl_coordination_splits_owned") == 12 &&
           last.sum("etl_coordination_leader") == 1;
  });
  ASSERT_TRUE(settled) << "after " << scrapes << " scrapes";

  for (const auto& [name, f] : last.families) {
    EXPECT_EQ(name.rfind("etl_coordination_", 0), 0u) << name;
    EXPECT_FALSE(f.help.empty()) << name;
  }
  EXPECT_EQ(last.families.at("etl_coordination_store_op_seconds").type, "histogram");
  EXPECT_EQ(last.families.at("etl_coordination_store_ops_total").type, "counter");
  EXPECT_EQ(last.families.at("etl_coordination_assignment_seconds").type, "histogram");
  EXPECT_GT(last.sum("etl_coordination_store_ops_total"), 0);
  EXPECT_EQ(last.sum("etl_coordination_splits_planned"), 12);  // only the leader reports it
  std::set<std::string> instances;
  for (const PromSample& s : last.families.at("etl_coordination_splits_owned").samples) {
    instances.insert(s.labels.at("instance"));
  }
  EXPECT_EQ(instances, (std::set<std::string>{"w1", "w2", "w3"}));
}

}  // namespace
}  // namespace etlc::testing
