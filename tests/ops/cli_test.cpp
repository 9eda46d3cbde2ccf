// The etlc binary against a real nats-server (the Debian package) and a live job whose members
// run in this process in thread mode, each over its own NatsStore connection.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <random>

#include "etlc/admin.hpp"
#include "etlc/nats_store.hpp"
#include "live_job.hpp"
#include "nats/nats_test_env.hpp"
#include "run_process.hpp"

namespace etlc::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

std::string unique_job() {
  std::random_device rd;
  return "ops-" + std::to_string(rd() % 1'000'000'000u);
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    url = shared_server().url();
    job = unique_job();
  }

  NatsStoreOptions store_options() const {
    NatsStoreOptions o;
    o.servers = {url};
    o.job = job;
    o.connect_timeout_ms = 5000;
    o.op_timeout_ms = 2000;
    o.reconnect_wait_ms = 50;
    return o;
  }

  // Starts three members on 12 splits and waits until each holds its 4.
  void start_job(std::size_t splits = 12) {
    live = std::make_unique<LiveJob>(std::vector<std::string>{"m1", "m2", "m3"}, splits,
                                     [this] { return NatsStore::open(store_options()); });
    observer = NatsStore::open(store_options());
    admin = std::make_unique<JobAdmin>(*observer);
    ASSERT_TRUE(wait_for([&] { return balanced(splits); })) << dump_status();
  }

  // The job as the test's own JobAdmin sees it; nullopt when a listing timed out (a loaded
  // machine), so polling predicates simply look again.
  std::optional<JobStatus> look() {
    try {
      return admin->status();
    } catch (const StoreError&) {
      return std::nullopt;
    }
  }

  bool balanced(std::size_t splits) {
    std::optional<JobStatus> seen = look();
    if (!seen) return false;
    const JobStatus& st = *seen;
    if (!st.leader || st.moves_total != 0) return false;
    std::uint64_t held = 0;
    for (const auto& m : st.members) held += m.held;
    return held == splits && st.balance.max_over_mean == 1.0;
  }

  std::string dump_status() { return run({"status"}).out; }

  ProcessResult run(std::vector<std::string> args, bool with_job = true) {
    std::vector<std::string> argv{ETLC_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--nats");
    argv.push_back(url);
    if (with_job) {
      argv.push_back("--job");
      argv.push_back(job);
    }
    return run_process(argv, 60s);
  }

  Json run_json(std::vector<std::string> args) {
    args.push_back("--json");
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Json::parse(r.out);
  }

  std::string url;
  std::string job;
  std::unique_ptr<LiveJob> live;
  std::shared_ptr<NatsStore> observer;
  std::unique_ptr<JobAdmin> admin;
};

TEST_F(Cli, status_describes_the_live_job_in_text_and_json) {
  start_job();
  // The leader writes job.progress at most once a progress_interval (1 s): its first may
  // predate the seeding of the plan.
  ASSERT_TRUE(wait_for([&] {
    auto st = look();
    return st && st->progress.source == ProgressSource::leader_record &&
           st->progress.planned == 120;
  })) << dump_status();
  ProcessResult text = run({"status"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("leader    " + live->leader()), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("final, planned: 12 splits, 0 completed, 0 quarantined -> running"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("max/mean load 1.00"), std::string::npos) << text.out;
  for (const char* id : {"m1", "m2", "m3"}) {
    EXPECT_NE(text.out.find(std::string("\n") + id + " "), std::string::npos) << text.out;
  }
  EXPECT_EQ(text.out.find("moves in flight"), std::string::npos) << text.out;
  // This job's lanes report no done: nothing done by weight, and no rate to make an ETA of.
  EXPECT_NE(text.out.find("progress  0.0% done by weight: 0 of 120, 120 remaining (0 queued); "
                          "rate "),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("ETA unknown (job.progress, term "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("REMAINING"), std::string::npos) << text.out;

  Json j = run_json({"status"});
  EXPECT_EQ(j["schema"], "etlc.status.v1");
  EXPECT_EQ(j["job"], job);
  EXPECT_EQ(j["found"], true);
  EXPECT_EQ(j["leader"]["instance"], live->leader());
  EXPECT_EQ(j["leader"]["has_session"], true);
  ASSERT_TRUE(j.contains("standby")) << j;  // null until a member takes the role
  if (!j["standby"].is_null()) {
    EXPECT_NE(j["standby"]["instance"], live->leader());
  }
  EXPECT_EQ(j["plan"]["finality"], "final");
  EXPECT_EQ(j["plan"]["verdict"], "running");
  EXPECT_EQ(j["plan"]["planned_splits"], 12);
  EXPECT_EQ(j["splits"]["total"], 12);
  EXPECT_EQ(j["splits"]["total_weight"], 120);
  EXPECT_EQ(j["progress"]["source"], "job.progress");
  EXPECT_EQ(j["progress"]["record"], "ok");
  EXPECT_GE(j["progress"]["term"].get<std::uint64_t>(), 1u);
  EXPECT_EQ(j["progress"]["planned"], 120);
  EXPECT_EQ(j["progress"]["done"], 0);
  EXPECT_EQ(j["progress"]["remaining"], 120);
  EXPECT_DOUBLE_EQ(j["progress"]["percent_done"].get<double>(), 0.0);
  EXPECT_TRUE(j["progress"]["eta_ms"].is_null()) << j["progress"];
  EXPECT_EQ(j["unowned_remaining"], 0);
  ASSERT_EQ(j["members"].size(), 3u);
  std::uint64_t held = 0;
  for (const Json& m : j["members"]) {
    EXPECT_EQ(m["lane_budget"], 4);
    EXPECT_EQ(m["held"], m["assigned"]);
    EXPECT_EQ(m["weight_held"], 40);
    EXPECT_EQ(m["weight_remaining"], 40);
    EXPECT_TRUE(m["unchanged_for_ms"].is_null());  // a single look cannot know
    EXPECT_EQ(m["lease_ms"], 1500);
    held += m["held"].get<std::uint64_t>();
  }
  EXPECT_EQ(held, 12u);
  EXPECT_EQ(j["moves_total"], 0);
  EXPECT_DOUBLE_EQ(j["balance"]["max_over_mean"].get<double>(), 1.0);
  EXPECT_EQ(j["garbage_total"], 0);
}

TEST_F(Cli, splits_lists_filters_and_limits) {
  start_job();
  Json all = run_json({"splits"});
  EXPECT_EQ(all["schema"], "etlc.splits.v1");
  EXPECT_EQ(all["matched"], 12);
  ASSERT_EQ(all["rows"].size(), 12u);
  EXPECT_EQ(all["rows"][0]["id"], "s000");
  for (const Json& r : all["rows"]) {
    EXPECT_EQ(r["status"], "runnable");
    EXPECT_FALSE(r["owner"].is_null());
    EXPECT_EQ(r["owner"], r["lease_owner"]);
    EXPECT_EQ(r["weight"], 10);
    EXPECT_GE(r["watermark"].get<std::uint64_t>(), 100u);
    EXPECT_GE(r["epoch"].get<std::uint64_t>(), 1u);
  }

  Json limited = run_json({"splits", "--limit", "5", "--owner", "m2"});
  EXPECT_EQ(limited["matched"], 4);
  ASSERT_EQ(limited["rows"].size(), 4u);
  for (const Json& r : limited["rows"]) EXPECT_EQ(r["owner"], "m2");
  Json two = run_json({"splits", "--limit", "2"});
  EXPECT_EQ(two["matched"], 12);
  EXPECT_EQ(two["rows"].size(), 2u);

  ProcessResult text = run({"splits", "--limit", "3"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("SPLIT  STATUS", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("3 of 12 matching splits shown"), std::string::npos) << text.out;

  EXPECT_EQ(run_json({"splits", "--status", "quarantined"})["rows"].size(), 0u);
}

TEST_F(Cli, exit_codes_and_one_line_errors) {
  start_job(3);
  // Usage errors: exit 2, before any connection.
  ProcessResult usage = run({"splits", "--limit", "many"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_EQ(std::count(usage.err.begin(), usage.err.end(), '\n'), 1) << usage.err;
  EXPECT_EQ(run({"status"}, /*with_job=*/false).exit_code, 2);
  EXPECT_EQ(run({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(run({"requeue"}).exit_code, 2);

  // An unknown job: exit 1, named in the message.
  ProcessResult missing =
      run_process({ETLC_CLI_PATH, "status", "--nats", url, "--job", "no-such-job-" + job});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("not found"), std::string::npos) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  // ... and leaves no bucket behind: asked again, the bucket still does not exist.
  ProcessResult again =
      run_process({ETLC_CLI_PATH, "status", "--nats", url, "--job", "no-such-job-" + job});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("does not exist"), std::string::npos) << again.err;

  // Nothing listens: exit 3.
  ProcessResult down = run_process({ETLC_CLI_PATH, "status", "--nats",
                                    "nats://127.0.0.1:" + std::to_string(pick_free_port()), "--job",
                                    job, "--timeout-ms", "500"});
  EXPECT_EQ(down.exit_code, 3);
  EXPECT_NE(down.err.find("store unreachable"), std::string::npos) << down.err;

  // A refused requeue: exit 4, and it says why.
  ProcessResult refused = run({"requeue", "s000"});
  EXPECT_EQ(refused.exit_code, 4);
  EXPECT_NE(refused.out.find("refused s000: not_quarantined"), std::string::npos) << refused.out;
  EXPECT_EQ(run({"requeue", "nope"}).exit_code, 4);
}

TEST_F(Cli, requeue_returns_a_quarantined_split_to_work) {
  live = nullptr;
  // s001 is poison until the operator "fixes" it.
  live = std::make_unique<LiveJob>(std::vector<std::string>{"m1", "m2", "m3"}, 6,
                                   [this] { return NatsStore::open(store_options()); });
  live->set_poison({"s001"});
  observer = NatsStore::open(store_options());
  admin = std::make_unique<JobAdmin>(*observer);
  ASSERT_TRUE(wait_for([&] {
    auto st = look();
    return st && st->splits.quarantined == 1;
  })) << dump_status();

  Json q = run_json({"splits", "--status", "quarantined"});
  ASSERT_EQ(q["rows"].size(), 1u);
  EXPECT_EQ(q["rows"][0]["id"], "s001");
  EXPECT_EQ(q["rows"][0]["attempts"], 3);
  EXPECT_EQ(q["rows"][0]["last_error"], "poison record");
  ASSERT_TRUE(wait_for([&] {
    auto st = look();
    return st && st->plan && st->plan->quarantined == 1;
  }));

  live->set_poison({});
  ProcessResult r = run({"requeue", "s001"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("requeued s001 (was quarantined after 3 attempts)"), std::string::npos)
      << r.out;

  // A member picks it up again and the plan's tally drops.
  ASSERT_TRUE(wait_for([&] {
    SplitListing listing;
    try {
      listing = admin->splits();
    } catch (const StoreError&) {
      return false;
    }
    for (const SplitRow& row : listing.rows) {
      if (row.id == "s001") return row.status == SplitState::runnable && row.owner.has_value();
    }
    return false;
  })) << dump_status();
  ASSERT_TRUE(wait_for([&] {
    auto st = look();
    return st && st->plan && st->plan->quarantined == 0;
  }));
  // Requeued once is enough: a second requeue is refused, the split being runnable now.
  ProcessResult again = run({"requeue", "s001", "--json"});
  EXPECT_EQ(again.exit_code, 4);
  EXPECT_EQ(Json::parse(again.out)["results"][0]["outcome"], "not_quarantined");
}

TEST_F(Cli, requeue_json_reports_each_split) {
  start_job(3);
  std::vector<std::string> argv{ETLC_CLI_PATH, "requeue", "s000",  "zzz", "--json",
                                "--nats",      url,       "--job", job};
  ProcessResult r = run_process(argv);
  EXPECT_EQ(r.exit_code, 4);
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["schema"], "etlc.requeue.v1");
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["split"], "s000");
  EXPECT_EQ(j["results"][0]["outcome"], "not_quarantined");
  EXPECT_EQ(j["results"][0]["status"], "runnable");
  EXPECT_EQ(j["results"][1]["outcome"], "not_found");
  EXPECT_TRUE(j["results"][1]["status"].is_null());
}

TEST_F(Cli, cordon_drains_a_member_without_losses_and_uncordon_restores_it) {
  start_job(6);  // 2 each; 3 each on the two others while m2 is cordoned (4 lanes each)
  // (the start may already have moved a split or two while members joined: count from here)
  const int revoked_before = live->member("m2").revoked.load();
  const std::size_t held_before = live->member("m2").coord->held_splits().size();
  ASSERT_EQ(held_before, 2u);
  ProcessResult c = run({"cordon", "m2", "--reason", "kernel upgrade"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("cordoned m2"), std::string::npos) << c.out;

  ASSERT_TRUE(wait_for([&] {
    return live->member("m2").coord->held_splits().empty() && balanced(6);
  })) << dump_status();
  EXPECT_EQ(live->member("m2").revoked.load() - revoked_before, 2);
  for (LiveMember* m : live->members()) EXPECT_EQ(m->lost.load(), 0) << m->coord->instance_id();

  Json st = run_json({"status"});
  for (const Json& m : st["members"]) {
    if (m["instance"] != "m2") {
      EXPECT_EQ(m["held"], 3);
      continue;
    }
    EXPECT_EQ(m["cordoned"], true);
    EXPECT_EQ(m["cordon_reason"], "kernel upgrade");
    EXPECT_EQ(m["lane_budget"], 0);
    EXPECT_EQ(m["max_in_flight"], 4);
    EXPECT_EQ(m["held"], 0);
  }
  EXPECT_EQ(st["balance"]["members"], 2);
  ProcessResult text = run({"status"});
  EXPECT_NE(text.out.find("0/4"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("cordoned: kernel upgrade"), std::string::npos) << text.out;

  Json cj = run_json({"cordon", "m2", "--reason", "kernel upgrade"});
  EXPECT_EQ(cj["schema"], "etlc.cordon.v1");
  EXPECT_EQ(cj["outcome"], "unchanged");
  EXPECT_EQ(cj["has_session"], true);

  ProcessResult u = run({"uncordon", "m2"});
  ASSERT_EQ(u.exit_code, 0) << u.err;
  EXPECT_NE(u.out.find("uncordoned m2"), std::string::npos) << u.out;
  ASSERT_TRUE(wait_for([&] {
    return live->member("m2").coord->held_splits().size() == 2 && balanced(6);
  })) << dump_status();
  EXPECT_EQ(run_json({"uncordon", "m2"})["outcome"], "not_cordoned");
  for (LiveMember* m : live->members()) EXPECT_EQ(m->lost.load(), 0) << m->coord->instance_id();
}

TEST_F(Cli, watch_prints_periodic_lines_and_stops_on_interrupt) {
  start_job(3);
  ProcessResult two = run({"watch", "--count", "2", "--interval-ms", "250"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(std::count(two.out.begin(), two.out.end(), '\n'), 2) << two.out;
  EXPECT_NE(two.out.find("leader=" + live->leader()), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("held=3"), std::string::npos) << two.out;

  ProcessResult js = run({"watch", "--count", "2", "--interval-ms", "250", "--json"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  std::istringstream lines(js.out);
  std::string line;
  int docs = 0;
  while (std::getline(lines, line)) {
    Json j = Json::parse(line);
    EXPECT_EQ(j["schema"], "etlc.status.v1");
    ++docs;
  }
  EXPECT_EQ(docs, 2);

  RunningProcess p({ETLC_CLI_PATH, "watch", "--nats", url, "--job", job, "--interval-ms", "250"});
  std::string first;
  ASSERT_TRUE(p.read_line(first, 30s));
  EXPECT_NE(first.find("verdict=running"), std::string::npos) << first;
  ASSERT_TRUE(p.read_line(first, 30s));  // still refreshing
  p.send(SIGINT);
  ProcessResult end = p.wait(30s);
  EXPECT_FALSE(end.timed_out);
  EXPECT_EQ(end.exit_code, 0) << end.err;
}

}  // namespace
}  // namespace etlc::testing
