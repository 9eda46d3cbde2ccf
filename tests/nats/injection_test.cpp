// The injection suite (issue 18): while a 3-member job runs (real threads, the Driver, a source
// that records every row it emits), an outsider damages one live record through the store API:
// garbage, a foreign version, a record of the wrong kind, an oversized value, a delete, a purge.
// For every key family, on a real nats-server and on the memory store, the job must still
// complete with every row emitted (or end in its named state: here the planner lists every split,
// so every damage heals). And a single-member job survives a server pause and a server restart.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/driver.hpp"
#include "etlc/memory_store.hpp"
#include "etlc/metrics.hpp"
#include "nats/nats_test_env.hpp"

namespace etlc::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kSplits = 9;
constexpr std::uint64_t kRows = 300;
constexpr std::uint64_t kRowsPerStep = 4;

// Every row any lane emitted, per split.
class Recorder {
 public:
  Recorder() : rows_(kSplits * kRows) {}
  void emit(std::size_t split, std::uint64_t row) { rows_[split * kRows + row].fetch_add(1); }
  double fraction() const {
    std::size_t n = 0;
    for (const auto& r : rows_) n += r.load() > 0 ? 1 : 0;
    return static_cast<double>(n) / static_cast<double>(rows_.size());
  }
  std::size_t missing() const {
    std::size_t n = 0;
    for (const auto& r : rows_) n += r.load() == 0 ? 1 : 0;
    return n;
  }

 private:
  std::vector<std::atomic<std::uint32_t>> rows_;
};

class RowLane final : public Lane {
 public:
  RowLane(Recorder& rec, std::size_t split, std::uint64_t from)
      : rec_(rec), split_(split), next_(from) {}
  StepResult step() override {
    for (std::uint64_t i = 0; i < kRowsPerStep && next_ < kRows; ++i) rec_.emit(split_, next_++);
    std::this_thread::sleep_for(10ms);
    return next_ >= kRows ? StepResult::end() : StepResult::more();
  }
  SplitProgress durable_progress() override { return SplitProgress{next_, {}}; }

 private:
  Recorder& rec_;
  std::size_t split_;
  std::uint64_t next_;
};

class RowSource final : public SplitSource {
 public:
  explicit RowSource(Recorder& rec) : rec_(rec) {}
  std::unique_ptr<Lane> open(const LaneContext& ctx) override {
    return std::make_unique<RowLane>(rec_, std::stoul(ctx.spec.descriptor), ctx.resume.watermark);
  }

 private:
  Recorder& rec_;
};

class RowPlanner final : public Planner {
 public:
  std::string fingerprint() const override { return "injection-job"; }
  Plan plan(const PlanContext&) override {
    Plan p;
    for (std::size_t i = 0; i < kSplits; ++i) {
      p.splits.push_back(
          PlannedSplit{SplitSpec{fmt::format("p{:02}", i), std::to_string(i), kRows}, {}});
    }
    return p;
  }
};

enum class Backend { memory, nats };
enum class Family { leader, plan, spec, split, lease, member, assign };
enum class Damage { garbage, foreign_version, wrong_kind, oversized, erase, purge };

const char* name(Backend b) {
  return b == Backend::memory ? "memory" : "nats";
}
const char* name(Family f) {
  static const char* const k[] = {"leader", "plan", "spec", "split", "lease", "member", "assign"};
  return k[static_cast<int>(f)];
}
const char* name(Damage d) {
  static const char* const k[] = {"garbage",   "foreign_version", "wrong_kind",
                                  "oversized", "erase",           "purge"};
  return k[static_cast<int>(d)];
}

// One job: its store(s), three drivers on their own threads.
class Job {
 public:
  explicit Job(Backend backend) : backend_(backend) {
    if (backend_ == Backend::nats) {
      bucket_ = unique_bucket();
      outsider_ = NatsStore::open(test_options({shared_server().url()}, bucket_));
    } else {
      memory_ = std::make_shared<MemoryStore>();
      outsider_ = memory_;
    }
  }
  ~Job() { stop(); }

  std::shared_ptr<KvStore> member_store() {
    if (memory_) return memory_;
    return NatsStore::open(test_options({shared_server().url()}, bucket_));
  }

  void start(int members, std::chrono::milliseconds lease = 1200ms) {
    for (int i = 0; i < members; ++i) {
      CoordinatorConfig c;
      c.instance_id = fmt::format("m{}", i);
      c.lease_duration = lease;
      c.op_timeout = lease / 4;
      c.rebalance_delay = 300ms;
      c.drain_deadline = 1000ms;
      c.max_in_flight = 2;
      c.assignment_interval = 20ms;
      DriverOptions o;
      o.commit_interval = 50ms;
      o.poll_interval = 10ms;
      o.retry_backoff = 50ms;
      drivers_.push_back(std::make_unique<Driver>(c, member_store(), std::make_shared<RowPlanner>(),
                                                  std::make_shared<RowSource>(recorder), o,
                                                  std::make_shared<MetricsRegistry>()));
    }
    results_.resize(drivers_.size());
    for (std::size_t i = 0; i < drivers_.size(); ++i) {
      threads_.emplace_back([this, i] {
        DriverResult r = drivers_[i]->run();
        std::lock_guard lk(mu_);
        results_[i] = std::move(r);
      });
    }
  }

  bool all_finished() {
    std::lock_guard lk(mu_);
    for (auto& r : results_) {
      if (!r) return false;
    }
    return true;
  }

  // Waits for every driver to finish (bounded); false if one is still running at the deadline.
  bool wait(std::chrono::seconds bound) {
    if (!eventually([&] { return all_finished(); }, bound)) return false;
    for (auto& t : threads_) t.join();
    threads_.clear();
    return true;
  }

  void stop() {
    for (auto& d : drivers_) d->abort();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  std::string describe() {
    std::lock_guard lk(mu_);
    std::string out;
    for (std::size_t i = 0; i < results_.size(); ++i) {
      out += fmt::format(
          " m{}={}", i,
          results_[i] ? fmt::format("{}({})", to_string(results_[i]->exit), results_[i]->message)
                      : "running");
    }
    return out + fmt::format(", rows missing {}", recorder.missing());
  }

  std::vector<std::optional<DriverResult>> results() {
    std::lock_guard lk(mu_);
    return results_;
  }
  KvStore& outsider() { return *outsider_; }
  Backend backend() const { return backend_; }
  const std::string& bucket() const { return bucket_; }

  Recorder recorder;

 private:
  Backend backend_;
  std::string bucket_;
  std::shared_ptr<MemoryStore> memory_;
  std::shared_ptr<KvStore> outsider_;
  std::vector<std::unique_ptr<Driver>> drivers_;
  std::mutex mu_;  // guards results_ (written by the driver threads)
  std::vector<std::optional<DriverResult>> results_;
  std::vector<std::thread> threads_;
};

std::optional<std::string> leader_of(KvStore& store) {
  auto e = store.get(core::kLeaderKey);
  if (!e) return std::nullopt;
  try {
    return core::decode_leader(core::kLeaderKey, e->value).owner;
  } catch (const core::RecordError&) {
    return std::nullopt;
  }
}

// The key of a live record of `family` in the running job, or nullopt if none exists right now.
std::optional<std::string> live_key(KvStore& store, Family family) {
  switch (family) {
    case Family::leader:
      return std::string(core::kLeaderKey);
    case Family::plan:
      return std::string(core::kPlanKey);
    case Family::spec:
    case Family::split:
    case Family::lease: {
      auto leases = store.list(core::kLeasePrefix);
      if (leases.empty()) return std::nullopt;
      auto id = core::id_from_key(leases.front().key, core::kLeasePrefix);
      if (!id) return std::nullopt;
      return family == Family::spec    ? core::spec_key(*id)
             : family == Family::split ? core::split_key(*id)
                                       : core::lease_key(*id);
    }
    case Family::member:
    case Family::assign: {
      const auto leader = leader_of(store);
      for (const char* m : {"m0", "m1", "m2"}) {
        if (leader && *leader == m) continue;
        return family == Family::member ? core::member_key(m) : core::assign_key(m);
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// Damages `key` as an outsider would. True if the damage landed.
bool damage(Job& job, const std::string& key, Damage d) {
  KvStore& store = job.outsider();
  auto cur = store.get(key);
  if (!cur) return false;
  switch (d) {
    case Damage::garbage:
      return store.update(key, "{not json", cur->revision).ok;
    case Damage::foreign_version:
      return store.update(key, R"({"v":2,"from":"a newer library"})", cur->revision).ok;
    case Damage::wrong_kind:
      return store
          .update(key, core::encode(core::CordonRecord{"x", "a record of the wrong kind"}),
                  cur->revision)
          .ok;
    case Damage::oversized:
      if (job.backend() == Backend::nats) {
        // Just over the library's write limit, as a foreign client may write it (no headers).
        raw_put(shared_server().url(), job.bucket(), key, std::string(kMaxValueBytes + 1000, 'x'));
        return true;
      }
      return store.update(key, std::string(kMaxValueBytes, 'x'), cur->revision).ok;
    case Damage::erase:
      return store.erase(key, cur->revision).ok;
    case Damage::purge:
      if (job.backend() == Backend::nats) {
        purge_key(shared_server().url(), job.bucket(), key);
        return true;
      }
      return store.erase(key, cur->revision).ok;
  }
  return false;
}

using Case = std::tuple<Backend, Family, Damage>;

class Injection : public ::testing::TestWithParam<Case> {};

TEST_P(Injection, the_job_completes_and_every_row_is_emitted) {
  const auto [backend, family, kind] = GetParam();
  Job job(backend);
  job.start(3);
  ASSERT_TRUE(eventually([&] { return job.recorder.fraction() >= 0.2; }, 30s)) << job.describe();
  bool landed = false;
  for (int attempt = 0; attempt < 50 && !landed; ++attempt) {
    if (auto key = live_key(job.outsider(), family)) landed = damage(job, *key, kind);
    if (!landed) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(landed) << "no live " << name(family) << " record to damage";
  ASSERT_TRUE(job.wait(90s)) << name(family) << "/" << name(kind) << ":" << job.describe();
  for (const auto& r : job.results()) {
    EXPECT_EQ(r->exit, DriverExit::completed) << job.describe();
  }
  EXPECT_EQ(job.recorder.missing(), 0u) << job.describe();
}

INSTANTIATE_TEST_SUITE_P(
    EveryFamily, Injection,
    ::testing::Combine(::testing::Values(Backend::memory, Backend::nats),
                       ::testing::Values(Family::leader, Family::plan, Family::spec, Family::split,
                                         Family::lease, Family::member, Family::assign),
                       ::testing::Values(Damage::garbage, Damage::foreign_version,
                                         Damage::wrong_kind, Damage::oversized, Damage::erase,
                                         Damage::purge)),
    [](const ::testing::TestParamInfo<Case>& p) {
      return fmt::format("{}_{}_{}", name(std::get<0>(p.param)), name(std::get<1>(p.param)),
                         name(std::get<2>(p.param)));
    });

// --- a single-member job and the server ---------------------------------------------------------

// One member alone on `server`; `disturb` runs once a tenth of the rows are emitted.
void run_alone(NatsServer& server, const std::function<void()>& disturb) {
  Recorder recorder;
  CoordinatorConfig c;
  c.instance_id = "alone";
  c.lease_duration = 2000ms;
  c.op_timeout = 500ms;
  c.rebalance_delay = 300ms;
  c.max_in_flight = 2;
  DriverOptions o;
  o.commit_interval = 50ms;
  o.poll_interval = 10ms;
  o.retry_backoff = 50ms;
  Driver driver(c, NatsStore::open(test_options({server.url()}, unique_bucket())),
                std::make_shared<RowPlanner>(), std::make_shared<RowSource>(recorder), o);
  std::mutex mu;
  std::optional<DriverResult> result;
  std::thread t([&] {
    DriverResult r = driver.run();
    std::lock_guard lk(mu);
    result = std::move(r);
  });
  auto finished = [&] {
    std::lock_guard lk(mu);
    return result.has_value();
  };
  ASSERT_TRUE(eventually([&] { return recorder.fraction() >= 0.1; }, 30s));
  disturb();
  const bool done = eventually(finished, 90s);
  if (!done) driver.abort();
  t.join();
  ASSERT_TRUE(done) << "rows missing " << recorder.missing() << "\n" << server.diagnostics();
  EXPECT_EQ(result->exit, DriverExit::completed) << result->message;
  EXPECT_EQ(recorder.missing(), 0u);
}

TEST(LoneMemberNats, survives_a_3_s_server_pause_longer_than_its_lease_and_completes) {
  NatsServer server;
  run_alone(server, [&] {
    server.kill(SIGSTOP);
    std::this_thread::sleep_for(3s);
    server.kill(SIGCONT);
  });
}

TEST(LoneMemberNats, survives_a_server_restart_and_completes) {
  NatsServer server;
  run_alone(server, [&] { server.restart(); });
}

}  // namespace
}  // namespace etlc::testing
