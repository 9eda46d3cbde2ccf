// End to end on real processes, a real nats-server and a real PostgreSQL: three pg-backfill
// members share one job; one is SIGKILLed and restarted under its id, one is SIGSTOPped past its
// lease (its splits taken over) and continued, and one is joined by a twin (a second process
// started with a live member's instance id, which takes over from it). Then:
//   * with the sink fence, verify finds every source row exactly once (0 missing, 0 duplicates);
//   * without it (--no-fence), 0 missing and the duplicates it counts are reported here;
//   * either way, the member paused past its lease writes no byte to the sink after it wakes
//     for any tenancy it held when it was paused.
// Every wait is on a condition with a generous bound; the job is throttled so that it is still
// running when the faults are injected (checked, not assumed).
#include <gtest/gtest.h>

#include <csignal>
#include <iostream>
#include <set>
#include <thread>

#include "etlc/admin.hpp"
#include "etlc/nats_store.hpp"
#include "examples/child_process.hpp"
#include "examples/temp_dir.hpp"
#include "support/nats_server.hpp"
#include "support/pg_server.hpp"

namespace fb::testing {
namespace {

using namespace std::chrono_literals;
using etlc::testing::NatsServer;
using etlc::testing::PgServer;
using etlc::testing::PgServerConfig;
using SteadyClock = std::chrono::steady_clock;

const std::string kBin = PG_BACKFILL_BIN;
constexpr int kRows = 45'000;

struct Outcome {
  std::string verify;
  int verify_rc = -1;
  std::int64_t missing = -1, duplicates = -1;
};

// "missing N, duplicates M" from verify's output.
void parse(Outcome& o) {
  const auto at = o.verify.find("missing ");
  if (at == std::string::npos) return;
  long long m = -1, d = -1;
  if (std::sscanf(o.verify.c_str() + at, "missing %lld, duplicates %lld", &m, &d) == 2) {
    o.missing = m;
    o.duplicates = d;
  }
}

// Waits for `done` (polling), up to `limit`.
template <class F>
bool wait_until(F done, std::chrono::milliseconds limit) {
  const auto until = SteadyClock::now() + limit;
  while (!done()) {
    if (SteadyClock::now() >= until) return done();
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

class PgE2E : public ::testing::Test {
 protected:
  PgE2E() : pg(PgServerConfig{{"source", "sink"}, false, {}, std::chrono::milliseconds(60'000)}) {}

  std::vector<std::string> args(const std::string& id, bool fence) {
    std::vector<std::string> a{kBin,
                               "run",
                               "--source-pg",
                               pg.url("source"),
                               "--sink-pg",
                               pg.url("sink"),
                               "--table",
                               "orders",
                               "--store",
                               nats.url(),
                               "--job",
                               "e2e",
                               "--instance",
                               id,
                               "--max-in-flight",
                               "2",
                               "--lease-ms",
                               "1500",
                               "--rebalance-delay-ms",
                               "500",
                               "--commit-interval-ms",
                               "300",
                               "--batch-rows",
                               "100",
                               "--split-rows",
                               "1500",
                               "--throttle-rows-per-s",
                               "1200"};
    if (!fence) a.push_back("--no-fence");
    return a;
  }
  std::int64_t sink(const std::string& sql) { return pg.query_int("sink", sql); }
  std::string logs() {
    std::string out;
    for (const auto& name : {"m1", "m1b", "m2", "m3", "m3b"}) {
      out += std::string("--- ") + name + " ---\n" +
             read_text(dir.path() / (std::string(name) + ".log"));
    }
    return out + nats.diagnostics() + pg.diagnostics();
  }
  // The (split, epoch) tenancies `instance` owns, from the coordination store.
  std::set<std::pair<std::string, std::uint64_t>> owned_by(const std::string& instance) {
    std::set<std::pair<std::string, std::uint64_t>> out;
    for (const auto& row : admin().splits().rows) {
      if (row.owner == instance) out.insert({row.id, row.epoch});
    }
    return out;
  }
  etlc::JobAdmin& admin() {
    if (!admin_) {
      etlc::NatsStoreOptions o;
      o.servers = {nats.url()};
      o.job = "e2e";
      o.probe_on_open = false;
      o.create_bucket = false;
      store_ = etlc::NatsStore::open(o);
      admin_ = std::make_unique<etlc::JobAdmin>(*store_);
    }
    return *admin_;
  }
  std::int64_t rows_of(const std::set<std::pair<std::string, std::uint64_t>>& tenancies) {
    std::int64_t n = 0;
    for (const auto& [split, epoch] : tenancies) {
      n += sink("SELECT count(*) FROM orders_sink WHERE split = '" + split +
                "' AND epoch = " + std::to_string(epoch));
    }
    return n;
  }

  Outcome scenario(bool fence);

  NatsServer nats;
  PgServer pg;
  ScratchDir dir{"pg-e2e"};
  std::shared_ptr<etlc::KvStore> store_;
  std::unique_ptr<etlc::JobAdmin> admin_;
};

Outcome PgE2E::scenario(bool fence) {
  Outcome out;
  EXPECT_EQ(run_to_end({kBin, "generate", "--pg", pg.url("source"), "--table", "orders", "--rows",
                        std::to_string(kRows), "--seed", "21"},
                       dir.path() / "gen.log"),
            0)
      << read_text(dir.path() / "gen.log");
  EXPECT_EQ(run_to_end({kBin, "init-sink", "--sink-pg", pg.url("sink"), "--table", "orders"},
                       dir.path() / "init.log"),
            0);
  auto m1 = std::make_unique<ChildProcess>(args("m1", fence), dir.path() / "m1.log");
  ChildProcess m2(args("m2", fence), dir.path() / "m2.log");
  ChildProcess m3(args("m3", fence), dir.path() / "m3.log");
  const auto written = [&] { return sink("SELECT count(*) FROM orders_sink"); };

  // All three write.
  EXPECT_TRUE(
      wait_until([&] { return sink("SELECT count(DISTINCT writer) FROM orders_sink") == 3; }, 60s))
      << logs();
  EXPECT_LT(written(), kRows) << "finished before anything could be injected\n" << logs();

  // 1. SIGKILL m1, restart it under its id at once.
  m1->signal(SIGKILL);
  EXPECT_EQ(m1->wait_for(10s), std::optional<int>(128 + SIGKILL));
  m1.reset();
  ChildProcess m1b(args("m1", fence), dir.path() / "m1b.log");

  // 2. SIGSTOP m2 while it holds splits (retried if it is between two splits just then), wait
  //    until each of those tenancies has been taken over, and count their rows.
  std::set<std::pair<std::string, std::uint64_t>> paused;
  for (int attempt = 0; attempt < 20 && paused.empty(); ++attempt) {
    m2.signal(SIGSTOP);
    std::this_thread::sleep_for(200ms);  // a write already sent has landed
    paused = owned_by("m2");
    if (paused.empty()) {
      m2.signal(SIGCONT);
      std::this_thread::sleep_for(300ms);
    }
  }
  EXPECT_FALSE(paused.empty()) << "m2 never held a split when stopped\n" << logs();
  const auto stopped_at = SteadyClock::now();
  EXPECT_TRUE(wait_until(
      [&] {
        const auto now_owned = owned_by("m2");
        for (const auto& t : paused) {
          if (now_owned.count(t)) return false;
        }
        return SteadyClock::now() - stopped_at >= 2500ms;  // past the lease in any case
      },
      60s))
      << logs();
  const std::int64_t zombie_rows_before = rows_of(paused);
  EXPECT_LT(written(), kRows) << "finished while m2 was paused\n" << logs();
  m2.signal(SIGCONT);

  // 3. A twin of m3: the newer process takes over, the older one stops.
  ChildProcess m3b(args("m3", fence), dir.path() / "m3b.log");

  const auto rc1 = m1b.wait_for(180s), rc2 = m2.wait_for(60s), rc3b = m3b.wait_for(60s),
             rc3 = m3.wait_for(30s);
  EXPECT_EQ(rc1, std::optional<int>(0)) << logs();
  EXPECT_EQ(rc2, std::optional<int>(0)) << "the paused member exits 0 on completion\n" << logs();
  EXPECT_EQ(rc3b, std::optional<int>(0)) << logs();
  EXPECT_EQ(rc3, std::optional<int>(1)) << "the older twin stops with an error\n" << logs();
  EXPECT_NE(read_text(dir.path() / "m3.log").find("another live process uses instance id 'm3'"),
            std::string::npos)
      << logs();
  // On waking, whichever thread runs first stops the paused member's lanes: a lane's own check
  // (the session may have lapsed) or the control loop (starved); which one is up to the
  // scheduler. Either way, by its own clock.
  const std::string m2_log = read_text(dir.path() / "m2.log");
  EXPECT_TRUE(m2_log.find("the member session may have lapsed") != std::string::npos ||
              m2_log.find("stopping lanes (starved)") != std::string::npos)
      << logs();

  // The paused member wrote nothing for its old tenancies after it woke.
  EXPECT_EQ(rows_of(paused), zombie_rows_before) << logs();

  const auto status = admin().status();
  EXPECT_TRUE(status.plan && status.plan->verdict == etlc::PlanVerdict::complete) << logs();

  out.verify_rc = run_to_end({kBin, "verify", "--source-pg", pg.url("source"), "--sink-pg",
                              pg.url("sink"), "--table", "orders"},
                             dir.path() / "verify.log");
  out.verify = read_text(dir.path() / "verify.log");
  parse(out);
  return out;
}

TEST_F(PgE2E, with_the_fence_kill_pause_and_twin_leave_every_row_exactly_once) {
  const Outcome o = scenario(true);
  EXPECT_EQ(o.missing, 0) << o.verify;
  EXPECT_EQ(o.duplicates, 0) << o.verify << logs();
  EXPECT_EQ(o.verify_rc, 0) << o.verify;
  EXPECT_NE(o.verify.find("unexpected 0, wrong 0"), std::string::npos) << o.verify;
  std::cout << "[ fence on  ] " << o.verify;
}

TEST_F(PgE2E, without_the_fence_nothing_is_lost_and_the_duplicates_are_counted) {
  const Outcome o = scenario(false);
  EXPECT_EQ(o.missing, 0) << o.verify;
  ASSERT_GE(o.duplicates, 0) << o.verify;
  // At-least-once: the takeovers replay what was written after the last commit. Reported, not
  // asserted: how many depends on where the faults landed.
  RecordProperty("duplicates", static_cast<int>(o.duplicates));
  std::cout << "[ fence off ] duplicates written without the fence: " << o.duplicates << "\n"
            << o.verify;
}

}  // namespace
}  // namespace fb::testing
