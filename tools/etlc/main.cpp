// etlc: operate a coordinated job (see `etlc --help` and docs/operations.md).
#include <fmt/format.h>
#include <signal.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>

#include "cli.hpp"

namespace {

constexpr const char* kFooter =
    R"(Exit codes: 0 ok; 1 job not found; 2 usage error; 3 store unreachable
(or refused the connection); 4 refused (a requeue of a split that is not quarantined, a record
that kept changing, delete/reset while members are live, seek of a split a live member holds);
5 unexpected failure.
Lifecycle commands (pause, resume, delete, reset, seek, repair) write an audit line to stderr and syslog.
--json output shapes (schema etlc.status.v1, etlc.splits.v1, etlc.requeue.v1, etlc.cordon.v1,
etlc.pause.v1, etlc.resume.v1, etlc.delete.v1, etlc.reset.v1, etlc.seek.v1, etlc.repair.v1) are described in
docs/operations.md. Connection options also come from the environment (NATS_URL, ETLC_JOB,
ETLC_BUCKET, ETLC_NATS_*), the same variables a member's etlc::config_from_env reads.)";

std::string default_server() {
  const char* env = std::getenv("NATS_URL");
  return env != nullptr && *env != '\0' ? env : "nats://127.0.0.1:4222";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace etlc::cli;
  signal(SIGPIPE, SIG_IGN);  // a closed pipe is an error on write, not a silent death

  CLI::App app{"etlc: inspect and operate a coordinated etl job in its NATS bucket", "etlc"};
  app.footer(kFooter);
  app.require_subcommand(1);
  app.fallthrough();  // connection options may follow the subcommand too

  ConnectOptions c;
  c.servers = {default_server()};
  app.add_option("--nats", c.servers,
                 "NATS server URL(s), comma-separated (default $NATS_URL or nats://127.0.0.1:4222)")
      ->delimiter(',');
  app.add_option("--bucket", c.bucket,
                 "Bucket name, when the job does not use the default mapping (or $ETLC_BUCKET)")
      ->envname("ETLC_BUCKET");
  app.add_option("--replicas", c.replicas,
                 "Replicas of the job's bucket (must match it; or $ETLC_NATS_REPLICAS)")
      ->envname("ETLC_NATS_REPLICAS")
      ->check(CLI::IsMember({1, 3, 5}));
  app.add_option("--user", c.user, "NATS user (with --password; or $ETLC_NATS_USER)")
      ->envname("ETLC_NATS_USER");
  app.add_option("--password", c.password, "NATS password (or $ETLC_NATS_PASSWORD)")
      ->envname("ETLC_NATS_PASSWORD");
  app.add_option("--token", c.token, "NATS token (or $ETLC_NATS_TOKEN)")
      ->envname("ETLC_NATS_TOKEN");
  app.add_option("--creds", c.credentials_file,
                 "NATS credentials file (user JWT + NKey seed; or $ETLC_NATS_CREDS)")
      ->envname("ETLC_NATS_CREDS");
  app.add_flag("--tls", c.tls, "Require TLS (or $ETLC_NATS_TLS=1)")->envname("ETLC_NATS_TLS");
  app.add_option("--tls-ca", c.tls_ca,
                 "CA certificate(s) (PEM) that signed the servers' (or $ETLC_NATS_TLS_CA)")
      ->envname("ETLC_NATS_TLS_CA");
  app.add_option("--tls-cert", c.tls_cert,
                 "Client certificate (PEM), with --tls-key (or $ETLC_NATS_TLS_CERT)")
      ->envname("ETLC_NATS_TLS_CERT");
  app.add_option("--tls-key", c.tls_key, "Client private key (PEM; or $ETLC_NATS_TLS_KEY)")
      ->envname("ETLC_NATS_TLS_KEY");
  app.add_option("--timeout-ms", c.timeout_ms, "Bound on connecting and on each store request")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{600'000}));

  bool json = false;
  auto add_job = [&](CLI::App* sc) {
    sc->add_option("--job,-j", c.job, "The job (its name selects the bucket; or $ETLC_JOB)")
        ->envname("ETLC_JOB")
        ->required();
  };
  auto add_json = [&](CLI::App* sc) {
    sc->add_flag("--json", json, "Machine-readable output (stable shape, see docs/operations.md)");
  };

  CLI::App* status = app.add_subcommand(
      "status", "Leader, plan, members (lanes, held, assigned, weight), moves in flight, balance");
  add_job(status);
  add_json(status);

  SplitsArgs splits_args;
  std::string status_filter;
  CLI::App* splits = app.add_subcommand("splits", "List split records");
  add_job(splits);
  add_json(splits);
  splits->add_option("--status", status_filter, "Only splits in this state")
      ->check(CLI::IsMember({"runnable", "completed", "quarantined"}));
  splits->add_option("--owner", splits_args.owner, "Only splits whose record names this instance");
  splits->add_option("--limit", splits_args.limit, "Rows shown at most (0 = all)")
      ->capture_default_str();

  std::vector<std::string> ids;
  CLI::App* requeue = app.add_subcommand(
      "requeue", "Return quarantined splits to the pool (attempts reset); refuses anything else");
  add_job(requeue);
  add_json(requeue);
  requeue->add_option("split", ids, "Split ids")->required();

  std::string instance;
  std::string reason;
  CLI::App* cordon = app.add_subcommand(
      "cordon", "Stop assigning to a member and drain its splits away cooperatively");
  add_job(cordon);
  add_json(cordon);
  cordon->add_option("instance", instance, "Instance id")->required();
  cordon->add_option("--reason", reason, "Why, for other operators");

  CLI::App* uncordon = app.add_subcommand("uncordon", "Give a cordoned member its lanes back");
  add_job(uncordon);
  add_json(uncordon);
  uncordon->add_option("instance", instance, "Instance id")->required();

  WatchArgs watch_args;
  CLI::App* watch = app.add_subcommand("watch", "The status view, refreshed live (Ctrl-C to stop)");
  add_job(watch);
  add_json(watch);
  watch->add_option("--interval-ms", watch_args.interval_ms, "Refresh interval")
      ->check(CLI::Range(std::int64_t{250}, std::int64_t{3'600'000}))
      ->capture_default_str();
  watch->add_option("--count", watch_args.count, "Refreshes before exiting (0 = until Ctrl-C)");

  LifecycleArgs life;
  auto add_wait = [&](CLI::App* sc) {
    sc->add_option("--wait-ms", life.wait_ms,
                   "How long to watch members' sessions to tell live ones from dead ones "
                   "(at most their lease)")
        ->check(CLI::Range(std::int64_t{0}, std::int64_t{3'600'000}))
        ->capture_default_str();
  };
  CLI::App* pause = app.add_subcommand(
      "pause", "Stop all work: members drain and release what they hold; nothing is assigned");
  add_job(pause);
  add_json(pause);
  pause->add_option("--reason", life.reason, "Why, for other operators");

  CLI::App* resume = app.add_subcommand(
      "resume",
      "Undo pause (and clear a plan whose planner failed): work continues from the "
      "committed progress");
  add_job(resume);
  add_json(resume);

  CLI::App* del = app.add_subcommand(
      "delete", "Delete the job's bucket (every record); refused while members are live");
  add_job(del);
  add_json(del);
  add_wait(del);
  del->add_flag("--force", life.force, "Delete even while members are live");
  del->add_flag("--yes", life.yes, "Confirm (required)");

  CLI::App* reset = app.add_subcommand(
      "reset", "Forget all progress; the next leader re-plans from scratch (refused while live)");
  add_job(reset);
  add_json(reset);
  add_wait(reset);
  reset->add_flag("--yes", life.yes, "Confirm (required)");

  CLI::App* seek = app.add_subcommand(
      "seek", "Set a split's progress back or forward (refused while a live member holds it)");
  add_job(seek);
  add_json(seek);
  add_wait(seek);
  seek->add_option("split", life.split, "Split id")->required();
  seek->add_option("--watermark", life.watermark, "The new watermark")->required();
  seek->add_option("--state", life.state,
                   "The new opaque progress state (default empty: what a fresh split has)");

  CLI::App* repair = app.add_subcommand(
      "repair",
      "Rebuild an unreadable or missing split record from its spec (replays the split; "
      "refused while a live member holds it)");
  add_job(repair);
  add_json(repair);
  add_wait(repair);
  repair->add_option("split", life.split, "Split id")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "etlc: " << e.what() << " (see etlc --help)\n";
    return kExitUsage;
  }
  if (!status_filter.empty()) splits_args.status = status_filter;

  try {
    if (status->parsed()) return run_status(c, json);
    if (splits->parsed()) return run_splits(c, splits_args, json);
    if (requeue->parsed()) return run_requeue(c, ids, json);
    if (cordon->parsed()) return run_cordon(c, instance, reason, json);
    if (uncordon->parsed()) return run_uncordon(c, instance, json);
    if (watch->parsed()) return run_watch(c, watch_args, json);
    if (pause->parsed()) return run_pause(c, life, json);
    if (resume->parsed()) return run_resume(c, json);
    if (del->parsed()) return run_delete(c, life, json);
    if (reset->parsed()) return run_reset(c, life, json);
    if (seek->parsed()) return run_seek(c, life, json);
    if (repair->parsed()) return run_repair(c, life, json);
  } catch (const CliError& e) {
    std::cerr << "etlc: " << e.what() << '\n';
    return e.code();
  } catch (const std::exception& e) {
    std::cerr << "etlc: unexpected error: " << e.what() << '\n';
    return kExitInternal;
  }
  std::cerr << "etlc: no command (see etlc --help)\n";
  return kExitUsage;
}
