// The job's lifecycle from `etlc` (pause, resume, delete, reset, seek) and the truth of
// `etlc status`, against a real nats-server: a live job (members in this process, thread mode)
// and a finished one (members that completed every split and left), refusals included.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "core/keys.hpp"
#include "core/records.hpp"
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
  return "life-" + std::to_string(rd() % 1'000'000'000u);
}

// Members that complete every split they are granted and leave once the job is complete.
void run_to_completion(const std::vector<std::string>& ids, std::size_t splits,
                       const std::function<std::shared_ptr<KvStore>()>& stores) {
  auto planner = std::make_shared<TestPlanner>(make_splits(splits, 10));
  std::vector<std::unique_ptr<Coordinator>> members;
  for (const auto& id : ids) {
    members.push_back(std::make_unique<Coordinator>(LiveJob::config(id), stores(), planner));
  }
  for (auto& m : members) m->start();
  std::vector<std::thread> users;
  std::atomic<int> done{0};
  for (auto& m : members) {
    users.emplace_back([&, c = m.get()] {
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      while (std::chrono::steady_clock::now() < deadline) {
        auto e = c->wait_event(20ms);
        if (!e) continue;
        if (auto* g = std::get_if<SplitGranted>(&*e)) {
          c->complete(g->spec.id, SplitProgress{g->progress.watermark + 10, "done"}, g->epoch);
        } else if (auto* r = std::get_if<RevokeRequested>(&*e)) {
          c->release_drained(r->split_id, r->epoch);
        } else if (std::holds_alternative<AllComplete>(*e)) {
          ++done;
          return;
        }
      }
    });
  }
  for (auto& t : users) t.join();
  for (auto& m : members) m->shutdown();
  ASSERT_EQ(done.load(), static_cast<int>(ids.size())) << "the job did not complete";
}

class Lifecycle : public ::testing::Test {
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
    o.startup_wait_ms = 0;
    return o;
  }
  std::function<std::shared_ptr<KvStore>()> stores() {
    return [this] { return NatsStore::open(store_options()); };
  }

  void start_live(std::size_t splits = 12) {
    live = std::make_unique<LiveJob>(std::vector<std::string>{"m1", "m2", "m3"}, splits, stores());
    open_observer();
    ASSERT_TRUE(wait_for([&] { return held() == splits; })) << status_text();
  }
  void open_observer() {
    observer = NatsStore::open(store_options());
    admin = std::make_unique<JobAdmin>(*observer);
  }
  std::optional<JobStatus> look() {
    try {
      return admin->status();
    } catch (const StoreError&) {
      return std::nullopt;
    }
  }
  std::size_t held() {
    auto st = look();
    if (!st) return ~std::size_t{0};
    std::size_t n = 0;
    for (const auto& m : st->members) n += m.held;
    return n;
  }
  std::optional<core::SplitRecord> split(const std::string& id) {
    auto e = observer->get(core::split_key(id));
    if (!e) return std::nullopt;
    return core::decode_split(core::split_key(id), e->value);
  }

  ProcessResult run(std::vector<std::string> args) {
    std::vector<std::string> argv{ETLC_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const char* a : {"--nats", url.c_str(), "--job", job.c_str()}) argv.emplace_back(a);
    if (args.front() == "delete" || args.front() == "reset" || args.front() == "seek" ||
        args.front() == "repair") {
      argv.emplace_back("--wait-ms");  // the members' lease is 1.5 s
      argv.emplace_back("5000");
    }
    return run_process(argv, 90s);
  }
  Json run_json(std::vector<std::string> args, int want_exit = 0) {
    args.push_back("--json");
    ProcessResult r = run(args);
    EXPECT_EQ(r.exit_code, want_exit) << r.out << r.err;
    try {
      return Json::parse(r.out);
    } catch (const std::exception&) {
      ADD_FAILURE() << "not JSON: " << r.out << r.err;
      return Json();
    }
  }
  std::string status_text() { return run({"status"}).out; }

  std::string url;
  std::string job;
  std::unique_ptr<LiveJob> live;
  std::shared_ptr<NatsStore> observer;
  std::unique_ptr<JobAdmin> admin;
};

bool has_audit(const ProcessResult& r, const std::string& action, const std::string& outcome) {
  return r.err.find("etlc: audit: ") != std::string::npos &&
         r.err.find("action=" + action + " outcome=" + outcome) != std::string::npos;
}

TEST_F(Lifecycle, pause_drains_a_live_job_and_resume_continues_from_the_committed_progress) {
  start_live();
  const std::uint64_t epoch_before = split("s000")->epoch;
  ProcessResult p = run({"pause", "--reason", "disk upgrade"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_TRUE(has_audit(p, "pause", "paused")) << p.err;
  EXPECT_NE(p.err.find("reason=\"disk upgrade\""), std::string::npos) << p.err;
  ASSERT_TRUE(wait_for([&] { return held() == 0; })) << status_text();
  for (LiveMember* m : live->members()) {
    EXPECT_EQ(m->lost.load(), 0) << m->coord->instance_id() << ": the drain is cooperative";
  }
  const std::string text = status_text();
  EXPECT_NE(text.find("paused    by "), std::string::npos) << text;
  EXPECT_NE(text.find("disk upgrade"), std::string::npos) << text;
  Json st = run_json({"status"});
  EXPECT_EQ(st["paused"]["reason"], "disk upgrade");
  const Json splits = run_json({"splits"});  // a range-for over run_json(...)["rows"] dangles
  for (const Json& r : splits["rows"]) {
    EXPECT_TRUE(r["owner"].is_null()) << r;
    EXPECT_EQ(r["attempts"], 0) << "a pause consumes no attempt: " << r;
    EXPECT_GE(r["watermark"].get<std::uint64_t>(), 100u) << "progress was committed: " << r;
  }
  EXPECT_EQ(run_json({"pause"})["outcome"], "already_paused");

  Json r = run_json({"resume"});
  EXPECT_EQ(r["schema"], "etlc.resume.v1");
  EXPECT_EQ(r["outcome"], "resumed");
  ASSERT_TRUE(wait_for([&] { return held() == 12; })) << status_text();
  EXPECT_GT(split("s000")->epoch, epoch_before) << "claimed again after the resume";
  EXPECT_GE(split("s000")->progress.watermark, 100u);
  EXPECT_TRUE(run_json({"status"})["paused"].is_null());
  EXPECT_EQ(run_json({"resume"})["outcome"], "not_paused");
}

TEST_F(Lifecycle, delete_reset_and_seek_are_refused_on_a_live_job) {
  start_live(6);
  ProcessResult no_yes = run({"delete"});
  EXPECT_EQ(no_yes.exit_code, 2) << no_yes.err;
  EXPECT_NE(no_yes.err.find("--yes"), std::string::npos) << no_yes.err;

  ProcessResult del = run({"delete", "--yes"});
  EXPECT_EQ(del.exit_code, 4) << del.out << del.err;
  EXPECT_NE(del.out.find("refused"), std::string::npos) << del.out;
  EXPECT_TRUE(has_audit(del, "delete", "refused_live")) << del.err;
  Json dj = run_json({"delete", "--yes"}, 4);
  EXPECT_EQ(dj["schema"], "etlc.delete.v1");
  EXPECT_EQ(dj["outcome"], "refused_live");
  EXPECT_EQ(dj["sessions"]["live"].size(), 3u) << dj;

  Json rj = run_json({"reset", "--yes"}, 4);
  EXPECT_EQ(rj["schema"], "etlc.reset.v1");
  EXPECT_EQ(rj["outcome"], "refused_live");

  Json sj = run_json({"seek", "s000", "--watermark", "0"}, 4);
  EXPECT_EQ(sj["schema"], "etlc.seek.v1");
  EXPECT_EQ(sj["outcome"], "held");
  EXPECT_FALSE(sj["holder"].is_null());
  EXPECT_EQ(run_json({"seek", "nope", "--watermark", "0"}, 4)["outcome"], "not_found");

  // Nothing changed: the job still runs, every split held, progress intact.
  EXPECT_EQ(run({"status"}).exit_code, 0);
  EXPECT_EQ(held(), 6u);
  EXPECT_GE(split("s000")->progress.watermark, 100u);
}

TEST_F(Lifecycle, seek_moves_a_released_split_and_the_next_owner_resumes_from_it) {
  start_live(6);
  ASSERT_EQ(run({"pause"}).exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return held() == 0; })) << status_text();
  const auto before = *split("s002");
  ProcessResult s = run({"seek", "s002", "--watermark", "5000", "--state", "jump"});
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  EXPECT_TRUE(has_audit(s, "seek", "moved")) << s.err;
  EXPECT_NE(s.out.find("moved s002 from watermark"), std::string::npos) << s.out;
  const auto after = *split("s002");
  EXPECT_EQ(after.progress.watermark, 5000u);
  EXPECT_EQ(after.progress.state, "jump");
  EXPECT_EQ(after.epoch, before.epoch + 1) << "a seek fences every earlier tenancy";
  // And back again, below what was committed.
  Json back = run_json({"seek", "s002", "--watermark", "150"});
  EXPECT_EQ(back["outcome"], "moved");
  EXPECT_EQ(back["watermark_before"], 5000);
  EXPECT_EQ(back["watermark_after"], 150);
  EXPECT_EQ(split("s002")->progress.watermark, 150u);

  ASSERT_EQ(run({"resume"}).exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return held() == 6; })) << status_text();
  // The live job's lanes commit max(granted watermark, 100): 150 shows the grant carried the
  // sought watermark (the lanes had committed 100 before, and 5000 was sought in between).
  ASSERT_TRUE(wait_for([&] { return split("s002")->owner.has_value(); }));
  EXPECT_EQ(split("s002")->progress.watermark, 150u);
  EXPECT_GT(split("s002")->epoch, after.epoch + 1);
}

TEST_F(Lifecycle, a_finished_job_tells_the_truth_and_can_be_seeked_reset_and_deleted) {
  run_to_completion({"f1", "f2"}, 6, stores());
  open_observer();
  const std::string text = status_text();
  EXPECT_NE(text.find("leader    none (the job is complete and no member is running"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("-> complete"), std::string::npos) << text;
  // Members that left may still be listed (an assignment record of the last term outlives its
  // session): never with assigned splits, and never holding anything.
  const Json status = run_json({"status"});
  for (const Json& mem : status["members"]) {
    EXPECT_EQ(mem["has_session"], false) << mem;
    EXPECT_TRUE(mem["assigned"].is_null()) << mem;
    EXPECT_EQ(mem["held"], 0) << mem;
  }
  const std::uint64_t term =
      core::decode_plan(core::kPlanKey, observer->get(core::kPlanKey)->value).term;

  // seek a completed split back: runnable again, and the plan is running again.
  Json sj = run_json({"seek", "s001", "--watermark", "0"});
  EXPECT_EQ(sj["outcome"], "moved");
  EXPECT_EQ(sj["status_before"], "completed");
  EXPECT_EQ(sj["status_after"], "runnable");
  EXPECT_EQ(run_json({"status"})["plan"]["verdict"], "running");
  // pause and resume need no member.
  EXPECT_EQ(run_json({"pause", "--reason", "x"})["outcome"], "paused");
  EXPECT_EQ(run_json({"resume"})["outcome"], "resumed");

  // reset: allowed (nobody is live), forgets every split, keeps the term floor.
  ProcessResult r = run({"reset", "--yes"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has_audit(r, "reset", "reset")) << r.err;
  EXPECT_NE(r.out.find("6 splits forgotten"), std::string::npos) << r.out;
  Json st = run_json({"status"});
  EXPECT_EQ(st["splits"]["total"], 0);
  EXPECT_EQ(st["plan"]["planned"], false);
  EXPECT_GE(st["plan"]["term"].get<std::uint64_t>(), term);
  EXPECT_FALSE(observer->get(core::kStandbyKey)) << "a standby record names a departed member";
  EXPECT_TRUE(st["standby"].is_null()) << st;

  // The job runs again from scratch, under a term above every earlier one.
  run_to_completion({"f1", "f2"}, 6, stores());
  const auto plan = core::decode_plan(core::kPlanKey, observer->get(core::kPlanKey)->value);
  EXPECT_EQ(plan.verdict, core::Verdict::complete);
  EXPECT_GT(plan.term, term) << "terms never go back across a reset";

  // delete: allowed, and the job is gone (exit 1 afterwards).
  observer.reset();
  admin.reset();
  Json dj = run_json({"delete", "--yes"});
  EXPECT_EQ(dj["outcome"], "deleted");
  ProcessResult gone = run({"status"});
  EXPECT_EQ(gone.exit_code, 1) << gone.out << gone.err;
}

// A finished job whose split record and spec an outsider damaged: `etlc status` names both keys
// (spec records included) and a stray key outside the layout; `etlc repair` rebuilds the split
// record from its spec and refuses one whose spec is unreadable too.
TEST_F(Lifecycle, status_lists_unreadable_specs_and_repair_rebuilds_a_split_record) {
  run_to_completion({"f1", "f2"}, 4, stores());
  open_observer();
  auto garble = [&](const std::string& key) {
    auto cur = observer->get(key);
    ASSERT_TRUE(cur.has_value()) << key;
    ASSERT_TRUE(observer->update(key, R"({"v":2})", cur->revision).ok) << key;
  };
  garble(core::split_key("s000"));
  garble(core::split_key("s001"));
  garble(core::spec_key("s001"));
  ASSERT_TRUE(observer->create("stray.key", "x").ok);
  Json st = run_json({"status"});
  std::vector<std::string> keys;
  for (const Json& g : st["garbage"]) keys.push_back(g["key"]);
  EXPECT_EQ(keys, (std::vector<std::string>{"spec.s001", "split.s000", "split.s001", "stray.key"}))
      << st.dump();

  ProcessResult r = run({"repair", "s000"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has_audit(r, "repair", "rebuilt")) << r.err;
  ASSERT_TRUE(split("s000").has_value());
  EXPECT_EQ(split("s000")->status, core::SplitStatus::runnable);
  EXPECT_EQ(split("s000")->progress.watermark, 0u);
  Json refused = run_json({"repair", "s001"}, 4);
  EXPECT_EQ(refused["outcome"], "no_spec") << refused.dump();
  EXPECT_NE(refused["detail"].get<std::string>().find("spec.s001"), std::string::npos);
  EXPECT_EQ(run_json({"repair", "s002"})["outcome"], "readable");
}

// The status view's words for records no live fleet produces on demand: a job with members but
// no leader, a departed member's assignment, a plan the leader gave up on.
TEST_F(Lifecycle, status_on_leaderless_departed_and_failed_jobs) {
  open_observer();
  core::PlanRecord plan;
  plan.fingerprint = "fp";
  plan.term = 3;
  plan.finality = core::Finality::final;
  plan.planned = true;
  plan.split_count = 2;
  ASSERT_TRUE(observer->create(core::kPlanKey, core::encode(plan)).ok);
  core::MemberRecord m{"alive", "n1", "fp", 4, 0, 1500};
  ASSERT_TRUE(observer->create(core::member_key("alive"), core::encode(m)).ok);
  core::AssignmentRecord gone{"gone", 3, {"s000", "s001"}};
  ASSERT_TRUE(observer->create(core::assign_key("gone"), core::encode(gone)).ok);
  core::AssignmentRecord mine{"alive", 3, {}};
  ASSERT_TRUE(observer->create(core::assign_key("alive"), core::encode(mine)).ok);

  std::string text = status_text();
  EXPECT_NE(text.find("leader    none (no rebalancing until one is elected"), std::string::npos)
      << text;
  Json st = run_json({"status"});
  for (const Json& mem : st["members"]) {
    if (mem["instance"] == "gone") {
      EXPECT_TRUE(mem["assigned"].is_null()) << "a departed member's record is not counted";
      EXPECT_EQ(mem["has_session"], false);
    }
  }

  auto e = observer->get(core::kPlanKey);
  plan.verdict = core::Verdict::failed;
  plan.message = "the planner failed 10 times in a row; last error: listing denied";
  ASSERT_TRUE(observer->update(core::kPlanKey, core::encode(plan), e->revision).ok);
  text = status_text();
  EXPECT_NE(text.find("-> failed: the planner failed 10 times"), std::string::npos) << text;
  EXPECT_NE(text.find("etlc resume"), std::string::npos) << text;
  Json r = run_json({"resume"});
  EXPECT_EQ(r["plan_failure_cleared"], true);
  EXPECT_EQ(run_json({"status"})["plan"]["verdict"], "running");
}

// Progress by weight from hand-written records (no member runs, so nothing rewrites them): the
// leader's job.progress with a rate gives an ETA; without it, or unreadable, status counts over
// the split records and says the rate is unknown.
TEST_F(Lifecycle, status_shows_progress_by_weight_its_eta_and_survives_an_unreadable_record) {
  open_observer();
  core::PlanRecord plan;
  plan.fingerprint = "fp";
  plan.term = 2;
  plan.planned = true;
  plan.split_count = 2;
  ASSERT_TRUE(observer->create(core::kPlanKey, core::encode(plan)).ok);
  core::SplitRecord owned;
  owned.id = "s000";
  owned.epoch = 1;
  owned.owner = "gone";
  owned.owner_nonce = "n";
  owned.weight = 60;
  owned.progress.done = 45;
  ASSERT_TRUE(observer->create(core::split_key("s000"), core::encode(owned)).ok);
  core::SplitRecord queued;
  queued.id = "s001";
  queued.weight = 40;
  queued.progress.done = 10;
  ASSERT_TRUE(observer->create(core::split_key("s001"), core::encode(queued)).ok);

  std::string text = status_text();
  EXPECT_NE(text.find("progress  55.0% done by weight: 55 of 100, 45 remaining (30 queued); rate "
                      "unknown, ETA unknown (counted over the split records: job.progress "
                      "absent)"),
            std::string::npos)
      << text;

  ASSERT_TRUE(
      observer->create(core::kProgressKey, core::encode(core::ProgressRecord{2, 100, 55, 45, 3}))
          .ok);
  text = status_text();
  EXPECT_NE(text.find("progress  55.0% done by weight: 55 of 100, 45 remaining (30 queued); rate "
                      "3/s, ETA 15s (job.progress, term 2)"),
            std::string::npos)
      << text;
  Json st = run_json({"status"});
  EXPECT_EQ(st["progress"]["eta_ms"], 15000);
  EXPECT_EQ(st["progress"]["rate_per_s"], 3);
  EXPECT_EQ(st["unowned_remaining"], 30);
  ASSERT_EQ(st["members"].size(), 1u);
  EXPECT_EQ(st["members"][0]["instance"], "gone");
  EXPECT_EQ(st["members"][0]["weight_remaining"], 15);

  auto e = observer->get(core::kProgressKey);
  ASSERT_TRUE(observer->update(core::kProgressKey, "not json", e->revision).ok);
  ProcessResult r = run({"status"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(counted over the split records: job.progress unreadable)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  job.progress: "), std::string::npos) << "listed as unreadable\n" << r.out;
  st = run_json({"status"});
  EXPECT_EQ(st["progress"]["record"], "unreadable");
  EXPECT_EQ(st["progress"]["source"], "split_records");
  EXPECT_TRUE(st["progress"]["rate_per_s"].is_null());
  EXPECT_EQ(st["progress"]["done"], 55);
  EXPECT_EQ(st["garbage"][0]["key"], "job.progress");
}

}  // namespace
}  // namespace etlc::testing
