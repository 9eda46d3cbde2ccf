// file-backfill: a coordinated ETL job, CSV files in a directory -> JSON Lines, and the project's
// demo. Subcommands: generate, run, verify, bench (see README.md and docs/custom-sources.md).
// The command line is stable: scripts rely on it.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "bench.hpp"
#include "generate.hpp"
#include "plan.hpp"
#include "progress.hpp"
#include "run.hpp"
#include "signals.hpp"
#include "verify.hpp"

int main(int argc, char** argv) {
  CLI::App app{"file-backfill: CSV files -> JSON Lines, coordinated across members"};
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 done (run: the job completed, or SIGINT/SIGTERM stopped this member "
      "gracefully with every split released); 1 failed (run: fatal; verify: rows missing); "
      "2 bad usage, input or configuration; 3 run: the job stalled (quarantined splits).");

  fb::GenerateOptions gen;
  auto* g = app.add_subcommand("generate", "write a skewed CSV input set");
  g->add_option("--output", gen.output, "directory to write part-NNNNN.csv into")->required();
  g->add_option("--files", gen.files, "number of files")->required();
  g->add_option("--total-bytes", gen.total_bytes, "approximate total size in bytes")->required();
  g->add_option("--seed", gen.seed, "seed (the same seed gives the same files)")->required();
  g->add_option("--malformed", gen.malformed, "malformed rows to plant (default 0)");
  g->add_option("--one-big", gen.one_big,
                "F > 0: the files are of one size but the last, F times larger (default 0: "
                "heavy-tailed sizes)");

  fb::RunOptions run;
  auto* r = app.add_subcommand("run", "run the job (or this process's member of it)");
  r->add_option("--input", run.input, "directory of *.csv files")->required();
  r->add_option("--output", run.output, "directory for data/ and rejects/")->required();
  r->add_option("--store", run.store,
                "memory, or nats://HOST:PORT (comma-separated: a cluster; default memory, or "
                "$NATS_URL)")
      ->envname("NATS_URL");
  r->add_option("--replicas", run.replicas,
                "NATS: replicas of the job's bucket if it is created (or $ETLC_NATS_REPLICAS)")
      ->envname("ETLC_NATS_REPLICAS")
      ->check(CLI::Range(1, 5))
      ->capture_default_str();
  r->add_option("--job", run.job, "job name (the NATS bucket is derived from it)")
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
  r->add_option("--split-bytes", run.split_bytes,
                "target split size (larger files are cut into ranges of at least 64 KiB)")
      ->capture_default_str();
  r->add_option("--cut-files", run.cut_files,
                "cut files larger than --split-bytes into ranges at plan time (true|false)")
      ->capture_default_str();
  r->add_option("--dynamic-splitting", run.dynamic_splitting,
                "idle lanes take the unread tail of splits under way (true|false)")
      ->capture_default_str();
  r->add_option("--kill-member-at", run.kill_member_at,
                "crash one in-process member at this percent of the input (memory store)");
  r->add_option("--restart-at", run.restart_at, "restart it under the same id at this percent");
  r->add_option("--commit-interval-ms", run.commit_interval_ms, "progress commit interval")
      ->capture_default_str();
  r->add_option("--throttle-bytes-per-s", run.throttle_bytes_per_s,
                "limit each member's read rate, or each lane's (--throttle-per; 0 = unlimited)");
  r->add_option("--throttle-per", run.throttle_per,
                "member: a member's lanes share the limit (a member-wide resource); lane: each "
                "lane has its own (a per-reader limit of the source)")
      ->check(CLI::IsMember({"member", "lane"}))
      ->capture_default_str();
  r->add_option("--moves-log", run.moves_log,
                "append 'job-fraction split-fraction split member' per split resumed from a "
                "commit (moves and takeovers), for measuring the tail of a job");
  r->add_flag("--drain-on-stall", run.drain_on_stall,
              "a stalled job (quarantined splits) exits 0 with a warning instead of failing");
  r->add_option("--progress", run.progress, "auto | live | plain | none")
      ->check(CLI::IsMember({"auto", "live", "plain", "none"}))
      ->capture_default_str();
  // NATS connection options and variables, the same as the etlc tool's.
  r->add_option("--bucket", run.bucket, "explicit NATS bucket (or $ETLC_BUCKET)")
      ->envname("ETLC_BUCKET");
  r->add_option("--user", run.user, "NATS user, with --password (or $ETLC_NATS_USER)")
      ->envname("ETLC_NATS_USER");
  r->add_option("--password", run.password, "NATS password (or $ETLC_NATS_PASSWORD)")
      ->envname("ETLC_NATS_PASSWORD");
  r->add_option("--token", run.token, "NATS token (or $ETLC_NATS_TOKEN)")
      ->envname("ETLC_NATS_TOKEN");
  r->add_option("--creds", run.credentials_file,
                "NATS credentials file, user JWT + NKey seed (or $ETLC_NATS_CREDS)")
      ->envname("ETLC_NATS_CREDS");
  r->add_flag("--tls", run.tls, "require TLS (or $ETLC_NATS_TLS=1)")->envname("ETLC_NATS_TLS");
  r->add_option("--tls-ca", run.tls_ca, "CA certificate(s), PEM (or $ETLC_NATS_TLS_CA)")
      ->envname("ETLC_NATS_TLS_CA");
  r->add_option("--tls-cert", run.tls_cert, "client certificate, PEM (or $ETLC_NATS_TLS_CERT)")
      ->envname("ETLC_NATS_TLS_CERT");
  r->add_option("--tls-key", run.tls_key, "client private key, PEM (or $ETLC_NATS_TLS_KEY)")
      ->envname("ETLC_NATS_TLS_KEY");
  r->add_option("--startup-wait-ms", run.startup_wait_ms,
                "how long to wait for a NATS server that is not up yet (or $ETLC_STARTUP_WAIT_MS)")
      ->envname("ETLC_STARTUP_WAIT_MS")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{600'000}))
      ->capture_default_str();
  r->add_option("--metrics-port", run.metrics_port,
                "serve Prometheus /metrics and /healthz on 127.0.0.1:PORT (0 = a free port)")
      ->check(CLI::Range(0, 65535));

  std::filesystem::path v_input, v_output;
  auto* v = app.add_subcommand("verify", "check that every input row is in the output");
  v->add_option("--input", v_input, "the job's input directory")->required();
  v->add_option("--output", v_output, "the job's output directory")->required();

  fb::BenchOptions b;
  auto* be = app.add_subcommand("bench", "throughput with 1, 2, 4 members vs. a plain loop");
  be->add_option("--input", b.input, "directory of *.csv files")->required();
  be->add_option("--output", b.output, "scratch directory")->required();
  be->add_option("--members", b.members, "member counts to measure (1,2,4)")
      ->delimiter(',')
      ->capture_default_str();
  be->add_option("--max-in-flight", b.max_in_flight, "lanes per member")->capture_default_str();
  be->add_option("--split-bytes", b.split_bytes,
                 "target split size (larger files are cut into ranges of at least 64 KiB)")
      ->capture_default_str();
  be->add_option("--commit-interval-ms", b.commit_interval_ms, "progress commit interval")
      ->capture_default_str();
  be->add_option("--repeat", b.repeat, "runs per configuration (the median is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  }

  try {
    if (*g) {
      const fb::GenerateReport rep = fb::generate(gen);
      std::printf("generated %llu files, %s, %llu rows (%llu malformed) in %s\n",
                  static_cast<unsigned long long>(rep.files),
                  fb::human_bytes(static_cast<double>(rep.bytes)).c_str(),
                  static_cast<unsigned long long>(rep.rows),
                  static_cast<unsigned long long>(rep.malformed), gen.output.c_str());
      return 0;
    }
    if (*r || *be) {
      // Before any thread starts, so that only the watcher receives SIGINT/SIGTERM: the job then
      // stops gracefully and releases its splits.
      fb::SignalWatcher signals([](int sig) { fb::stop_signal() = sig; });
      return *r ? fb::run_job(run) : fb::bench(b);
    }
    if (*v) {
      const fb::VerifyReport rep = fb::verify(v_input, v_output);
      std::printf("verify: %llu input rows in %llu files (%llu malformed, not expected)\n",
                  static_cast<unsigned long long>(rep.rows),
                  static_cast<unsigned long long>(rep.input_files),
                  static_cast<unsigned long long>(rep.malformed));
      std::printf(
          "verify: %llu output lines in %llu files: rows %llu, missing %llu, duplicates "
          "%llu, wrong %llu, unknown %llu, invalid %llu, torn tails %llu\n",
          static_cast<unsigned long long>(rep.output_lines),
          static_cast<unsigned long long>(rep.output_files),
          static_cast<unsigned long long>(rep.rows - rep.missing),
          static_cast<unsigned long long>(rep.missing),
          static_cast<unsigned long long>(rep.duplicates),
          static_cast<unsigned long long>(rep.wrong), static_cast<unsigned long long>(rep.unknown),
          static_cast<unsigned long long>(rep.invalid), static_cast<unsigned long long>(rep.torn));
      for (const auto& p : rep.problems) std::printf("  %s\n", p.c_str());
      std::printf("verify: %s\n", rep.ok() ? "OK" : "FAILED");
      return rep.ok() ? 0 : 1;
    }
  } catch (const fb::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 2;
}
