// fleet_bench: fleet-level benchmarks of the coordination runtime, on the memory store or on a
// real nats-server. Members run in thread mode (Coordinator::start, SystemClock) in this process,
// each with its own store connection on NATS. See docs/performance.md ("Fleet") for the figures
// and the commands that produced them.
//
//   fleet_bench [--store memory|nats] [--nats-url URL] [--repeat N] [--json]
//               [--targeted-watches on|off] <scenario> [options]
//   scenarios: handoff, failover, store-cost, cold-start, scale-out, commit
//
// Without --nats-url, every run starts its own nats-server (the Debian package) on a loopback
// random port with a temporary store directory. --json prints one document (schema
// "fleet_bench/1"): keys are only ever added, never renamed, so runs compare across versions.
#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <functional>
#include <iostream>
#include <map>

#include "scenarios.hpp"

namespace etlc::bench {

Json latency_json(const std::vector<double>& ms) {
  auto num = [](double v) { return std::isnan(v) ? Json(nullptr) : Json(v); };
  return {{"n", ms.size()},
          {"p50", num(median(ms))},
          {"p90", num(percentile(ms, 90))},
          {"p99", num(percentile(ms, 99))},
          {"max", num(percentile(ms, 100))}};
}

CoordinatorConfig bench_config() {
  return CoordinatorConfig{};  // the library's defaults; scenarios override what they measure
}

}  // namespace etlc::bench

namespace {

using namespace etlc::bench;

std::vector<std::size_t> parse_list(const std::string& s) {
  std::vector<std::size_t> out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t comma = s.find(',', pos);
    out.push_back(std::stoull(s.substr(pos, comma - pos)));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

Json num_or_null(double v) {
  return std::isnan(v) ? Json(nullptr) : Json(v);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fleet_bench: handoff, failover, store cost, cold start, scale-out, commits"};
  BackendOptions backend;
  bool json = false;
  int repeat = 1;
  app.add_option("--store", backend.store, "memory or nats")
      ->check(CLI::IsMember({"memory", "nats"}));
  app.add_option("--nats-url", backend.nats_url,
                 "an existing server (default: start a nats-server per run)");
  app.add_option("--nats-history", backend.nats_history, "values kept per key in the bucket")
      ->check(CLI::Range(1, 64));
  app.add_option("--nats-op-timeout-ms", backend.nats_op_timeout_ms,
                 "NatsStoreOptions::op_timeout_ms (default: the library's, 5000)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{600000}));
  app.add_flag("--json", json, "print one JSON document instead of tables");
  app.add_option("--repeat", repeat, "runs of the scenario (medians reported)")
      ->check(CLI::Range(1, 100));
  std::string targeted;
  app.add_option("--targeted-watches", targeted,
                 "every member's Member::Options::targeted_watches (decision 0009; default: the "
                 "library's)")
      ->check(CLI::IsMember({"on", "off"}));
  app.require_subcommand(1);

  std::string scenario;
  std::function<Result()> run;
  Json options = Json::object();

  HandoffOptions ho;
  auto* h = app.add_subcommand("handoff", "release_drained -> assignee's claim durable");
  h->add_option("--handoffs", ho.handoffs, "samples");
  h->add_option("--splits", ho.splits);
  h->add_flag("--plain-workers", ho.plain_workers,
              "hand off between two plain workers: a leader and a standby start first, cordoned");
  h->callback([&] {
    scenario = "handoff";
    options = {
        {"handoffs", ho.handoffs}, {"splits", ho.splits}, {"plain_workers", ho.plain_workers}};
    run = [&] { return run_handoff(backend, ho); };
  });

  FailoverOptions fo;
  auto* f = app.add_subcommand("failover", "kill a member (or the leader): time to move its work");
  f->add_option("--members", fo.members);
  f->add_option("--splits", fo.splits);
  f->add_option("--rounds", fo.rounds);
  f->add_option("--lease-ms", fo.lease_ms);
  f->add_option("--op-timeout-ms", fo.op_timeout_ms);
  f->add_option("--rebalance-delay-ms", fo.rebalance_delay_ms);
  f->add_flag("--leader", fo.leader, "kill the leader");
  f->add_option("--lanes", fo.lanes, "lanes per member (default: splits, at most 1024)");
  f->add_option(
      "--settle-timeout-s", fo.settle_timeout_s,
      "bound on settling before each round (seeding and claiming 10^5 splits takes longer)");
  f->callback([&] {
    scenario = fo.leader ? "failover-leader" : "failover";
    options = {{"members", fo.members},
               {"splits", fo.splits},
               {"rounds", fo.rounds},
               {"lease_ms", fo.lease_ms},
               {"op_timeout_ms", fo.op_timeout_ms},
               {"rebalance_delay_ms", fo.rebalance_delay_ms},
               {"leader", fo.leader},
               {"settle_timeout_s", fo.settle_timeout_s},
               {"lanes", fo.lanes}};
    run = [&] { return run_failover(backend, fo); };
  });

  StoreCostOptions so;
  std::string so_members = "10,50,200", so_splits = "1000,10000,100000";
  auto* s = app.add_subcommand("store-cost", "steady-state writes and watch events per member");
  s->add_option("--members", so_members, "comma-separated list");
  s->add_option("--splits", so_splits, "comma-separated list");
  s->add_option("--lanes", so.lanes);
  s->add_option("--lease-ms", so.lease_ms);
  s->add_option("--window-s", so.window_s);
  s->add_option("--setup-timeout-s", so.setup_timeout_s);
  s->callback([&] {
    scenario = "store-cost";
    so.members = parse_list(so_members);
    so.splits = parse_list(so_splits);
    options = {{"members", so.members},
               {"splits", so.splits},
               {"lanes", so.lanes},
               {"lease_ms", so.lease_ms},
               {"window_s", so.window_s}};
    run = [&] { return run_store_cost(backend, so); };
  });

  ColdStartOptions co;
  auto* c = app.add_subcommand("cold-start", "empty store -> plan seeded and every lane filled");
  c->add_option("--members", co.members);
  c->add_option("--splits", co.splits);
  c->add_option("--lanes", co.lanes);
  c->add_option("--start-threads", co.start_threads);
  c->add_option("--timeout-s", co.timeout_s);
  c->add_flag("--trace", co.trace, "trace every member's store calls (seeding breakdown)");
  c->add_option("--bulk-ops-per-step", co.bulk_ops_per_step, "config knob (default: library's)");
  c->add_option("--assignment-interval-ms", co.assignment_interval_ms,
                "config knob (default: library's)");
  c->callback([&] {
    scenario = "cold-start";
    options = {{"members", co.members},
               {"splits", co.splits},
               {"lanes", co.lanes},
               {"start_threads", co.start_threads},
               {"bulk_ops_per_step", co.bulk_ops_per_step},
               {"assignment_interval_ms", co.assignment_interval_ms}};
    run = [&] { return run_cold_start(backend, co); };
  });

  ScaleOutOptions xo;
  auto* x = app.add_subcommand("scale-out", "members join a loaded fleet: time to balance");
  x->add_option("--members", xo.members);
  x->add_option("--join", xo.join);
  x->add_option("--splits", xo.splits);
  x->add_option("--lanes", xo.lanes);
  x->add_option("--timeout-s", xo.timeout_s);
  x->callback([&] {
    scenario = "scale-out";
    options = {
        {"members", xo.members}, {"join", xo.join}, {"splits", xo.splits}, {"lanes", xo.lanes}};
    run = [&] { return run_scale_out(backend, xo); };
  });

  CommitOptions mo;
  auto* m = app.add_subcommand("commit", "fenced commits per second from one member");
  m->add_option("--lanes", mo.lanes);
  m->add_option("--seconds", mo.seconds);
  m->add_option("--state-bytes", mo.state_bytes);
  m->callback([&] {
    scenario = "commit";
    options = {{"lanes", mo.lanes}, {"seconds", mo.seconds}, {"state_bytes", mo.state_bytes}};
    run = [&] { return run_commit(backend, mo); };
  });

  CLI11_PARSE(app, argc, argv);
  if (!targeted.empty()) backend.targeted_watches = targeted == "on";
  const bool targeted_on = effective_targeted_watches(backend);
  const std::string targeted_source = targeted.empty() ? "library default" : "--targeted-watches";

#ifdef NDEBUG
  const bool release = true;
#else
  const bool release = false;
  fmt::print(stderr, "fleet_bench: WARNING: built without NDEBUG; measure a Release build\n");
#endif

  Json doc;
  doc["schema"] = "fleet_bench/1";
  doc["scenario"] = scenario;
  doc["store"] = backend.store;
  if (backend.store == "nats") doc["nats_history"] = backend.nats_history;
  doc["optimised_build"] = release;
  doc["targeted_watches"] = targeted_on;
  doc["targeted_watches_source"] = targeted_source;
  doc["options"] = options;
  doc["repeat"] = repeat;
  doc["machine"] = {{"cpus", ::sysconf(_SC_NPROCESSORS_ONLN)},
                    {"load_average_start", load_average()}};
  Json runs = Json::array();
  std::vector<Result> results;
  try {
    for (int r = 0; r < repeat; ++r) {
      Result res = run();
      if (!json) {
        fmt::print("\n== {} on {} (run {} of {}), targeted watches {} ({}) ==\n", scenario,
                   backend.store, r + 1, repeat, targeted_on ? "on" : "off", targeted_source);
        print_table(res.columns, res.rows);
        for (const auto& n : res.notes) fmt::print("  note: {}\n", n);
      }
      Json jr;
      Json head = Json::object();
      for (const auto& [k, v] : res.headline) head[k] = num_or_null(v);
      jr["headline"] = head;
      jr["detail"] = res.detail;
      jr["notes"] = res.notes;
      runs.push_back(jr);
      results.push_back(std::move(res));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "fleet_bench: {} failed: {}\n", scenario, e.what());
    return 1;
  }
  doc["runs"] = runs;
  Json med = Json::object();
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < results.front().headline.size(); ++i) {
    const std::string& name = results.front().headline[i].first;
    std::vector<double> v;
    std::string all;
    for (const auto& r : results) {
      if (i < r.headline.size() && !std::isnan(r.headline[i].second))
        v.push_back(r.headline[i].second);
      all +=
          (all.empty() ? "" : " ") + fmt_num(i < r.headline.size() ? r.headline[i].second : NAN, 3);
    }
    med[name] = num_or_null(median(v));
    rows.push_back({name, fmt_num(median(v), 3), all});
  }
  doc["median"] = med;
  doc["machine"]["load_average_end"] = load_average();
  if (json) {
    std::cout << doc.dump(2) << "\n";
  } else {
    fmt::print("\n== {} on {}, targeted watches {}: headline (median of {} run{}) ==\n", scenario,
               backend.store, targeted_on ? "on" : "off", repeat, repeat == 1 ? "" : "s");
    print_table({"figure", "median", "runs"}, rows);
  }
  return 0;
}
