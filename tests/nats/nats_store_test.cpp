// NatsStore against one real single-node nats-server (shared by the process): bucket creation
// and adoption, incompatible buckets, the delete-marker guard, error mapping, watch breaking.
// The KvStore contract itself is checked by the conformance suite (nats_conformance.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "etlc/nats_store.hpp"
#include "nats/nats_test_env.hpp"
#include "store_conformance/conformance.hpp"

namespace etlc::testing {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

NatsStoreOptions options_for(const std::string& bucket) {
  return test_options({shared_server().url()}, bucket);
}

StoreErrc code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const StoreError& e) {
    return e.code();
  }
  ADD_FAILURE() << "no StoreError thrown";
  return StoreErrc::closed;
}

// One limit (etlc/store.hpp): a foreign client can store a value up to kMaxStoredValueBytes,
// which members read (an unreadable record heals); the stream refuses anything larger.
TEST(NatsStoreLimits, TheStreamRefusesAnyValueLargerThanAMemberReads) {
  const std::string bucket = unique_bucket();
  NatsStore store(options_for(bucket));
  EXPECT_NO_THROW(
      raw_put(shared_server().url(), bucket, "big", std::string(kMaxStoredValueBytes - 64, 'x')));
  auto e = store.get("big");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->value.size(), kMaxStoredValueBytes - 64);
  EXPECT_THROW(
      raw_put(shared_server().url(), bucket, "huge", std::string(kMaxStoredValueBytes + 1, 'x')),
      std::runtime_error);
  EXPECT_FALSE(store.get("huge").has_value());
}

// Opening a bucket again and again (every member start) must leave nothing behind: the open-time
// probe purges its scratch key, and a member's own probe reuses one key per instance id.
TEST(NatsStoreProbe, RestartsLeaveNoProbeMarkersBehind) {
  const std::string bucket = unique_bucket();
  for (int i = 0; i < 4; ++i) {
    NatsStore store(options_for(bucket));
    EXPECT_EQ(verify_fencing(store, "etlc-probe.m1."), "etlc-probe.m1.probe");
  }
  EXPECT_EQ(subject_count({shared_server().url()}, bucket, "_etlc_probe.>"), 0u);
  EXPECT_EQ(subject_count({shared_server().url()}, bucket, "etlc-probe.>"), 1u);
}

std::string incompatibility(NatsStoreOptions o) {
  try {
    NatsStore store(std::move(o));
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::incompatible) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "the store opened";
  return {};
}

TEST(NatsStore, OpenCreatesTheBucketWithTheProtocolSettings) {
  std::string bucket = unique_bucket();
  NatsStore store(options_for(bucket));
  EXPECT_EQ(store.bucket(), bucket);
  EXPECT_TRUE(store.connected());
  auto s = stream_settings({shared_server().url()}, bucket);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->history, 1);
  EXPECT_EQ(s->replicas, 1);
  EXPECT_TRUE(s->file_storage);
  EXPECT_EQ(s->max_age_ns, 0);
  EXPECT_EQ(s->max_msg_size, static_cast<std::int64_t>(kMaxStoredValueBytes));
  // The probe ran and cleaned up after itself: nothing is live.
  EXPECT_TRUE(store.list("").empty());
}

TEST(NatsStore, JobNameMapsToItsBucket) {
  NatsStoreOptions o = options_for("");
  o.bucket.clear();
  o.job = "job with spaces_" + unique_bucket();
  NatsStore store(o);
  EXPECT_EQ(store.bucket(), NatsStoreOptions::bucket_for_job(o.job));
}

TEST(NatsStore, AdoptsAnExistingCompatibleBucket) {
  std::string bucket = unique_bucket();
  NatsStore a(options_for(bucket));
  auto created = a.create("k", "v1");
  ASSERT_TRUE(created.ok);
  NatsStore b(options_for(bucket));
  auto got = b.get("k");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->value, "v1");
  EXPECT_EQ(got->revision, created.revision);
}

TEST(NatsStore, WithCreateBucketOffAMissingBucketIsNotFoundAndStaysMissing) {
  std::string bucket = unique_bucket();
  NatsStoreOptions o = options_for(bucket);
  o.create_bucket = false;
  try {
    NatsStore store(o);
    ADD_FAILURE() << "opened a bucket that does not exist";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::not_found) << e.what();
    EXPECT_FALSE(e.retryable());
    EXPECT_THAT(e.what(), HasSubstr("does not exist"));
  }
  EXPECT_FALSE(stream_settings({shared_server().url()}, bucket).has_value());
  // Once a member created it, the same options adopt it.
  NatsStore member(options_for(bucket));
  ASSERT_TRUE(member.create("k", "v").ok);
  NatsStore viewer(o);
  EXPECT_EQ(viewer.get("k")->value, "v");
}

TEST(NatsStore, RejectsABucketWithHistory) {
  std::string bucket = unique_bucket();
  create_raw_bucket(shared_server().url(), bucket, /*history=*/5);
  EXPECT_THAT(incompatibility(options_for(bucket)),
              HasSubstr("history is 5, options.history is 1"));
}

TEST(NatsStore, RejectsABucketWithATtl) {
  std::string bucket = unique_bucket();
  create_raw_bucket(shared_server().url(), bucket, 1, /*ttl_ns=*/60'000'000'000);
  EXPECT_THAT(incompatibility(options_for(bucket)), HasSubstr("ttl"));
}

TEST(NatsStore, RejectsABucketInMemoryStorage) {
  std::string bucket = unique_bucket();
  create_raw_bucket(shared_server().url(), bucket, 1, 0, /*memory_storage=*/true);
  EXPECT_THAT(incompatibility(options_for(bucket)), HasSubstr("storage is memory"));
}

TEST(NatsStore, RejectsABucketWithOtherReplicas) {
  std::string bucket = unique_bucket();
  { NatsStore created(options_for(bucket)); }
  NatsStoreOptions o = options_for(bucket);
  o.replicas = 3;
  EXPECT_THAT(incompatibility(o), HasSubstr("replicas is 1, options.replicas is 3"));
}

TEST(NatsStore, AForeignStreamOverTheBucketsSubjectsIsIncompatible) {
  std::string bucket = unique_bucket();
  create_raw_stream(shared_server().url(), "other_" + bucket, "$KV." + bucket + ".>");
  std::string why = incompatibility(options_for(bucket));
  EXPECT_THAT(why, HasSubstr("another stream already captures the subjects"));
  EXPECT_FALSE(stream_settings({shared_server().url()}, bucket).has_value());
}

TEST(NatsStore, ServerWithoutJetStreamIsIncompatible) {
  NatsServerConfig config;
  config.jetstream = false;
  NatsServer plain(config);
  NatsStoreOptions o = test_options({plain.url()}, unique_bucket());
  o.connect_timeout_ms = 2000;
  EXPECT_THAT(incompatibility(o), HasSubstr("JetStream"));
}

TEST(NatsStore, UnreachableServerIsUnavailable) {
  NatsStoreOptions o =
      test_options({"nats://127.0.0.1:" + std::to_string(pick_free_port())}, unique_bucket());
  o.connect_timeout_ms = 500;
  try {
    NatsStore store(o);
    FAIL() << "connected to nothing";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::unavailable) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("127.0.0.1"));
  }
}

TEST(NatsStore, ADeleteMarkersRevisionNeverMatchesEvenWithAColdCache) {
  std::string bucket = unique_bucket();
  NatsStore a(options_for(bucket));
  auto r1 = a.create("k", "v1");
  ASSERT_TRUE(r1.ok);
  auto del = a.erase("k", r1.revision);
  ASSERT_TRUE(del.ok);
  ASSERT_GT(del.revision, r1.revision);
  // The server alone would accept the marker's revision as "expected last sequence".
  EXPECT_FALSE(a.update("k", "zombie", del.revision).ok);
  EXPECT_FALSE(a.erase("k", del.revision).ok);
  NatsStore cold(options_for(bucket));
  EXPECT_FALSE(cold.update("k", "zombie", del.revision).ok);
  EXPECT_FALSE(cold.erase("k", del.revision).ok);
  EXPECT_FALSE(a.get("k").has_value());
  EXPECT_FALSE(cold.get("k").has_value());
  auto again = cold.create("k", "v2");
  ASSERT_TRUE(again.ok);
  EXPECT_GT(again.revision, del.revision);
}

TEST(NatsStore, AColdStoreGuardsOnceThenTrustsRevisionsItHandedOut) {
  std::string bucket = unique_bucket();
  NatsStoreOptions o = options_for(bucket);
  o.probe_on_open = false;  // keep the counters to this test's calls
  NatsStore a(o);
  auto r1 = a.create("k", "v1");
  ASSERT_TRUE(r1.ok);
  NatsStore b(o);
  auto before = b.stats().guard_reads;
  auto r2 = b.update("k", "v2", r1.revision);  // b never saw r1: one guard read
  ASSERT_TRUE(r2.ok);
  EXPECT_EQ(b.stats().guard_reads, before + 1);
  auto r3 = b.update("k", "v3", r2.revision);  // b's own result: no read
  ASSERT_TRUE(r3.ok);
  EXPECT_EQ(b.stats().guard_reads, before + 1);
  // a's cached r1 is stale now: the server rejects it (and a learns nothing wrong).
  auto stale = a.update("k", "late", r1.revision);
  EXPECT_FALSE(stale.ok);
  EXPECT_EQ(a.get("k")->value, "v3");
}

TEST(NatsStore, CreateOverADeleteMarkerItKnowsNeedsNoRead) {
  NatsStoreOptions o = options_for(unique_bucket());
  o.probe_on_open = false;
  NatsStore store(o);
  auto r1 = store.create("k", "v1");
  ASSERT_TRUE(r1.ok);
  auto del = store.erase("k", r1.revision);
  ASSERT_TRUE(del.ok);
  auto reads = store.stats().guard_reads;
  auto again = store.create("k", "v2");  // publish (loses to the marker), re-publish over it
  ASSERT_TRUE(again.ok);
  EXPECT_GT(again.revision, del.revision);
  EXPECT_EQ(store.stats().guard_reads, reads);
  // A store that never saw the marker reads it first, then wins the same way.
  NatsStore cold(o);
  ASSERT_TRUE(store.erase("k", again.revision).ok);
  auto cold_reads = cold.stats().guard_reads;
  EXPECT_TRUE(cold.create("k", "v3").ok);
  EXPECT_EQ(cold.stats().guard_reads, cold_reads + 1);
}

TEST(NatsStore, CreateOverADeleteMarkerItSawIsOneMessageAndAStaleHintFallsBack) {
  NatsStoreOptions o = options_for(unique_bucket());
  o.probe_on_open = false;
  NatsStore writer(o);
  NatsStore watcher(o);
  // Latest-only, as the runtime's watches are: the writes below replace each other at once, and
  // a full-history watch that falls behind them breaks (it cannot deliver a replaced value).
  auto watch = open_watch(watcher, "h.", WatchOptions{}.max_pending, /*latest_only=*/true);
  ASSERT_TRUE(poll_until(*watch, [](const TestWatch& t) { return t.caught_up(); }));
  auto erased_seen = [&](Revision rev) {
    return poll_until(*watch, [&](const TestWatch& t) {
      return std::any_of(t.events.begin(), t.events.end(), [&](const WatchEvent& e) {
        return e.kind == WatchEvent::Kind::erase && e.revision == rev;
      });
    });
  };
  auto r1 = writer.create("h.k", "v1");
  ASSERT_TRUE(r1.ok);
  auto del = writer.erase("h.k", r1.revision);
  ASSERT_TRUE(del.ok);
  // The erasing store and a store whose watch saw the marker publish once, read nothing.
  auto sent = writer.stats().publishes;
  auto again = writer.create("h.k", "v2");
  ASSERT_TRUE(again.ok);
  EXPECT_EQ(writer.stats().publishes, sent + 1);
  auto del2 = writer.erase("h.k", again.revision);
  ASSERT_TRUE(del2.ok);
  ASSERT_TRUE(erased_seen(del2.revision)) << watch->broken_message;
  sent = watcher.stats().publishes;
  auto reads = watcher.stats().guard_reads;
  auto by_watcher = watcher.create("h.k", "v3");
  ASSERT_TRUE(by_watcher.ok);
  EXPECT_EQ(watcher.stats().publishes, sent + 1);
  EXPECT_EQ(watcher.stats().guard_reads, reads);
  // Stale hints: the key is live again (a conflict, reporting the live revision), or deleted
  // again at a marker the hint does not name (the create still wins exactly once).
  NatsStore cold(o);
  ASSERT_TRUE(cold.erase("h.k", by_watcher.revision).ok);
  auto live = cold.create("h.k", "v4");
  ASSERT_TRUE(live.ok);
  auto lost = writer.create("h.k", "v5");  // writer's hint names del2
  EXPECT_FALSE(lost.ok);
  EXPECT_EQ(lost.revision, live.revision);
  ASSERT_TRUE(cold.erase("h.k", live.revision).ok);
  auto won = writer.create("h.k", "v6");
  ASSERT_TRUE(won.ok);
  EXPECT_EQ(writer.get("h.k")->value, "v6");
  EXPECT_FALSE(cold.create("h.k", "v7").ok);
}

TEST(NatsStore, ALosingCreateReportsTheLiveRevision) {
  NatsStore store(options_for(unique_bucket()));
  auto r1 = store.create("k", "v1");
  ASSERT_TRUE(r1.ok);
  auto lost = store.create("k", "v2");
  EXPECT_FALSE(lost.ok);
  EXPECT_EQ(lost.revision, r1.revision);
}

TEST(NatsStore, AnOversizedKeyIsRejectedBeforeSendingAndTheConnectionSurvives) {
  NatsStore store(options_for(unique_bucket()));
  std::string huge(5000, 'k');  // the server would drop the whole connection for this subject
  EXPECT_EQ(code_of([&] { store.create(huge, "v"); }), StoreErrc::invalid_argument);
  EXPECT_EQ(code_of([&] { store.get(huge); }), StoreErrc::invalid_argument);
  EXPECT_EQ(code_of([&] { store.create("k", std::string(kMaxValueBytes + 1, 'v')); }),
            StoreErrc::invalid_argument);
  EXPECT_TRUE(store.connected());
  EXPECT_TRUE(store.create("k", "v").ok);
  EXPECT_EQ(store.stats().disconnects, 0u);
}

TEST(NatsStore, APurgeByAnotherClientIsAnErase) {
  std::string bucket = unique_bucket();
  NatsStore store(options_for(bucket));
  auto r1 = store.create("p.k", "v");
  ASSERT_TRUE(r1.ok);
  auto w = open_watch(store, "p.");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  purge_key(shared_server().url(), bucket, "p.k");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return !t.live().empty(); }));
  ASSERT_EQ(w->live().size(), 1u);
  EXPECT_EQ(w->live()[0].kind, WatchEvent::Kind::erase);
  EXPECT_EQ(w->live()[0].key, "p.k");
  EXPECT_GT(w->live()[0].revision, r1.revision);
  EXPECT_FALSE(store.get("p.k").has_value());
  EXPECT_TRUE(store.list("p.").empty());
  EXPECT_TRUE(store.create("p.k", "again").ok);
}

// Four threads hammer two keys while three watches follow them. A history-1 bucket keeps one
// value per key, so a watch that falls behind finds values already dropped: it must then break,
// never continue with a gap. Per key, whatever a watch delivered is exactly the key's history
// from the start (no gap, no reordering); a watch that did not break delivered all of it.
// With more history the same load breaks fewer (here usually no) watches.
// Four threads CAS two keys 40 times each while three watches follow. Without latest_only a
// watch delivers every value or breaks; with it, it never breaks and delivers an increasing
// subsequence of each key's values ending with the last.
void hammer_and_check(int history, bool latest_only = false) {
  NatsStoreOptions o = options_for(unique_bucket());
  o.history = history;
  NatsStore store(o);
  const std::vector<std::string> keys = {"c.k0", "c.k1"};
  std::vector<std::unique_ptr<TestWatch>> watchers;
  for (int i = 0; i < 3; ++i) {
    watchers.push_back(open_watch(store, "c.", WatchOptions{}.max_pending, latest_only));
    ASSERT_TRUE(poll_until(*watchers.back(), [](const TestWatch& t) { return t.caught_up(); }));
  }
  std::mutex mu;
  std::map<std::string, std::vector<Revision>> written;
  for (const auto& k : keys) written[k].push_back(store.create(k, "0").revision);
  std::vector<std::thread> writers;
  std::atomic<int> errors{0};
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&] {
      try {
        for (int round = 0; round < 40; ++round) {
          for (const auto& k : keys) {
            for (int attempt = 0; attempt < 10'000; ++attempt) {
              auto e = store.get(k);
              auto r = store.update(k, std::to_string(std::stoll(e->value) + 1), e->revision);
              if (r.ok) {
                std::lock_guard lock(mu);
                written[k].push_back(r.revision);
                break;
              }
            }
          }
        }
      } catch (const StoreError&) {
        ++errors;
      }
    });
  }
  for (auto& t : writers) t.join();
  ASSERT_EQ(errors, 0);
  for (const auto& k : keys) {
    auto& v = written[k];
    std::sort(v.begin(), v.end());
    auto e = store.get(k);
    ASSERT_TRUE(e.has_value());
    ASSERT_EQ(e->revision, v.back());
    auto d = store.erase(k, e->revision);
    ASSERT_TRUE(d.ok);
    v.push_back(d.revision);
  }
  int broken = 0;
  for (auto& w : watchers) {
    bool complete = poll_until(*w, [&](const TestWatch& t) {
      for (const auto& k : keys) {
        if (!t.saw(k, written[k].back())) return false;
      }
      return true;
    });
    ASSERT_TRUE(complete || w->broken) << "a watch went silent";
    broken += w->broken ? 1 : 0;
    for (const auto& k : keys) {
      std::vector<Revision> got;
      for (const auto& e : w->live()) {
        if (e.key == k) got.push_back(e.revision);
      }
      if (latest_only) {
        EXPECT_FALSE(w->broken) << "a latest_only watch broke";
        ASSERT_FALSE(got.empty()) << k;
        EXPECT_EQ(got.back(), written[k].back()) << k << ": the latest value was not delivered";
        EXPECT_TRUE(std::includes(written[k].begin(), written[k].end(), got.begin(), got.end()))
            << k << ": delivered a revision never written";
        EXPECT_TRUE(std::is_sorted(got.begin(), got.end()) &&
                    std::adjacent_find(got.begin(), got.end()) == got.end())
            << k << ": out of order";
        continue;
      }
      ASSERT_LE(got.size(), written[k].size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), written[k].begin()))
          << k << ": a gap or reordering in what the watch delivered";
      if (!w->broken) {
        EXPECT_EQ(got.size(), written[k].size()) << k;
      }
    }
  }
  ::testing::Test::RecordProperty("history_" + std::to_string(history) + "_watches_broken", broken);
}

TEST(NatsStore, UnderContentionAWatchIsGapFreeUntilItBreaksHistory1) {
  hammer_and_check(1);
}

TEST(NatsStore, UnderContentionALatestOnlyWatchNeverBreaksAndEndsAtTheLatestValue) {
  hammer_and_check(1, /*latest_only=*/true);
}

TEST(NatsStore, UnderContentionAWatchIsGapFreeUntilItBreaksHistory64) {
  hammer_and_check(64);
}

// Keys always live, rewritten by four threads while watches open: every snapshot must name every
// key before caught_up (a leader acting on a partial snapshot revokes splits from live owners).
TEST(NatsStore, ASnapshotTakenUnderWriteLoadHasEveryLiveKey) {
  NatsStoreOptions o = options_for(unique_bucket());
  o.probe_on_open = false;
  constexpr int kKeys = 9;
  constexpr int kWriters = 4;
  auto key = [](int i) { return "s.k" + std::to_string(i); };
  {
    NatsStore seed(o);
    for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(seed.create(key(i), "0").ok);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      try {
        NatsStore ws(o);
        std::map<int, Revision> rev;
        for (int i = t; i < kKeys; i += kWriters) rev[i] = ws.get(key(i))->revision;
        while (!stop) {
          for (auto& [i, r] : rev) {
            auto res = ws.update(key(i), "x", r);
            r = res.ok ? res.revision : ws.get(key(i))->revision;
          }
        }
      } catch (const StoreError&) {
        ++errors;
      }
    });
  }
  NatsStore reader(o);
  int incomplete = 0;
  constexpr int kRounds = 150;
  for (int round = 0; round < kRounds; ++round) {
    auto w = open_watch(reader, "s.");
    ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up() || t.broken; }));
    std::set<std::string> keys;
    for (const auto& e : w->events) {
      if (e.kind == WatchEvent::Kind::caught_up) break;
      keys.insert(e.key);
    }
    if (keys.size() != kKeys) ++incomplete;
  }
  stop = true;
  for (auto& t : writers) t.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(incomplete, 0) << "of " << kRounds << " snapshots";
}

TEST(NatsStore, AWatchThatOverflowsBreaksAfterDeliveringWhatItQueued) {
  NatsStore store(options_for(unique_bucket()));
  auto w = open_watch(store, "o.", /*max_pending=*/3);
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store.create("o.k" + std::to_string(i), "v").ok);
  ASSERT_TRUE(eventually([&] { return store.stats().watches_broken >= 1; }, 10s));
  std::vector<WatchEvent> events;
  EXPECT_EQ(w->watch->poll(events, 100), 3u);
  EXPECT_EQ(code_of([&] { w->watch->poll(events, 100); }), StoreErrc::watch_broken);
  EXPECT_EQ(store.watcher_count(), 0u);
}

TEST(NatsStore, BreakWatchesBreaksEveryWatchAndTheStoreStaysUsable) {
  NatsStore store(options_for(unique_bucket()));
  auto w1 = open_watch(store, "");
  auto w2 = open_watch(store, "a.");
  EXPECT_EQ(store.watcher_count(), 2u);
  store.break_watches("test");
  EXPECT_FALSE(poll_until(
      *w1, [](const TestWatch&) { return false; }, 2s));
  EXPECT_TRUE(w1->broken);
  EXPECT_THAT(w1->broken_message, HasSubstr("test"));
  EXPECT_FALSE(poll_until(
      *w2, [](const TestWatch&) { return false; }, 2s));
  EXPECT_TRUE(w2->broken);
  EXPECT_EQ(store.watcher_count(), 0u);
  auto w3 = open_watch(store, "a.");
  EXPECT_TRUE(poll_until(*w3, [](const TestWatch& t) { return t.caught_up(); }));
  EXPECT_TRUE(store.create("a.x", "v").ok);
}

TEST(NatsStore, CloseFailsLaterCallsAndBreaksWatches) {
  NatsStore store(options_for(unique_bucket()));
  auto w = open_watch(store, "");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  store.close();
  store.close();  // idempotent
  EXPECT_FALSE(store.connected());
  EXPECT_EQ(code_of([&] { store.get("k"); }), StoreErrc::closed);
  EXPECT_EQ(code_of([&] { store.create("k", "v"); }), StoreErrc::closed);
  EXPECT_EQ(code_of([&] { store.list(""); }), StoreErrc::closed);
  EXPECT_EQ(code_of([&] { store.watch("", {}); }), StoreErrc::closed);
  EXPECT_FALSE(poll_until(
      *w, [](const TestWatch&) { return false; }, 2s));
  EXPECT_TRUE(w->broken);
}

TEST(NatsStore, AWatchMayOutliveItsStore) {
  std::unique_ptr<TestWatch> w;
  {
    NatsStore store(options_for(unique_bucket()));
    w = open_watch(store, "");
    ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  }
  EXPECT_FALSE(poll_until(
      *w, [](const TestWatch&) { return false; }, 2s));
  EXPECT_TRUE(w->broken);
  w.reset();  // destroying it after the store must be safe
}

TEST(NatsStore, InvalidMaxPendingIsRejected) {
  NatsStore store(options_for(unique_bucket()));
  WatchOptions o;
  o.max_pending = 0;
  EXPECT_EQ(code_of([&] { store.watch("", o); }), StoreErrc::invalid_argument);
  o.max_pending = kMaxWatchPending + 1;
  EXPECT_EQ(code_of([&] { store.watch("", o); }), StoreErrc::invalid_argument);
}

}  // namespace
}  // namespace etlc::testing
