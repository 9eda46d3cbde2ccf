// NatsStore::create_many on real nats-server processes: outcomes of a large batch over absent,
// live and deleted keys; watches across batch creates; concurrent batches; a server that stops
// answering or goes away mid-batch. The contract itself is in the conformance suite.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "etlc/nats_store.hpp"
#include "nats/nats_test_env.hpp"
#include "store_conformance/conformance.hpp"

namespace etlc::testing {
namespace {

using namespace std::chrono_literals;

struct Batch {
  std::vector<std::string> keys;
  std::vector<std::string> values;
  std::vector<CreateRequest> requests() const {
    std::vector<CreateRequest> out;
    for (std::size_t i = 0; i < keys.size(); ++i) out.push_back({keys[i], values[i]});
    return out;
  }
};

Batch numbered(const std::string& prefix, std::size_t n, const std::string& tag) {
  Batch b;
  for (std::size_t i = 0; i < n; ++i) {
    b.keys.push_back(prefix + std::to_string(i));
    b.values.push_back(tag + std::to_string(i));
  }
  return b;
}

std::map<std::string, Entry> by_key(std::vector<Entry> entries) {
  std::map<std::string, Entry> out;
  for (auto& e : entries) out.emplace(e.key, std::move(e));
  return out;
}

// 10^4 creates through a store that knows nothing of the bucket: half the keys live (written
// by another store), a tenth of the rest deleted, a few requested twice.
TEST(NatsCreateMany, ABatchOverLiveAndDeletedKeysHasTheOutcomesOfSingleCreates) {
  const std::string bucket = unique_bucket();
  const auto options = test_options({shared_server().url()}, bucket);
  constexpr std::size_t kKeys = 10'000;
  Batch batch = numbered("b.k", kKeys, "new-");
  std::map<std::string, Revision> live;
  {
    NatsStore other(options);
    for (std::size_t i = 0; i < kKeys; ++i) {
      if (i % 2 == 0) {
        live[batch.keys[i]] = other.create(batch.keys[i], "old").revision;
      } else if (i % 20 == 1) {
        const Revision r = other.create(batch.keys[i], "gone").revision;
        ASSERT_TRUE(other.erase(batch.keys[i], r).ok);
      }
    }
  }
  for (std::size_t i : {1, 3, 4, 21}) {  // repeats: new, new, live, deleted
    batch.keys.push_back(batch.keys[i]);
    batch.values.push_back("again");
  }
  NatsStore store(options);
  const auto requests = batch.requests();
  const std::vector<CreateOutcome> out = store.create_many(requests);
  ASSERT_EQ(out.size(), requests.size());
  const auto stored = by_key(store.list("b."));
  ASSERT_EQ(stored.size(), kKeys);
  for (std::size_t i = 0; i < kKeys; ++i) {
    const CreateOutcome& o = out[i];
    ASSERT_FALSE(o.error.has_value()) << batch.keys[i];
    const Entry& e = stored.at(batch.keys[i]);
    if (i % 2 == 0) {
      EXPECT_FALSE(o.result.ok) << batch.keys[i];
      EXPECT_EQ(o.result.revision, live[batch.keys[i]]) << batch.keys[i];
      EXPECT_EQ(e.value, "old");
    } else {
      EXPECT_TRUE(o.result.ok) << batch.keys[i] << (i % 20 == 1 ? " (deleted before)" : "");
      EXPECT_EQ(o.result.revision, e.revision) << batch.keys[i];
      EXPECT_EQ(e.value, batch.values[i]);
    }
  }
  for (std::size_t j = kKeys; j < requests.size(); ++j) {
    const CreateOutcome& o = out[j];
    ASSERT_FALSE(o.error.has_value()) << batch.keys[j];
    EXPECT_FALSE(o.result.ok) << "a repeat of " << batch.keys[j] << " must lose to the first";
    EXPECT_EQ(o.result.revision, stored.at(batch.keys[j]).revision) << batch.keys[j];
  }
  EXPECT_GE(store.stats().publishes, kKeys);
}

// Every batch create carries the previous-revision header: a history-1 watch sees each one,
// including creates over delete markers, and never breaks.
TEST(NatsCreateMany, AWatchSeesEveryBatchCreateAndStaysGapFree) {
  NatsStore store(test_options({shared_server().url()}, unique_bucket()));
  constexpr std::size_t kKeys = 2'000;
  Batch batch = numbered("w.k", kKeys, "v");
  for (std::size_t i = 0; i < kKeys; i += 7) {
    const Revision r = store.create(batch.keys[i], "before").revision;
    ASSERT_TRUE(store.erase(batch.keys[i], r).ok);
  }
  auto w = open_watch(store, "w.");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  const auto requests = batch.requests();
  const auto out = store.create_many(requests);
  std::map<std::string, Revision> created;
  for (std::size_t i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(out[i].result.ok && !out[i].error) << batch.keys[i];
    created[batch.keys[i]] = out[i].result.revision;
  }
  ASSERT_TRUE(poll_until(*w, [&](const TestWatch& t) { return t.live().size() >= kKeys; }))
      << "seen " << w->live().size() << (w->broken ? ", broken: " + w->broken_message : "");
  EXPECT_FALSE(w->broken) << w->broken_message;
  for (const auto& e : w->live()) {
    EXPECT_EQ(e.kind, WatchEvent::Kind::put) << e.key;
    EXPECT_EQ(created[e.key], e.revision) << e.key;
  }
}

// Batches on the same keys from several threads and two stores: each key is created exactly
// once, and every loser reports the winner's revision.
TEST(NatsCreateMany, ConcurrentBatchesCreateEachKeyExactlyOnce) {
  const auto options = test_options({shared_server().url()}, unique_bucket());
  NatsStore a(options);
  NatsStore b(options);
  constexpr std::size_t kKeys = 2'000;
  constexpr int kThreads = 4;
  std::vector<Batch> batches;
  for (int t = 0; t < kThreads; ++t) {
    Batch bt = numbered("c.k", kKeys, "t" + std::to_string(t) + "-");
    std::mt19937 rng(static_cast<unsigned>(t));
    std::vector<std::size_t> order(kKeys);
    for (std::size_t i = 0; i < kKeys; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    Batch shuffled;
    for (std::size_t i : order) {
      shuffled.keys.push_back(bt.keys[i]);
      shuffled.values.push_back(bt.values[i]);
    }
    batches.push_back(std::move(shuffled));
  }
  std::vector<std::vector<CreateOutcome>> outs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const auto requests = batches[t].requests();
      outs[t] = (t % 2 == 0 ? a : b).create_many(requests);
    });
  }
  for (auto& th : threads) th.join();
  const auto stored = by_key(a.list("c."));
  ASSERT_EQ(stored.size(), kKeys);
  std::map<std::string, int> wins;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(outs[t].size(), kKeys);
    for (std::size_t i = 0; i < kKeys; ++i) {
      const auto& o = outs[t][i];
      const std::string& key = batches[t].keys[i];
      ASSERT_FALSE(o.error.has_value()) << key;
      EXPECT_EQ(o.result.revision, stored.at(key).revision) << key;
      if (o.result.ok) {
        ++wins[key];
        EXPECT_EQ(stored.at(key).value, batches[t].values[i]) << key;
      }
    }
  }
  for (const auto& [key, entry] : stored) EXPECT_EQ(wins[key], 1) << key;
}

TEST(NatsCreateMany, BadBatchesAreRejectedBeforeAnythingIsSent) {
  NatsStore store(test_options({shared_server().url()}, unique_bucket()));
  const std::uint64_t before = store.stats().publishes;
  std::vector<CreateRequest> bad{{"ok.key", "v"}, {"bad..key", "v"}};
  try {
    store.create_many(bad);
    ADD_FAILURE() << "an invalid key was accepted";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::invalid_argument);
  }
  EXPECT_EQ(store.stats().publishes, before);
  EXPECT_FALSE(store.get("ok.key").has_value());
  EXPECT_TRUE(store.create_many({}).empty());
  store.close();
  std::vector<CreateRequest> one{{"ok.key", "v"}};
  try {
    store.create_many(one);
    ADD_FAILURE() << "a closed store accepted a batch";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::closed);
  }
}

TEST(NatsCreateMany, AWindowOfOneStillCreatesEverything) {
  auto options = test_options({shared_server().url()}, unique_bucket());
  options.creates_in_flight = 1;
  NatsStore store(options);
  Batch batch = numbered("o.k", 300, "v");
  const auto requests = batch.requests();
  const auto out = store.create_many(requests);
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(out[i].result.ok && !out[i].error) << batch.keys[i];
  }
  EXPECT_EQ(store.list("o.").size(), batch.keys.size());
}

// Waits until every message this store sent before has been applied or refused (the server
// handles one connection's messages in order), and returns the bucket's keys under `prefix`.
std::map<std::string, Entry> settled(NatsStore& store, const std::string& prefix) {
  EXPECT_TRUE(eventually(
      [&] {
        try {
          return store.create("barrier." + std::to_string(store.stats().publishes), "b").ok;
        } catch (const StoreError&) {
          return false;
        }
      },
      30s));
  return by_key(store.list(prefix));
}

// The server stops answering (SIGSTOP) mid-batch: the batch returns within its bounds, every
// request has an outcome, and once the server runs again the store agrees with each: created
// ones hold their revision, unavailable ones were never applied, unknown ones either way.
TEST(NatsCreateManyFaults, AServerThatStopsAnsweringMidBatchGivesHonestOutcomes) {
  NatsServer server;
  auto options = test_options({server.url()}, unique_bucket());
  options.op_timeout_ms = 500;
  NatsStore store(options);
  Batch batch = numbered("s.k", 50'000, "v");
  const auto requests = batch.requests();
  const std::uint64_t start = store.stats().publishes;
  auto running = std::async(std::launch::async, [&] { return store.create_many(requests); });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (store.stats().publishes < start + 2'000 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  server.kill(SIGSTOP);
  ASSERT_EQ(running.wait_for(120s), std::future_status::ready) << "create_many did not return";
  server.kill(SIGCONT);
  const std::vector<CreateOutcome> out = running.get();
  ASSERT_EQ(out.size(), requests.size());
  std::map<std::string, std::size_t> count;
  for (const auto& o : out) {
    count[o.error ? (*o.error == StoreErrc::unknown_outcome ? "unknown" : "unavailable")
                  : (o.result.ok ? "created" : "lost")]++;
  }
  EXPECT_GT(count["created"], 0u);
  EXPECT_GT(count["unknown"] + count["unavailable"], 0u);
  // Only what was in flight when the server stopped can be unknown: the window bounds it.
  EXPECT_LE(count["unknown"], options.creates_in_flight);
  EXPECT_EQ(count["lost"], 0u);
  const auto stored = settled(store, "s.");
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto it = stored.find(batch.keys[i]);
    if (!out[i].error) {
      ASSERT_NE(it, stored.end()) << batch.keys[i];
      EXPECT_EQ(it->second.revision, out[i].result.revision) << batch.keys[i];
    } else if (*out[i].error == StoreErrc::unavailable) {
      EXPECT_EQ(it, stored.end()) << batch.keys[i] << " was applied after 'unavailable'";
    } else if (it != stored.end()) {
      EXPECT_EQ(it->second.value, batch.values[i]) << batch.keys[i];
    }
  }
  // The keys not created can be created now.
  std::vector<CreateRequest> retry;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].error && !stored.count(batch.keys[i])) retry.push_back(requests[i]);
  }
  for (const auto& o : store.create_many(retry)) EXPECT_TRUE(o.result.ok && !o.error);
}

TEST(NatsCreateManyFaults, ABatchWhileDisconnectedIsUnavailableAndNothingApplies) {
  NatsServer server;
  auto options = test_options({server.url()}, unique_bucket());
  NatsStore store(options);
  server.kill(SIGKILL);
  ASSERT_TRUE(eventually([&] { return !store.connected(); }, 10s));
  Batch batch = numbered("d.k", 100, "v");
  const auto requests = batch.requests();
  for (const auto& o : store.create_many(requests)) {
    ASSERT_TRUE(o.error.has_value());
    EXPECT_EQ(*o.error, StoreErrc::unavailable);
  }
  server.restart();
  ASSERT_TRUE(eventually([&] { return store.connected(); }, 20s));
  EXPECT_TRUE(settled(store, "d.").empty());
}

}  // namespace
}  // namespace etlc::testing
