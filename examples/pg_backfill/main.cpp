// pg-backfill: a coordinated PostgreSQL range scan that copies a table into a sink table with
// exactly-once output (the split's epoch fences the sink). Subcommands: generate, init-sink, plan,
// run, verify. See README.md and docs/exactly-once.md. The command line is stable: tests rely on
// it.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "generate.hpp"
#include "pg.hpp"
#include "plan.hpp"
#include "run.hpp"
#include "schema.hpp"
#include "signals.hpp"
#include "verify.hpp"

namespace {

int plan_command(const pgb::PlanSettings& s) {
  const auto ranges = pgb::PgPlanner(s).ranges();
  std::uint64_t total = 0, most = 0, least = UINT64_MAX;
  for (const auto& r : ranges) {
    total += r.rows;
    most = std::max(most, r.rows);
    least = std::min(least, r.rows);
  }
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    std::printf("%s  ids %lld .. %lld  rows %llu\n", pgb::split_id(i).c_str(),
                static_cast<long long>(ranges[i].lo), static_cast<long long>(ranges[i].hi),
                static_cast<unsigned long long>(ranges[i].rows));
  }
  std::printf("plan: %zu splits, %llu rows, %llu .. %llu rows per split\n", ranges.size(),
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(least),
              static_cast<unsigned long long>(most));
  return 0;
}

pgb::PlanFrom plan_from(const std::string& s) {
  return s == "stats" ? pgb::PlanFrom::stats : pgb::PlanFrom::count;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pg-backfill: a coordinated PostgreSQL range scan with exactly-once output"};
  app.require_subcommand(1);

  pgb::GenerateOptions gen;
  auto* g = app.add_subcommand("generate", "create a source table: sparse ids, dense hot ranges");
  g->add_option("--pg", gen.pg, "database URL")->required();
  g->add_option("--table", gen.table, "table to (re)create")->required();
  g->add_option("--rows", gen.rows, "rows")->required();
  g->add_option("--seed", gen.seed, "seed (the same seed gives the same rows)")->required();
  g->add_option("--clusters", gen.clusters, "dense hot ranges (70 % of the rows)")
      ->capture_default_str();

  std::string is_pg, is_table, is_sink;
  auto* is = app.add_subcommand("init-sink", "create the sink table and the fence table");
  is->add_option("--sink-pg", is_pg, "sink database URL")->required();
  is->add_option("--table", is_table, "the source table's name")->required();
  is->add_option("--sink-table", is_sink, "sink table (default <table>_sink)");

  pgb::PlanSettings ps;
  std::string ps_from = "count";
  auto* p = app.add_subcommand("plan", "print the splits the leader would plan");
  p->add_option("--source-pg", ps.source_pg, "source database URL")->required();
  p->add_option("--table", ps.table, "source table")->required();
  p->add_option("--split-rows", ps.split_rows, "target rows per split")->capture_default_str();
  p->add_option("--plan-from", ps_from, "count (exact) or stats (pg_stats)")
      ->check(CLI::IsMember({"count", "stats"}))
      ->capture_default_str();

  pgb::RunOptions run;
  std::string run_from = "count";
  bool no_fence = false;
  auto* r = app.add_subcommand("run", "run the job (or this process's member of it)");
  r->add_option("--source-pg", run.source_pg, "source database URL")->required();
  r->add_option("--sink-pg", run.sink_pg, "sink database URL")->required();
  r->add_option("--table", run.table, "source table")->required();
  r->add_option("--sink-table", run.sink_table, "sink table (default <table>_sink)");
  r->add_option("--store", run.store, "memory, or nats://HOST:PORT")->capture_default_str();
  r->add_option("--job", run.job, "job name (the NATS bucket and the fence rows' job)")
      ->capture_default_str();
  r->add_option("--instance", run.instance,
                "member id (stable across restarts); with --members, the prefix of the ids");
  r->add_option("--members", run.members, "members in this process (memory store)")
      ->capture_default_str();
  r->add_option("--max-in-flight", run.max_in_flight, "lanes per member")->capture_default_str();
  r->add_option("--lease-ms", run.lease_ms, "session lease")->capture_default_str();
  r->add_option("--rebalance-delay-ms", run.rebalance_delay_ms,
                "how long a departed member's splits wait for it")
      ->capture_default_str();
  r->add_option("--commit-interval-ms", run.commit_interval_ms, "coordination commit interval")
      ->capture_default_str();
  r->add_option("--throttle-rows-per-s", run.throttle_rows_per_s,
                "limit each member's rate (0 = unlimited; for demos and tests)")
      ->capture_default_str();
  r->add_option("--batch-rows", run.batch_rows, "rows per page and sink transaction")
      ->capture_default_str();
  r->add_option("--split-rows", run.split_rows, "target rows per split")->capture_default_str();
  r->add_option("--max-attempts", run.max_attempts, "non-graceful ends before quarantine")
      ->capture_default_str();
  r->add_option("--plan-from", run_from, "count (exact) or stats (pg_stats)")
      ->check(CLI::IsMember({"count", "stats"}))
      ->capture_default_str();
  r->add_flag("--no-fence", no_fence,
              "write without the sink fence: at-least-once (a takeover can duplicate rows)");
  r->add_option("--progress", run.progress, "plain | none")
      ->check(CLI::IsMember({"plain", "none"}))
      ->capture_default_str();

  pgb::VerifyOptions vo;
  auto* v = app.add_subcommand("verify", "check that the sink holds every source row exactly once");
  v->add_option("--source-pg", vo.source_pg, "source database URL")->required();
  v->add_option("--sink-pg", vo.sink_pg, "sink database URL")->required();
  v->add_option("--table", vo.table, "source table")->required();
  v->add_option("--sink-table", vo.sink_table, "sink table (default <table>_sink)");

  CLI11_PARSE(app, argc, argv);

  try {
    if (*g) {
      const auto rep = pgb::generate(gen);
      std::printf("generated %llu rows in %s (ids %lld .. %lld, %llu in %u dense ranges)\n",
                  static_cast<unsigned long long>(rep.rows), gen.table.c_str(),
                  static_cast<long long>(rep.min_id), static_cast<long long>(rep.max_id),
                  static_cast<unsigned long long>(rep.dense_rows), gen.clusters);
      return 0;
    }
    if (*is) {
      pgb::check_table_name(is_table, "--table");
      if (is_sink.empty()) is_sink = pgb::default_sink_table(is_table);
      pgb::check_table_name(is_sink, "--sink-table");
      pgb::Connection c(is_pg, "pg-backfill init-sink");
      pgb::create_sink(c, is_sink);
      std::printf("sink tables ready: %s, %s\n", is_sink.c_str(),
                  std::string(pgb::kFenceTable).c_str());
      return 0;
    }
    if (*p) {
      pgb::check_table_name(ps.table, "--table");
      ps.from = plan_from(ps_from);
      return plan_command(ps);
    }
    if (*r) {
      run.plan = plan_from(run_from);
      run.fence = !no_fence;
      // Before any thread starts, so that only the watcher receives SIGINT/SIGTERM.
      pgb::SignalWatcher signals([](int sig) { pgb::stop_signal() = sig; });
      return pgb::run_job(run);
    }
    if (*v) {
      if (vo.sink_table.empty()) vo.sink_table = pgb::default_sink_table(vo.table);
      const auto rep = pgb::verify(vo);
      std::printf("verify: %llu source rows, %llu sink rows\n",
                  static_cast<unsigned long long>(rep.source_rows),
                  static_cast<unsigned long long>(rep.sink_rows));
      std::printf("missing %llu, duplicates %llu\n", static_cast<unsigned long long>(rep.missing),
                  static_cast<unsigned long long>(rep.duplicates));
      std::printf("unexpected %llu, wrong %llu\n", static_cast<unsigned long long>(rep.unexpected),
                  static_cast<unsigned long long>(rep.wrong));
      std::printf("verify: %s\n", rep.ok() ? "OK" : "FAILED");
      return rep.ok() ? 0 : 1;
    }
  } catch (const pgb::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const pgb::PgError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.connection_lost() ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 2;
}
