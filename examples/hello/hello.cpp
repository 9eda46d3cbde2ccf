// hello: a complete coordinated job in one file. Every member runs this same binary; the elected
// leader plans 16 splits, every member processes the splits it is given, and each one exits 0 when
// the whole job is complete (or when it is stopped with SIGTERM/SIGINT: its splits are released
// and the others finish them).
//
//   ./hello                                   one member, in-memory store (no NATS needed)
//   NATS_URL=nats://127.0.0.1:4222 ETLC_JOB=hello ETLC_INSTANCE_ID=m1 ./hello
//                                             one member of a fleet sharing the job in NATS
//   HELLO_HTTP_PORT=9464 ...                  also serve /metrics and /healthz on that port
//
// Configuration comes from the environment (etlc/env_config.hpp); exit codes are
// etlc/exit_codes.hpp's (0 done or stopped, 1 fatal, 2 bad configuration, 3 stalled).
#include <etlc/driver.hpp>
#include <etlc/env_config.hpp>
#include <etlc/exit_codes.hpp>
#include <etlc/logging.hpp>
#include <etlc/memory_store.hpp>
#include <etlc/metrics.hpp>
#include <etlc/metrics_server.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

namespace {

constexpr std::uint64_t kRecordsPerSplit = 2000;

// Runs on the leader only: the work, divided into splits with stable ids.
class HelloPlanner final : public etlc::Planner {
 public:
  std::string fingerprint() const override { return "hello-v1"; }
  etlc::Plan plan(const etlc::PlanContext&) override {
    etlc::Plan plan;  // final: the job completes when every split has
    for (int i = 0; i < 16; ++i) {
      plan.splits.push_back({{"part-" + std::to_string(i), "", kRecordsPerSplit}, std::nullopt});
    }
    return plan;
  }
};

// One split: "processes" its records in bounded steps; progress = records done.
class HelloLane final : public etlc::Lane {
 public:
  explicit HelloLane(const etlc::LaneContext& ctx)
      : id_(ctx.spec.id), member_(ctx.instance_id), done_(ctx.resume.watermark) {}
  etlc::StepResult step() override {
    done_ = std::min(done_ + 100, kRecordsPerSplit);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the "work"
    return done_ < kRecordsPerSplit ? etlc::StepResult::more() : etlc::StepResult::end();
  }
  etlc::SplitProgress durable_progress() override { return {done_, ""}; }
  void close(etlc::LaneEnd end) override {
    if (end == etlc::LaneEnd::completed) std::printf("%s: %s done\n", member_.c_str(), id_.c_str());
  }

 private:
  std::string id_, member_;
  std::uint64_t done_;
};

class HelloSource final : public etlc::SplitSource {
 public:
  std::unique_ptr<etlc::Lane> open(const etlc::LaneContext& ctx) override {
    return std::make_unique<HelloLane>(ctx);
  }
};

bool set(const char* var) {
  const char* v = std::getenv(var);
  return v != nullptr && *v != '\0';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    std::printf(
        "usage: %s   (no arguments; configured by the environment)\n"
        "  without NATS_URL and ETLC_JOB: one member on an in-memory store\n"
        "  NATS_URL, ETLC_JOB: the job's NATS server(s) and name; ETLC_INSTANCE_ID or POD_NAME\n"
        "  (else the host name): this member's stable id; ETLC_* knobs and ETLC_NATS_*\n"
        "  credentials: see etlc/env_config.hpp. HELLO_HTTP_PORT: serve /metrics and\n"
        "  /healthz on 0.0.0.0:PORT. Exit: 0 done or stopped, 1 fatal, 2 bad configuration,\n"
        "  3 stalled.\n",
        argv[0]);
    return std::strcmp(argv[1], "--help") == 0 ? 0 : etlc::exit_codes::bad_config;
  }
  // Block SIGINT/SIGTERM before any thread starts; a watcher turns them into a graceful stop.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  etlc::set_log_level(etlc::LogLevel::info);
  std::unique_ptr<etlc::Driver> driver;
  std::unique_ptr<etlc::MetricsServer> http;
  try {
    auto metrics = std::make_shared<etlc::MetricsRegistry>();
    if (set("HELLO_HTTP_PORT")) {  // for Prometheus and the supervisor's probes
      etlc::MetricsServerOptions o;
      o.bind_address = "0.0.0.0";
      const int port = std::atoi(std::getenv("HELLO_HTTP_PORT"));
      if (port <= 0 || port > 65535) throw etlc::ConfigError("HELLO_HTTP_PORT: not a TCP port");
      o.port = static_cast<std::uint16_t>(port);
      http = std::make_unique<etlc::MetricsServer>(metrics, o);
    }
    auto planner = std::make_shared<HelloPlanner>();
    auto source = std::make_shared<HelloSource>();
#if defined(ETLC_WITH_NATS)
    if (set("NATS_URL") || set("ETLC_JOB")) {
      etlc::EnvConfig env = etlc::config_from_env();
      std::printf("hello: %s\n", env.summary.c_str());
      driver = std::make_unique<etlc::Driver>(env.coordinator, etlc::NatsStore::open(env.nats),
                                              planner, source, etlc::DriverOptions{}, metrics);
    } else
#endif
    {
      etlc::CoordinatorConfig config = etlc::coordinator_config_from_env();
      driver = std::make_unique<etlc::Driver>(config, std::make_shared<etlc::MemoryStore>(),
                                              planner, source, etlc::DriverOptions{}, metrics);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return etlc::exit_codes::exit_code_for(e);
  }

  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    const timespec slice{0, 50'000'000};
    while (!finished) {
      if (sigtimedwait(&signals, nullptr, &slice) > 0) driver->request_stop();
    }
  });
  const etlc::DriverResult r = driver->run();
  finished = true;
  watcher.join();
  std::printf("hello: %s%s%s\n", std::string(etlc::to_string(r.exit)).c_str(),
              r.message.empty() ? "" : ": ", r.message.c_str());
  return r.exit_code();
}
