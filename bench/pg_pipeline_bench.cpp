// pg_pipeline_bench: rows per second of the PostgreSQL backfill (examples/pg_backfill) with and
// without the sink fence, with 1 and 3 members, on a PostgreSQL server it starts itself
// (tests/support/pg_server: a temp dir, a random loopback port, fsync and synchronous commit ON,
// so every batch is a real durable commit). Members run in this process on the memory store
// (the coordination store is not the bottleneck: one commit per lane per commit interval).
//
// Each configuration runs --repeat times on a freshly emptied sink; the median is reported, and
// every fenced run is verified (0 missing, 0 duplicates) before its figure counts.
//   pg_pipeline_bench [--rows 300000] [--batch-rows 100,1000] [--members 1,3] [--repeat 3]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "generate.hpp"
#include "pg.hpp"
#include "run.hpp"
#include "schema.hpp"
#include "support/pg_server.hpp"
#include "verify.hpp"

int main(int argc, char** argv) {
  CLI::App app{"pg_pipeline_bench: PostgreSQL backfill throughput, fence on vs off"};
  std::uint64_t rows = 300'000;
  std::vector<std::uint32_t> batches{100, 1000};
  std::vector<std::uint32_t> members{1, 3};
  int repeat = 3;
  app.add_option("--rows", rows, "source rows")->capture_default_str();
  app.add_option("--batch-rows", batches, "rows per sink transaction")->delimiter(',');
  app.add_option("--members", members, "member counts")->delimiter(',');
  app.add_option("--repeat", repeat, "runs per configuration (median)")->check(CLI::Range(1, 50));
  CLI11_PARSE(app, argc, argv);

  etlc::testing::PgServerConfig cfg;
  cfg.databases = {"bench"};
  cfg.durable = true;
  etlc::testing::PgServer pg(cfg);
  const std::string url = pg.url("bench");
  pgb::GenerateOptions g{url, "orders", rows, 1, 6};
  pgb::generate(g);
  {
    pgb::Connection c(url, "bench");
    pgb::create_sink(c, "orders_sink");
  }
  std::printf(
      "pg_pipeline_bench: %llu rows, PostgreSQL %s (fsync on), splits of %llu rows, "
      "2 lanes per member, memory store\n",
      static_cast<unsigned long long>(rows), url.c_str(),
      static_cast<unsigned long long>(std::max<std::uint64_t>(rows / 24, 1)));
  std::printf("%-7s %-7s %-6s %12s   %s\n", "members", "batch", "fence", "rows/s",
              "runs (rows/s, in order)");
  int job = 0;
  // One run: the rows/s it reached (fenced runs verified exactly-once first), or < 0 on failure.
  auto one = [&](std::uint32_t m, std::uint32_t batch, bool fence) -> double {
    pg.exec("bench", "TRUNCATE orders_sink, etlc_sink_fence");
    pgb::RunOptions o;
    o.source_pg = o.sink_pg = url;
    o.table = "orders";
    o.job = fmt::format("bench-{}", ++job);
    o.members = m;
    o.max_in_flight = 2;
    o.batch_rows = batch;
    o.split_rows = std::max<std::uint64_t>(rows / 24, 1);
    o.lease_ms = 3000;
    o.rebalance_delay_ms = 0;
    o.fence = fence;
    o.progress = "none";
    pgb::RunTotals t;
    if (pgb::run_job(o, &t) != 0) return -1;
    if (fence) {
      const auto v = pgb::verify({url, url, "orders", "orders_sink"});
      if (!v.ok()) return -1;
    }
    return static_cast<double>(t.rows_written) / t.seconds;
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (std::uint32_t batch : batches) {
    for (std::uint32_t m : members) {
      // Off and on alternate, so drift in the machine's other load hits both alike.
      std::vector<double> off, on;
      for (int r = 0; r < repeat; ++r) {
        off.push_back(one(m, batch, false));
        on.push_back(one(m, batch, true));
        if (off.back() < 0 || on.back() < 0) {
          std::fprintf(stderr, "a run failed (or a fenced run was not exactly-once)\n");
          return 1;
        }
      }
      for (bool fence : {false, true}) {
        const auto& v = fence ? on : off;
        std::string all;
        for (double x : v) all += fmt::format(" {:.0f}", x);
        const std::string cmp =
            fence ? fmt::format("   ({:+.1f}% vs off)", (median(on) / median(off) - 1) * 100) : "";
        std::printf("%-7u %-7u %-6s %12.0f  %s%s\n", m, batch, fence ? "on" : "off", median(v),
                    all.c_str(), cmp.c_str());
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
