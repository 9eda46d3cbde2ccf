#include "run.hpp"

#include <etlc/driver.hpp>
#include <etlc/errors.hpp>
#include <etlc/memory_store.hpp>
#ifdef ETLC_WITH_NATS
#include <etlc/nats_store.hpp>
#endif

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "lane.hpp"
#include "schema.hpp"
#include "sink.hpp"

namespace pgb {

namespace {

using Clock = std::chrono::steady_clock;

// Log lines (the library's "etlc" logger and this example's) go to stderr, one per line.
void install_logging() {
  if (spdlog::get("etlc")) return;
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto etlc = std::make_shared<spdlog::logger>("etlc", sink);
  const char* env = std::getenv("ETLC_LOG_LEVEL");
  etlc->set_level(env != nullptr ? spdlog::level::from_str(env) : spdlog::level::info);
  spdlog::register_logger(etlc);
  auto mine = std::make_shared<spdlog::logger>("pg-backfill", sink);
  mine->set_level(spdlog::level::info);
  spdlog::set_default_logger(mine);
}

std::string default_instance() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "host");
  std::string id = host;
  for (char& c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) c = '-';
  }
  return id + "-" + std::to_string(getpid());
}

void validate(const RunOptions& o, bool nats) {
  if (o.source_pg.empty() || o.sink_pg.empty())
    throw UserError("--source-pg and --sink-pg are required");
  check_table_name(o.table, "--table");
  check_table_name(o.sink_table, "--sink-table");
  if (o.table == o.sink_table && o.source_pg == o.sink_pg) {
    throw UserError("the sink table must not be the source table");
  }
  if (nats && o.store.rfind("nats://", 0) != 0 && o.store.rfind("tls://", 0) != 0) {
    throw UserError("--store must be 'memory' or nats://HOST:PORT, not '" + o.store + "'");
  }
  if (o.members == 0 || o.members > 64) throw UserError("--members must be 1..64");
  if (nats && o.members != 1) {
    throw UserError("--members applies to the memory store; with NATS run one process per member");
  }
  if (o.batch_rows == 0 || o.batch_rows > 100'000)
    throw UserError("--batch-rows must be 1..100000");
  if (o.split_rows == 0) throw UserError("--split-rows must be positive");
  if (o.lease_ms < 300 || o.lease_ms > 600'000) throw UserError("--lease-ms must be 300..600000");
}

// Both databases answer and hold their tables: one line naming what is wrong otherwise.
void check_databases(const RunOptions& o) {
  auto open = [](const std::string& url, const char* which) {
    try {
      return std::make_unique<Connection>(url, "pg-backfill check");
    } catch (const PgError& e) {
      throw UserError(std::string("the ") + which + " database: " + e.what());
    }
  };
  auto source = open(o.source_pg, "source");
  require_source(*source, o.table);
  auto sink = open(o.sink_pg, "sink");
  require_sink(*sink, o.sink_table, o.fence);
}

std::shared_ptr<etlc::KvStore> open_store(const RunOptions& o) {
  if (o.store == "memory") return std::make_shared<etlc::MemoryStore>();
#ifdef ETLC_WITH_NATS
  etlc::NatsStoreOptions n;
  n.servers = {o.store};
  n.job = o.job;
  n.connect_timeout_ms = 3000;
  n.op_timeout_ms = std::clamp<std::int64_t>(o.lease_ms / 3, 200, 5000);
  constexpr int kAttempts = 3;  // a server still starting, a loaded machine
  for (int attempt = 1;; ++attempt) {
    try {
      return etlc::NatsStore::open(n);
    } catch (const etlc::StoreError& e) {
      if (!e.retryable() || attempt == kAttempts) {
        throw UserError("cannot use the store at " + o.store + ": " + e.what());
      }
    } catch (const std::exception& e) {
      throw UserError("cannot use the store at " + o.store + ": " + e.what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500 * attempt));
  }
#else
  throw UserError("this build has no NATS support (configure with ETLC_WITH_NATS=ON)");
#endif
}

// One member of this process: its pools, pace, counters and Driver.
struct Member {
  std::string id;
  Counters counters;
  Pacer pacer;
  std::unique_ptr<etlc::Driver> driver;
  std::thread thread;
  std::atomic<bool> done{false};
  etlc::DriverResult result;
  explicit Member(std::string i, std::uint64_t rate) : id(std::move(i)), pacer(rate) {}
};

std::unique_ptr<Member> make_member(const RunOptions& o, const std::string& id,
                                    std::shared_ptr<etlc::KvStore> store) {
  auto m = std::make_unique<Member>(id, o.throttle_rows_per_s);
  // A transaction left idle (its process stopped mid-batch) is ended by the server well before
  // the lease runs out, so a process woken from a long pause cannot commit it.
  const std::string idle_ms = std::to_string(std::max<std::int64_t>(o.lease_ms / 2, 100));
  auto sink_pool = std::make_shared<ConnPool>(
      o.sink_pg, "pg-backfill " + id,
      std::vector<std::string>{"SET idle_in_transaction_session_timeout = " + idle_ms});
  auto source_pool = std::make_shared<ConnPool>(o.source_pg, "pg-backfill " + id);
  LaneSettings ls;
  ls.source = source_pool;
  ls.sink = sink_pool;
  ls.table = o.table;
  ls.target = SinkTarget{o.job, o.sink_table, o.fence};
  ls.batch_rows = o.batch_rows;
  ls.pacer = o.throttle_rows_per_s > 0 ? &m->pacer : nullptr;
  ls.counters = &m->counters;

  PlanSettings ps{o.source_pg, o.table, o.sink_table, o.split_rows, o.plan, o.fence};
  etlc::CoordinatorConfig c;
  c.instance_id = id;
  c.max_in_flight = o.max_in_flight;
  c.lease_duration = std::chrono::milliseconds(o.lease_ms);
  c.op_timeout = std::chrono::milliseconds(std::clamp<std::int64_t>(o.lease_ms / 3, 1, 2000));
  c.rebalance_delay = std::chrono::milliseconds(o.rebalance_delay_ms);
  c.drain_deadline = std::max(c.op_timeout, std::chrono::milliseconds(5000));
  c.max_attempts = o.max_attempts;
  etlc::DriverOptions d;
  d.commit_interval = std::chrono::milliseconds(o.commit_interval_ms);
  if (o.fence) d.sink_fence = std::make_shared<PgSinkFence>(sink_pool, o.job);
  try {
    m->driver = std::make_unique<etlc::Driver>(c, std::move(store), std::make_shared<PgPlanner>(ps),
                                               std::make_shared<PgSource>(ls), d);
  } catch (const etlc::ConfigError& e) {
    throw UserError(e.what());
  }
  return m;
}

void print_summary(const std::vector<std::unique_ptr<Member>>& members, int code, double secs,
                   bool fence) {
  std::uint64_t rows = 0, batches = 0, refused = 0, lapsed = 0;
  etlc::DriverStats st;
  for (const auto& m : members) {
    rows += m->counters.rows_written;
    batches += m->counters.batches;
    refused += m->counters.refused;
    lapsed += m->counters.lapsed;
    const auto s = m->driver->stats();
    st.completed += s.completed;
    st.lost += s.lost;
    st.lapsed += s.lapsed;
    st.sink_refused += s.sink_refused;
    st.sink_resumed += s.sink_resumed;
    st.resumed += s.resumed;
  }
  const char* verdict = code == 0 ? "complete" : code == 1 ? "FAILED" : "interrupted";
  std::printf("pg-backfill: job %s in %.1f s\n", verdict, secs);
  std::printf("  this process   %llu rows in %llu batches (%.0f rows/s), %llu splits completed\n",
              static_cast<unsigned long long>(rows), static_cast<unsigned long long>(batches),
              static_cast<double>(rows) / std::max(secs, 1e-9),
              static_cast<unsigned long long>(st.completed));
  std::printf(
      "  ownership      %llu grants resumed (%llu from the sink's watermark), %llu lanes "
      "lost (%llu after a session lapse)\n",
      static_cast<unsigned long long>(st.resumed), static_cast<unsigned long long>(st.sink_resumed),
      static_cast<unsigned long long>(st.lost), static_cast<unsigned long long>(st.lapsed));
  std::printf(
      "  sink           fence %s: %llu refusals (%llu of them batches), %llu batches rolled back "
      "after a lapse\n",
      fence ? "on" : "off", static_cast<unsigned long long>(st.sink_refused),
      static_cast<unsigned long long>(refused), static_cast<unsigned long long>(lapsed));
  std::fflush(stdout);
}

}  // namespace

std::atomic<int>& stop_signal() {
  static std::atomic<int> sig{0};
  return sig;
}

int run_job(const RunOptions& opts, RunTotals* totals) {
  install_logging();
  RunOptions o = opts;
  if (o.sink_table.empty()) o.sink_table = default_sink_table(o.table);
  const bool nats = o.store != "memory";
  std::vector<std::unique_ptr<Member>> members;
  try {
    validate(o, nats);
    check_databases(o);
    auto store = open_store(o);
    const std::string prefix =
        o.instance.empty() ? (nats ? default_instance() : "member") : o.instance;
    for (std::uint32_t i = 0; i < o.members; ++i) {
      members.push_back(make_member(
          o, nats || o.members == 1 ? prefix : prefix + "-" + std::to_string(i), store));
    }
  } catch (const UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  const bool show = o.progress != "none";
  if (show) {
    std::printf("pg-backfill: %u member%s of job '%s' on %s: %s -> %s, fence %s\n", o.members,
                o.members == 1 ? "" : "s", o.job.c_str(),
                nats ? o.store.c_str() : "the memory store", o.table.c_str(), o.sink_table.c_str(),
                o.fence ? "on (exactly-once)" : "off (at-least-once)");
    std::fflush(stdout);
  }
  const auto t0 = Clock::now();
  for (auto& m : members) {
    Member* raw = m.get();
    raw->thread = std::thread([raw] {
      raw->result = raw->driver->run();
      raw->done = true;
    });
  }
  bool stopping = false;
  auto last_line = t0;
  for (;;) {
    if (stop_signal() != 0 && !stopping) {
      stopping = true;
      if (show) std::printf("pg-backfill: signal %d: stopping gracefully\n", stop_signal().load());
      for (auto& m : members) m->driver->request_stop();
    }
    const bool all_done =
        std::all_of(members.begin(), members.end(), [](const auto& m) { return m->done.load(); });
    if (all_done) break;
    if (show && Clock::now() - last_line >= std::chrono::seconds(2)) {
      last_line = Clock::now();
      std::uint64_t rows = 0, lanes = 0;
      for (auto& m : members) {
        rows += m->counters.rows_written;
        lanes += m->driver->stats().lanes_open;
      }
      std::printf("pg-backfill: %.0f s: %llu rows written by this process, %llu lanes open\n",
                  std::chrono::duration<double>(Clock::now() - t0).count(),
                  static_cast<unsigned long long>(rows), static_cast<unsigned long long>(lanes));
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& m : members) m->thread.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  int code = 0;
  for (auto& m : members) {
    if (m->result.ok()) continue;
    if (m->result.exit == etlc::DriverExit::stopped) {
      if (code == 0) code = 128 + (stop_signal() != 0 ? stop_signal().load() : SIGTERM);
      continue;
    }
    std::fprintf(stderr, "error: %s: %s: %s\n", m->id.c_str(),
                 std::string(etlc::to_string(m->result.exit)).c_str(), m->result.message.c_str());
    code = 1;
  }
  if (show) print_summary(members, code, secs, o.fence);
  if (totals != nullptr) {
    totals->seconds = secs;
    for (auto& m : members) {
      totals->rows_written += m->counters.rows_written;
      totals->batches += m->counters.batches;
    }
  }
  return code;
}

}  // namespace pgb
