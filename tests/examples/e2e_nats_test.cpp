// End to end on a real nats-server: three file-backfill processes share one job; one is
// SIGKILLed, one is SIGSTOPped past its lease and then continued. The two survivors exit 0 once
// the job is complete (the paused one after being fenced along the way), and verify passes.
#include <gtest/gtest.h>

#include "etlc/admin.hpp"
#include "etlc/nats_store.hpp"

#include <csignal>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/nats_store.hpp"
#include "examples/child_process.hpp"
#include "examples/temp_dir.hpp"
#include "nats/nats_test_env.hpp"
#include "support/nats_server.hpp"

namespace fb::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kBin = FILE_BACKFILL_BIN;

std::size_t data_files(const fs::path& out) {
  std::error_code ec;
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(out / "data", ec))
    n += e.path().extension() == ".jsonl";
  return n;
}

TEST(FileBackfillNatsE2E, three_processes_one_killed_one_paused_past_its_lease_verify_passes) {
  etlc::testing::NatsServer server;
  ScratchDir d("e2e-nats");
  const auto in = (d.path() / "in").string();
  const fs::path out = d.path() / "out";
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "16", "--total-bytes",
                        "3000000", "--seed", "9", "--malformed", "2"},
                       d.path() / "generate.log"),
            0);

  auto args = [&](const std::string& id) {
    return std::vector<std::string>{kBin,
                                    "run",
                                    "--input",
                                    in,
                                    "--output",
                                    out.string(),
                                    "--store",
                                    server.url(),
                                    "--job",
                                    "e2e",
                                    "--instance",
                                    id,
                                    "--max-in-flight",
                                    "2",
                                    "--split-bytes",
                                    "150000",
                                    "--lease-ms",
                                    "1500",
                                    "--rebalance-delay-ms",
                                    "500",
                                    "--commit-interval-ms",
                                    "100",
                                    "--throttle-bytes-per-s",
                                    "300000",
                                    "--progress",
                                    "plain"};
  };
  ChildProcess p0(args("p0"), d.path() / "p0.log");
  ChildProcess p1(args("p1"), d.path() / "p1.log");
  ChildProcess p2(args("p2"), d.path() / "p2.log");
  auto logs = [&] {
    return "--- p0 ---\n" + read_text(d.path() / "p0.log") + "--- p1 ---\n" +
           read_text(d.path() / "p1.log") + "--- p2 ---\n" + read_text(d.path() / "p2.log") + "\n" +
           server.diagnostics();
  };

  // Let the three join (each prints its banner once its store is open) and take splits (each
  // tenancy opens its own output file).
  auto joined = [&](const char* id) {
    return read_text(d.path() / (std::string(id) + ".log")).find(" member on nats://") !=
           std::string::npos;
  };
  const auto until = std::chrono::steady_clock::now() + 30s;
  while ((data_files(out) < 6 || !joined("p0") || !joined("p1") || !joined("p2")) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(joined("p0") && joined("p1") && joined("p2")) << logs();
  ASSERT_GE(data_files(out), 6u) << logs();
  ASSERT_FALSE(p0.wait_for(0ms).has_value()) << "finished too early to test anything\n" << logs();

  p1.signal(SIGKILL);
  p2.signal(SIGSTOP);
  std::this_thread::sleep_for(3000ms);  // twice the lease: p2's session expires, its splits move
  p2.signal(SIGCONT);

  auto rc0 = p0.wait_for(90s);
  auto rc2 = p2.wait_for(90s);
  auto rc1 = p1.wait_for(5s);
  ASSERT_TRUE(rc0.has_value()) << logs();
  ASSERT_TRUE(rc2.has_value()) << logs();
  EXPECT_EQ(*rc0, 0) << logs();
  EXPECT_EQ(*rc2, 0) << "a paused and fenced member still exits 0 on completion\n" << logs();
  EXPECT_EQ(rc1, std::optional<int>(128 + SIGKILL));

  ASSERT_EQ(run_to_end({kBin, "verify", "--input", in, "--output", out.string()},
                       d.path() / "verify.log"),
            0)
      << read_text(d.path() / "verify.log") << logs();
  EXPECT_NE(read_text(d.path() / "verify.log").find("missing 0"), std::string::npos);

  // Read the store afterwards: the plan completed, every split record is terminal-complete, no
  // split was quarantined, and the two takeovers show as epochs beyond the first claim.
  etlc::NatsStoreOptions opts;
  opts.servers = {server.url()};
  opts.job = "e2e";
  opts.probe_on_open = false;
  auto store = etlc::NatsStore::open(opts);
  etlc::JobAdmin admin(*store);
  etlc::JobStatus st = admin.status();
  ASSERT_TRUE(st.plan.has_value());
  EXPECT_EQ(st.plan->verdict, etlc::PlanVerdict::complete);
  EXPECT_EQ(st.plan->completed, st.plan->planned_splits);
  EXPECT_EQ(st.plan->quarantined, 0u);
  etlc::SplitListing all = admin.splits();
  ASSERT_EQ(all.rows.size(), st.plan->planned_splits);
  std::uint64_t moved = 0;
  for (const auto& row : all.rows) {
    EXPECT_EQ(row.status, etlc::SplitState::completed) << row.id;
    EXPECT_GT(row.watermark, 0u) << row.id;
    moved += row.epoch > 1 ? 1 : 0;
  }
  EXPECT_GT(moved, 0u) << "no split changed hands although a member was killed";
  EXPECT_EQ(all.garbage_total, 0u);
}

// Dynamic splitting end to end (issue 17): one file 50 times the size of each other, planned as
// one split (--cut-files false), 4 processes of 2 lanes. Once the other splits are done, the
// idle lanes get residuals cut from it; the process that made the first cut is SIGKILLed right
// after it. The other three exit 0, verify finds every row, and the store shows residuals, all
// completed.
TEST(FileBackfillNatsE2E, a_straggler_is_cut_for_idle_lanes_and_its_cutter_killed_verify_passes) {
  etlc::testing::NatsServer server;
  ScratchDir d("e2e-nats-split");
  const auto in = (d.path() / "in").string();
  const fs::path out = d.path() / "out";
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "21", "--one-big", "50",
                        "--total-bytes", "7000000", "--seed", "5"},
                       d.path() / "generate.log"),
            0);
  const std::vector<std::string> ids = {"p0", "p1", "p2", "p3"};
  auto args = [&](const std::string& id) {
    return std::vector<std::string>{kBin,
                                    "run",
                                    "--input",
                                    in,
                                    "--output",
                                    out.string(),
                                    "--store",
                                    server.url(),
                                    "--job",
                                    "e2e-split",
                                    "--instance",
                                    id,
                                    "--max-in-flight",
                                    "2",
                                    "--split-bytes",
                                    "120000",
                                    "--cut-files",
                                    "false",
                                    "--lease-ms",
                                    "1500",
                                    "--rebalance-delay-ms",
                                    "500",
                                    "--commit-interval-ms",
                                    "100",
                                    "--throttle-per",
                                    "lane",
                                    "--throttle-bytes-per-s",
                                    "400000",
                                    "--progress",
                                    "plain"};
  };
  auto log_of = [&](const std::string& id) { return read_text(d.path() / (id + ".log")); };
  ::setenv("ETLC_LOG_LEVEL", "info", 1);  // the cut's log line names the cutter
  std::map<std::string, std::unique_ptr<ChildProcess>> procs;
  for (const std::string& id : ids) {
    procs[id] = std::make_unique<ChildProcess>(args(id), d.path() / (id + ".log"));
  }
  ::unsetenv("ETLC_LOG_LEVEL");
  auto logs = [&] {
    std::string text;
    for (const std::string& id : ids) text += fmt::format("--- {} ---\n{}", id, log_of(id));
    return text + "\n" + server.diagnostics();
  };
  std::optional<std::string> cutter;
  const auto until = std::chrono::steady_clock::now() + 90s;
  while (!cutter && std::chrono::steady_clock::now() < until) {
    for (const std::string& id : ids) {
      if (log_of(id).find("' cut at watermark") != std::string::npos) cutter = id;
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(cutter) << "no split was cut\n" << logs();
  procs[*cutter]->signal(SIGKILL);
  for (const std::string& id : ids) {
    auto rc = procs[id]->wait_for(id == *cutter ? 5s : 180s);
    ASSERT_TRUE(rc.has_value()) << id << "\n" << logs();
    EXPECT_EQ(*rc, id == *cutter ? 128 + SIGKILL : 0) << id << "\n" << logs();
  }
  ASSERT_EQ(run_to_end({kBin, "verify", "--input", in, "--output", out.string()},
                       d.path() / "verify.log"),
            0)
      << read_text(d.path() / "verify.log") << logs();
  EXPECT_NE(read_text(d.path() / "verify.log").find("missing 0"), std::string::npos);

  etlc::NatsStoreOptions opts;
  opts.servers = {server.url()};
  opts.job = "e2e-split";
  opts.probe_on_open = false;
  auto store = etlc::NatsStore::open(opts);
  etlc::JobAdmin admin(*store);
  const etlc::JobStatus st = admin.status();
  ASSERT_TRUE(st.plan.has_value());
  EXPECT_EQ(st.plan->verdict, etlc::PlanVerdict::complete);
  EXPECT_EQ(st.plan->completed, st.plan->planned_splits);
  EXPECT_GE(st.splits.residuals, 1u);
  EXPECT_EQ(st.splits.pending, 0u);
  const etlc::SplitListing all = admin.splits();
  EXPECT_EQ(all.rows.size(), st.plan->planned_splits);
  for (const auto& row : all.rows) EXPECT_EQ(row.status, etlc::SplitState::completed) << row.id;
}

// Three file-backfill processes on `store_url` (one server, or a cluster's comma-separated URLs
// with an R3 bucket); once all joined and each took splits, `disturb` runs. Every process must
// exit 0 and verify must pass. `diagnostics` adds the servers' state to failure messages.
void three_processes_survive(const std::string& store_url, int replicas, const std::string& job,
                             const std::function<void()>& disturb,
                             const std::function<std::string()>& diagnostics) {
  ScratchDir d("e2e-nats-chaos");
  const auto in = (d.path() / "in").string();
  const fs::path out = d.path() / "out";
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "12", "--total-bytes",
                        "2400000", "--seed", "11"},
                       d.path() / "generate.log"),
            0);
  auto args = [&](const std::string& id) {
    return std::vector<std::string>{kBin,
                                    "run",
                                    "--input",
                                    in,
                                    "--output",
                                    out.string(),
                                    "--store",
                                    store_url,
                                    "--replicas",
                                    std::to_string(replicas),
                                    "--job",
                                    job,
                                    "--instance",
                                    id,
                                    "--max-in-flight",
                                    "2",
                                    "--split-bytes",
                                    "150000",
                                    "--lease-ms",
                                    "2000",
                                    "--rebalance-delay-ms",
                                    "500",
                                    "--commit-interval-ms",
                                    "100",
                                    "--throttle-bytes-per-s",
                                    "250000",
                                    "--progress",
                                    "plain"};
  };
  std::vector<std::unique_ptr<ChildProcess>> procs;
  for (const char* id : {"p0", "p1", "p2"}) {
    procs.push_back(
        std::make_unique<ChildProcess>(args(id), d.path() / (std::string(id) + ".log")));
  }
  auto logs = [&] {
    std::string text;
    for (const char* id : {"p0", "p1", "p2"}) {
      text += fmt::format("--- {} ---\n{}", id, read_text(d.path() / (std::string(id) + ".log")));
    }
    return text + "\n" + diagnostics();
  };
  auto joined = [&](const char* id) {
    return read_text(d.path() / (std::string(id) + ".log")).find(" member on nats://") !=
           std::string::npos;
  };
  const auto until = std::chrono::steady_clock::now() + 60s;
  while ((data_files(out) < 6 || !joined("p0") || !joined("p1") || !joined("p2")) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(joined("p0") && joined("p1") && joined("p2")) << logs();
  ASSERT_FALSE(procs[0]->wait_for(0ms).has_value()) << "finished too early\n" << logs();
  disturb();
  for (auto& p : procs) {
    auto rc = p->wait_for(180s);
    ASSERT_TRUE(rc.has_value()) << logs();
    EXPECT_EQ(*rc, 0) << logs();
  }
  ASSERT_EQ(run_to_end({kBin, "verify", "--input", in, "--output", out.string()},
                       d.path() / "verify.log"),
            0)
      << read_text(d.path() / "verify.log") << logs();
  EXPECT_NE(read_text(d.path() / "verify.log").find("missing 0"), std::string::npos);
}

TEST(FileBackfillNatsE2E, a_server_restart_mid_job_verify_passes) {
  etlc::testing::NatsServer server;
  three_processes_survive(
      server.url(), 1, "restart", [&] { server.restart(); }, [&] { return server.diagnostics(); });
}

TEST(FileBackfillNatsE2E, a_3_node_cluster_with_the_stream_leader_killed_mid_job_verify_passes) {
  etlc::testing::NatsCluster cluster(3);
  std::string urls;
  for (const auto& u : cluster.urls()) urls += (urls.empty() ? "" : ",") + u;
  auto diagnostics = [&] {
    std::string text;
    for (std::size_t i = 0; i < cluster.size(); ++i) text += cluster.node(i).diagnostics(1500);
    return text;
  };
  three_processes_survive(
      urls, 3, "cluster",
      [&] {
        auto leader = etlc::testing::stream_leader(
            cluster.urls(), etlc::NatsStoreOptions::bucket_for_job("cluster"));
        ASSERT_TRUE(leader.has_value()) << diagnostics();
        auto idx = cluster.index_of(*leader);
        ASSERT_TRUE(idx.has_value()) << *leader;
        cluster.node(*idx).kill(SIGKILL);
      },
      diagnostics);
}

TEST(FileBackfillNatsE2E, a_late_member_exits_0_and_one_on_different_input_is_refused) {
  etlc::testing::NatsServer server;
  ScratchDir d("e2e-nats-fp");
  for (const char* seed : {"1", "2"}) {
    ASSERT_EQ(run_to_end({kBin, "generate", "--output", (d.path() / seed).string(), "--files", "3",
                          "--total-bytes", "20000", "--seed", seed},
                         d.path() / "g.log"),
              0);
  }
  auto args = [&](const char* input, const char* out) {
    return std::vector<std::string>{kBin,         "run",
                                    "--input",    (d.path() / input).string(),
                                    "--output",   (d.path() / out).string(),
                                    "--store",    server.url(),
                                    "--job",      "fp",
                                    "--progress", "plain",
                                    "--lease-ms", "1500"};
  };
  ASSERT_EQ(run_to_end(args("1", "out1"), d.path() / "first.log"), 0)
      << read_text(d.path() / "first.log");
  // A member that arrives after the job completed has nothing to do, and says so with exit 0.
  EXPECT_EQ(run_to_end(args("1", "out1"), d.path() / "late.log"), 0)
      << read_text(d.path() / "late.log");
  EXPECT_NE(read_text(d.path() / "late.log").find("job complete"), std::string::npos);
  EXPECT_EQ(run_to_end(args("2", "out2"), d.path() / "second.log"), 2)
      << "a fingerprint mismatch is bad configuration\n"
      << read_text(d.path() / "second.log");
  const std::string log = read_text(d.path() / "second.log");
  EXPECT_NE(log.find("error: "), std::string::npos) << log;
  EXPECT_NE(log.find("fingerprint"), std::string::npos) << log;
}

TEST(FileBackfillNatsE2E, sigterm_stops_gracefully_and_releases_every_split_attempt_free) {
  etlc::testing::NatsServer server;
  ScratchDir d("e2e-nats-term");
  const auto in = (d.path() / "in").string();
  const fs::path out = d.path() / "out";
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "8", "--total-bytes", "800000",
                        "--seed", "5"},
                       d.path() / "generate.log"),
            0);
  auto args = [&](const std::string& id, const std::string& throttle) {
    return std::vector<std::string>{kBin,
                                    "run",
                                    "--input",
                                    in,
                                    "--output",
                                    out.string(),
                                    "--store",
                                    server.url(),
                                    "--job",
                                    "sig",
                                    "--instance",
                                    id,
                                    "--split-bytes",
                                    "100000",
                                    "--lease-ms",
                                    "1500",
                                    "--commit-interval-ms",
                                    "100",
                                    "--throttle-bytes-per-s",
                                    throttle,
                                    "--progress",
                                    "plain"};
  };
  ChildProcess p0(args("p0", "100000"), d.path() / "p0.log");
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (data_files(out) < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_GE(data_files(out), 2u) << read_text(d.path() / "p0.log");
  p0.signal(SIGTERM);
  auto rc0 = p0.wait_for(30s);
  const std::string log0 = read_text(d.path() / "p0.log");
  ASSERT_TRUE(rc0.has_value()) << log0;
  EXPECT_EQ(*rc0, 0) << "a graceful stop on SIGTERM is a success for a supervisor\n" << log0;
  EXPECT_NE(log0.find("stopping gracefully"), std::string::npos) << log0;
  EXPECT_NE(log0.find("job interrupted"), std::string::npos) << log0;
  {
    // p0 is gone and held nothing: no lease, no record naming it as owner, no session.
    etlc::NatsStoreOptions o;
    o.servers = {server.url()};
    o.job = "sig";
    o.probe_on_open = false;
    auto store = etlc::NatsStore::open(o);
    EXPECT_TRUE(store->list(etlc::core::kLeasePrefix).empty()) << "every split was released";
    EXPECT_FALSE(store->get(etlc::core::member_key("p0")).has_value());
    for (const etlc::Entry& e : store->list(etlc::core::kSplitPrefix)) {
      EXPECT_FALSE(etlc::core::decode_split(e.key, e.value).owner.has_value()) << e.key;
    }
  }

  // Another member finishes the job; the splits p0 held were released, not taken over.
  ASSERT_EQ(run_to_end(args("p1", "0"), d.path() / "p1.log"), 0) << read_text(d.path() / "p1.log");
  etlc::NatsStoreOptions o;
  o.servers = {server.url()};
  o.job = "sig";
  auto store = etlc::NatsStore::open(o);
  auto splits = store->list(etlc::core::kSplitPrefix);
  ASSERT_FALSE(splits.empty());
  for (const etlc::Entry& e : splits) {
    const auto rec = etlc::core::decode_split(e.key, e.value);
    EXPECT_EQ(rec.status, etlc::core::SplitStatus::completed) << e.key;
    EXPECT_EQ(rec.attempts, 0u) << e.key << ": a graceful stop consumes no delivery attempt";
  }
  ASSERT_EQ(run_to_end({kBin, "verify", "--input", in, "--output", out.string()},
                       d.path() / "verify.log"),
            0)
      << read_text(d.path() / "verify.log");
}

TEST(FileBackfillNatsE2E, an_unreachable_store_is_one_clear_line) {
  ScratchDir d("e2e-nats-down");
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", (d.path() / "in").string(), "--files", "1",
                        "--total-bytes", "1000", "--seed", "1"},
                       d.path() / "g.log"),
            0);
  const int port = etlc::testing::pick_free_port();
  EXPECT_EQ(run_to_end({kBin, "run", "--input", (d.path() / "in").string(), "--output",
                        (d.path() / "out").string(), "--store",
                        "nats://127.0.0.1:" + std::to_string(port), "--startup-wait-ms", "0"},
                       d.path() / "run.log"),
            2);
  const std::string log = read_text(d.path() / "run.log");
  EXPECT_EQ(log.rfind("error: cannot use the store at nats://127.0.0.1:", 0), 0u) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}

TEST(FileBackfillNatsE2E, a_member_started_before_its_server_joins_when_it_comes_up) {
  ScratchDir d("e2e-nats-late-server");
  const auto in = (d.path() / "in").string();
  const fs::path out = d.path() / "out";
  ASSERT_EQ(run_to_end({kBin, "generate", "--output", in, "--files", "4", "--total-bytes", "200000",
                        "--seed", "3"},
                       d.path() / "generate.log"),
            0);
  const int port = etlc::testing::pick_free_port();
  ChildProcess member(
      {kBin, "run", "--input", in, "--output", out.string(), "--store",
       "nats://127.0.0.1:" + std::to_string(port), "--job", "late", "--instance", "early",
       "--lease-ms", "1500", "--progress", "plain", "--startup-wait-ms", "60000"},
      d.path() / "member.log");
  // The member is up and retrying (one warning per attempt) before any server exists.
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (read_text(d.path() / "member.log").find("not reachable yet (attempt 2") ==
             std::string::npos &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(read_text(d.path() / "member.log").find("not reachable yet (attempt 2"),
            std::string::npos)
      << read_text(d.path() / "member.log");
  ASSERT_FALSE(member.wait_for(0ms).has_value()) << read_text(d.path() / "member.log");

  etlc::testing::NatsServerConfig config;
  config.port = port;
  etlc::testing::NatsServer server(config);
  auto rc = member.wait_for(90s);
  const std::string log = read_text(d.path() / "member.log");
  ASSERT_TRUE(rc.has_value()) << log << server.diagnostics();
  EXPECT_EQ(*rc, 0) << log;
  EXPECT_NE(log.find("connected on attempt"), std::string::npos) << log;
  EXPECT_NE(log.find("job complete"), std::string::npos) << log;
  EXPECT_EQ(run_to_end({kBin, "verify", "--input", in, "--output", out.string()},
                       d.path() / "verify.log"),
            0)
      << read_text(d.path() / "verify.log");
}

}  // namespace
}  // namespace fb::testing
