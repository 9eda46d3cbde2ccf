// NatsStore on a 3-node JetStream cluster (one cluster for the whole binary): an R3 bucket, reads
// that are never stale, a follower lost without interruption, and the stream leader killed —
// writes resume after re-election, no acknowledged CAS is lost, the watch is never silent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "etlc/nats_store.hpp"
#include "nats/nats_test_env.hpp"
#include "store_conformance/conformance.hpp"

namespace etlc::testing {
namespace {

using ::testing::AnyOf;
using namespace std::chrono_literals;

// Retries `f` on retryable StoreErrors until it returns or `timeout` passes (then rethrows).
template <typename F>
auto retry(F&& f, std::chrono::milliseconds timeout = 30s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    try {
      return f();
    } catch (const StoreError& e) {
      if (!e.retryable() || std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(50ms);
    }
  }
}

// Restarts every stopped node, so each test starts from a whole cluster.
void heal(NatsCluster& cluster) {
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (!cluster.node(i).running()) cluster.node(i).restart();
  }
  ASSERT_TRUE(cluster.wait_healthy(30s));
}

class NatsCluster3 : public ::testing::Test {
 protected:
  void SetUp() override { heal(shared_cluster()); }
  NatsCluster& cluster() { return shared_cluster(); }
};

TEST_F(NatsCluster3, AnR3BucketHasThreeReplicasAndReadsAreNeverStale) {
  std::string bucket = unique_bucket();
  // Two stores on different nodes: a value acknowledged to one is what the other reads next.
  NatsStore a(test_options({cluster().node(0).url()}, bucket, 3));
  NatsStore b(test_options({cluster().node(2).url()}, bucket, 3));
  auto s = stream_settings(cluster().urls(), bucket);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->replicas, 3);
  EXPECT_EQ(s->history, 1);

  auto r = a.create("k", "0");
  ASSERT_TRUE(r.ok);
  Revision rev = r.revision;
  for (int i = 1; i <= 200; ++i) {
    NatsStore& writer = (i % 2 == 0) ? a : b;
    NatsStore& reader = (i % 2 == 0) ? b : a;
    auto w = writer.update("k", std::to_string(i), rev);
    ASSERT_TRUE(w.ok) << "round " << i;
    rev = w.revision;
    auto got = reader.get("k");
    ASSERT_TRUE(got.has_value());
    ASSERT_EQ(got->revision, rev) << "stale read in round " << i;
    ASSERT_EQ(got->value, std::to_string(i));
  }
}

TEST_F(NatsCluster3, LosingAFollowerDoesNotInterruptWrites) {
  std::string bucket = unique_bucket();
  NatsStore store(test_options(cluster().urls(), bucket, 3));
  auto leader = stream_leader(cluster().urls(), bucket);
  ASSERT_TRUE(leader.has_value());
  auto leader_index = cluster().index_of(*leader);
  ASSERT_TRUE(leader_index.has_value());
  // Connect a store to the leader's node only, then kill a follower.
  NatsStore on_leader(test_options({cluster().node(*leader_index).url()}, bucket, 3));
  std::size_t follower = (*leader_index + 1) % cluster().size();
  auto r = on_leader.create("k", "0");
  ASSERT_TRUE(r.ok);
  cluster().node(follower).kill(SIGKILL);
  Revision rev = r.revision;
  for (int i = 1; i <= 50; ++i) {
    auto w = on_leader.update("k", std::to_string(i), rev);
    ASSERT_TRUE(w.ok) << "write " << i << " lost its race with nobody";
    rev = w.revision;
  }
  EXPECT_EQ(on_leader.get("k")->value, "50");
}

TEST_F(NatsCluster3, KillingTheStreamLeaderPausesWritesButLosesNoAcknowledgedCas) {
  std::string bucket = unique_bucket();
  NatsStoreOptions o = test_options(cluster().urls(), bucket, 3);
  o.op_timeout_ms = 1000;
  NatsStore store(o);

  std::map<std::string, Revision> acked;
  for (int i = 0; i < 30; ++i) {
    std::string k = "lk.k" + std::to_string(i);
    auto r = store.create(k, "v" + std::to_string(i));
    ASSERT_TRUE(r.ok);
    acked[k] = r.revision;
  }
  auto counter = store.create("lk.counter", "0");
  ASSERT_TRUE(counter.ok);
  int value = 0;
  Revision rev = counter.revision;
  for (int i = 0; i < 10; ++i) {
    auto r = store.update("lk.counter", std::to_string(value + 1), rev);
    ASSERT_TRUE(r.ok);
    ++value;
    rev = r.revision;
  }
  auto w = open_watch(store, "lk.");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));

  auto leader = stream_leader(cluster().urls(), bucket);
  ASSERT_TRUE(leader.has_value());
  auto leader_index = cluster().index_of(*leader);
  ASSERT_TRUE(leader_index.has_value());
  cluster().node(*leader_index).kill(SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();

  // CAS the counter until five writes after the kill were acknowledged. A failure is
  // unavailable or unknown_outcome; after an unknown outcome (or a conflict, which only an
  // unknown outcome that applied late can cause) re-read and adopt: the counter must be at our
  // last acknowledged value or the one unknown write above it, never below (nothing
  // acknowledged lost) and never beyond.
  int successes_after_kill = 0;
  int failures = 0;
  std::chrono::steady_clock::duration first_success_after{};
  const auto deadline = killed_at + 45s;
  while (successes_after_kill < 5 && std::chrono::steady_clock::now() < deadline) {
    bool resolve = false;
    try {
      auto r = store.update("lk.counter", std::to_string(value + 1), rev);
      if (r.ok) {
        ++value;
        rev = r.revision;
        if (successes_after_kill++ == 0) {
          first_success_after = std::chrono::steady_clock::now() - killed_at;
        }
        continue;
      }
      resolve = true;
    } catch (const StoreError& e) {
      ASSERT_THAT(e.code(), AnyOf(StoreErrc::unavailable, StoreErrc::unknown_outcome)) << e.what();
      ++failures;
      resolve = e.code() == StoreErrc::unknown_outcome;
      std::this_thread::sleep_for(50ms);
    }
    if (resolve) {
      auto got = retry([&] { return store.get("lk.counter"); });
      ASSERT_TRUE(got.has_value());
      int seen = std::stoi(got->value);
      ASSERT_THAT(seen, AnyOf(value, value + 1)) << "acknowledged CAS lost or phantom write";
      if (seen == value + 1) ++value;
      rev = got->revision;
    }
  }
  ASSERT_EQ(successes_after_kill, 5) << "writes did not resume within 45 s after the leader kill";
  RecordProperty(
      "first_write_after_leader_kill_ms",
      static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(first_success_after).count()));
  RecordProperty("failed_attempts_during_election", failures);

  // Everything acknowledged before the kill is still there, at the same revision.
  for (const auto& [k, r] : acked) {
    auto got = retry([&] { return store.get(k); });
    ASSERT_TRUE(got.has_value()) << k;
    EXPECT_EQ(got->revision, r) << k;
  }
  auto final_counter = retry([&] { return store.get("lk.counter"); });
  ASSERT_TRUE(final_counter.has_value());
  EXPECT_EQ(final_counter->value, std::to_string(value));
  EXPECT_EQ(final_counter->revision, rev);

  // The watch is never silent: it delivers the last write, or it breaks (and a new watch then
  // shows it).
  bool saw = poll_until(
      *w, [&](const TestWatch& t) { return t.saw("lk.counter", rev); }, 40s);
  if (!saw) {
    ASSERT_TRUE(w->broken) << "the watch went silent across the leader kill";
    auto again = retry([&] { return open_watch(store, "lk."); });
    ASSERT_TRUE(poll_until(*again, [](const TestWatch& t) { return t.caught_up(); }));
    bool found = false;
    for (const auto& e : again->snapshot()) found |= e.key == "lk.counter" && e.revision == rev;
    EXPECT_TRUE(found);
  }
}

}  // namespace
}  // namespace etlc::testing
