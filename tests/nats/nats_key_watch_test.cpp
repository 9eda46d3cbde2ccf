// NatsStore key watches (watch_keys) against real nats-server processes: what the backend-
// independent conformance suite cannot see. Hints are core NATS messages, so a rejected publish
// must produce no event, a publish the stream stores after the hint must still be delivered, a
// lost connection must break the watch, a watch that skipped a value must break unless
// latest_only, and the server must hold no JetStream consumer for any of it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

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

std::unique_ptr<TestWatch> open_keys(KvStore& store, const std::vector<std::string>& keys,
                                     bool latest_only = false,
                                     std::size_t max_pending = WatchOptions{}.max_pending) {
  auto w = std::make_unique<TestWatch>();
  WatchOptions options;
  options.latest_only = latest_only;
  options.max_pending = max_pending;
  options.notify = [signal = w->signal] { signal->notify(); };
  w->watch = store.watch_keys(keys, std::move(options));
  return w;
}

// The revisions of `key`'s live events, in delivery order.
std::vector<Revision> revisions_of(const TestWatch& w, const std::string& key) {
  std::vector<Revision> out;
  for (const auto& e : w.live()) {
    if (e.key == key) out.push_back(e.revision);
  }
  return out;
}

// The key's state as the watch's events leave it: nullopt if absent.
std::optional<Entry> view_of(const TestWatch& w, const std::string& key) {
  std::optional<Entry> state;
  for (const auto& e : w.events) {
    if (e.key != key) continue;
    if (e.kind == WatchEvent::Kind::put) state = Entry{e.key, e.value, e.revision};
    if (e.kind == WatchEvent::Kind::erase) state.reset();
  }
  return state;
}

// Revisions never go back per key, over the whole stream of events.
void expect_increasing_per_key(const TestWatch& w) {
  std::map<std::string, Revision> last;
  for (const auto& e : w.events) {
    if (e.kind == WatchEvent::Kind::caught_up) continue;
    EXPECT_GT(e.revision, last[e.key]) << e.key;
    last[e.key] = e.revision;
  }
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

// History 64: a key written again before the watch read it is read back by sequence (with
// history 1 the watch would break instead: ALaggingWatch... below).
TEST(NatsKeyWatch, SnapshotHasTheLiveKeysThenCaughtUpThenEveryChange) {
  NatsStoreOptions o = options_for(unique_bucket());
  o.history = 64;
  NatsStore store(o);
  auto a1 = store.create("a", "a1");
  auto b1 = store.create("b", "b1");
  ASSERT_TRUE(store.erase("b", b1.revision).ok);
  auto w = open_keys(store, {"a", "b", "c"});
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  ASSERT_EQ(w->snapshot().size(), 1u);
  EXPECT_EQ(w->snapshot()[0].key, "a");
  EXPECT_EQ(w->snapshot()[0].value, "a1");
  EXPECT_EQ(w->snapshot()[0].revision, a1.revision);

  auto a2 = store.update("a", "a2", a1.revision);
  auto c1 = store.create("c", "c1");
  auto a3 = store.erase("a", a2.revision);
  auto b2 = store.create("b", "b2");
  store.create("unwatched", "x");
  ASSERT_TRUE(a2.ok && c1.ok && a3.ok && b2.ok);
  ASSERT_TRUE(poll_until(*w, [&](const TestWatch& t) {
    return t.saw("a", a3.revision) && t.saw("b", b2.revision) && t.saw("c", c1.revision);
  })) << w->broken_message;
  EXPECT_EQ(revisions_of(*w, "a"), (std::vector<Revision>{a2.revision, a3.revision}));
  EXPECT_EQ(revisions_of(*w, "b"), std::vector<Revision>{b2.revision});
  EXPECT_EQ(revisions_of(*w, "c"), std::vector<Revision>{c1.revision});
  EXPECT_FALSE(view_of(*w, "a").has_value());
  for (const auto& e : w->events) EXPECT_NE(e.key, "unwatched");
  const NatsStoreStats stats = store.stats();
  EXPECT_EQ(stats.key_watches_opened, 1u);
  EXPECT_GE(stats.key_hints, 4u);
  EXPECT_GE(stats.key_reads, 3u + 4u);
  EXPECT_EQ(stats.key_events, 1u + 4u);
}

// The server forwards every publish to the key's subscribers, stored or not.
TEST(NatsKeyWatch, ARejectedCasOrALostCreateProducesNoEvent) {
  NatsStoreOptions o = options_for(unique_bucket());
  o.history = 8;  // every revision reaches the strict watch, however fast the writes come
  NatsStore watcher(o);
  NatsStore writer(o);
  auto w = open_keys(watcher, {"k"});
  auto r1 = writer.create("k", "v1");
  auto r2 = writer.update("k", "v2", r1.revision);
  ASSERT_TRUE(r1.ok && r2.ok);
  ASSERT_TRUE(poll_until(*w, [&](const TestWatch& t) { return t.saw("k", r2.revision); }));

  const NatsStoreStats before_w = watcher.stats();
  const NatsStoreStats before = writer.stats();
  // r1 is a revision the writer handed out, so both of these are published and refused.
  EXPECT_FALSE(writer.update("k", "lost-cas", r1.revision).ok);
  EXPECT_FALSE(writer.create("k", "lost-create").ok);
  EXPECT_EQ(writer.stats().publishes, before.publishes + 2);
  // Both reached the watch as hints, and both were read.
  ASSERT_TRUE(eventually(
      [&] {
        NatsStoreStats s = watcher.stats();
        return s.key_hints >= before_w.key_hints + 2 && s.key_reads >= before_w.key_reads + 1;
      },
      kWaitTimeout));

  auto r3 = writer.update("k", "v3", r2.revision);
  ASSERT_TRUE(r3.ok);
  ASSERT_TRUE(poll_until(*w, [&](const TestWatch& t) { return t.saw("k", r3.revision); }));
  EXPECT_EQ(revisions_of(*w, "k"), (std::vector<Revision>{r1.revision, r2.revision, r3.revision}));
  for (const auto& e : w->events) EXPECT_THAT(e.value, ::testing::Not(HasSubstr("lost")));
  EXPECT_FALSE(w->broken) << w->broken_message;
}

// A key created, deleted and re-created by another connection while watches open: each watch
// ends in the key's final state, per-key revisions never go back, and a watch that is not
// latest_only either stays gap-free or breaks (never silently wrong).
TEST(NatsKeyWatch, AKeyCreatedDeletedAndRecreatedAroundTheOpenEndsInItsLatestState) {
  const std::string bucket = unique_bucket();
  NatsStore watcher(options_for(bucket));
  NatsStore writer(options_for(bucket));
  int breaks = 0;
  for (int round = 0; round < 20; ++round) {
    const bool latest_only = round % 2 == 0;
    std::thread churn([&] {
      for (int i = 0; i < 12; ++i) {
        auto c = writer.create("k", "v" + std::to_string(i));
        if (c.ok && i % 3 != 2) writer.erase("k", c.revision);
      }
    });
    auto w = open_keys(watcher, {"k", "other"}, latest_only);
    churn.join();
    const std::optional<Entry> final_state = watcher.get("k");
    const bool converged = poll_until(*w, [&](const TestWatch& t) {
      auto v = view_of(t, "k");
      return t.caught_up() && v.has_value() == final_state.has_value() &&
             (!v || v->revision == final_state->revision);
    });
    expect_increasing_per_key(*w);
    if (latest_only) {
      EXPECT_TRUE(converged) << "round " << round << ": " << w->broken_message;
    } else {
      EXPECT_TRUE(converged || w->broken) << "round " << round << " silently stale";
      breaks += w->broken ? 1 : 0;
      if (w->broken) {
        EXPECT_THAT(w->broken_message, HasSubstr("never read"));
      }
    }
    if (final_state) writer.erase("k", final_state->revision);
  }
  RecordProperty("non_latest_only_breaks", breaks);
}

TEST(NatsKeyWatch, ADroppedConnectionBreaksTheWatchAndAReopenedOneWorks) {
  NatsServer server;
  NatsStore store(test_options({server.url()}, unique_bucket()));
  auto r1 = store.create("k", "v1");
  auto w = open_keys(store, {"k"}, true);
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  server.kill(SIGKILL);
  EXPECT_FALSE(poll_until(
      *w, [](const TestWatch&) { return false; }, kWaitTimeout));
  ASSERT_TRUE(w->broken) << "silent after the server died";
  EXPECT_THAT(w->broken_message, HasSubstr("connection"));
  EXPECT_EQ(code_of([&] { open_keys(store, {"k"}); }), StoreErrc::unavailable);

  server.restart();
  ASSERT_TRUE(eventually([&] { return store.connected(); }, kWaitTimeout));
  auto w2 = open_keys(store, {"k"}, true);
  ASSERT_TRUE(poll_until(*w2, [](const TestWatch& t) { return t.caught_up(); }))
      << w2->broken_message;
  auto r2 = store.update("k", "v2", r1.revision);
  ASSERT_TRUE(r2.ok);
  EXPECT_TRUE(poll_until(*w2, [&](const TestWatch& t) { return t.saw("k", r2.revision); }))
      << w2->broken_message;
  EXPECT_GE(store.stats().key_watches_broken, 1u);
}

// SIGSTOP keeps the TCP connection up: a write sent meanwhile is stored once the server runs
// again, and the watch must then deliver it or break, never stay silent.
TEST(NatsKeyWatch, AWriteWhileTheServerIsStoppedEndsInAnEventOrABreak) {
  NatsServer server;
  NatsStoreOptions o = test_options({server.url()}, unique_bucket());
  o.op_timeout_ms = 300;
  NatsStore watcher(o);
  NatsStore writer(o);
  auto r1 = writer.create("k", "v1");
  ASSERT_TRUE(r1.ok);
  auto w = open_keys(watcher, {"k"});
  ASSERT_TRUE(poll_until(*w, [&](const TestWatch& t) { return t.caught_up(); }));

  server.kill(SIGSTOP);
  EXPECT_EQ(code_of([&] { writer.update("k", "v2", r1.revision); }), StoreErrc::unknown_outcome);
  server.kill(SIGCONT);
  ASSERT_TRUE(eventually(
      [&] {
        try {
          auto e = writer.get("k");
          return e && e->value == "v2";
        } catch (const StoreError&) {
          return false;
        }
      },
      kWaitTimeout));
  const bool delivered = poll_until(*w, [](const TestWatch& t) {
    for (const auto& e : t.live()) {
      if (e.value == "v2") return true;
    }
    return false;
  });
  EXPECT_TRUE(delivered || w->broken) << "silent: the stored write was never delivered";
}

// Opening and closing many watches at once: no notify after a destructor returned, nothing
// left registered, every watch caught up with a snapshot of its own keys.
TEST(NatsKeyWatch, TwoHundredWatchesOpenedAndClosedFromFourThreadsWithWritesBetween) {
  NatsStore store(options_for(unique_bucket()));
  std::vector<std::string> keys;
  for (int i = 0; i < 16; ++i) keys.push_back("ks" + std::to_string(i));
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::map<std::string, Revision> rev;
    for (int i = 0; !stop.load(); ++i) {
      const std::string& k = keys[static_cast<std::size_t>(i) % keys.size()];
      auto r = rev[k] == 0 ? store.create(k, "v") : store.update(k, "v", rev[k]);
      if (r.ok) rev[k] = r.revision;
    }
  });
  std::atomic<int> late_notifies{0};
  std::atomic<int> failures{0};
  auto worker = [&](unsigned seed) {
    std::mt19937 rng(seed);
    for (int batch = 0; batch < 10; ++batch) {
      std::vector<std::unique_ptr<TestWatch>> open;
      std::vector<std::shared_ptr<std::atomic<bool>>> alive;
      for (int i = 0; i < 5; ++i) {
        std::vector<std::string> mine;
        for (std::size_t k = rng() % keys.size(); mine.size() < 4; k = (k + 3) % keys.size()) {
          mine.push_back(keys[k]);
        }
        auto w = std::make_unique<TestWatch>();
        auto flag = std::make_shared<std::atomic<bool>>(true);
        WatchOptions opts;
        opts.latest_only = true;
        opts.notify = [signal = w->signal, flag, &late_notifies] {
          if (!flag->load()) late_notifies.fetch_add(1);
          signal->notify();
        };
        w->watch = store.watch_keys(mine, std::move(opts));
        open.push_back(std::move(w));
        alive.push_back(flag);
      }
      for (auto& w : open) {
        if (!poll_until(*w, [](const TestWatch& t) { return t.caught_up(); })) failures++;
      }
      for (std::size_t i = 0; i < open.size(); ++i) {
        open[i]->watch.reset();
        alive[i]->store(false);
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) threads.emplace_back(worker, 17 + t);
  for (auto& t : threads) t.join();
  stop = true;
  writer.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(late_notifies.load(), 0);
  EXPECT_EQ(store.watcher_count(), 0u);
  EXPECT_EQ(store.stats().key_watches_opened, 200u);
  EXPECT_EQ(store.stats().key_watches_broken, 0u);
}

// A one-shot latch the stalling watch's notify waits on, so the store's reader thread is held
// (notify runs there) while a key is overwritten: a watch then finds a newer value whose
// previous revision it never read.
struct Stall {
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false;
  bool entered = false;
  bool released = false;
  void notify() {
    std::unique_lock lock(mu);
    if (!armed || released) return;
    entered = true;
    cv.notify_all();
    cv.wait_for(lock, kWaitTimeout, [&] { return released; });
  }
  void release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
};

// Holds the store's reader thread while `k` is written three times (r2, r3, r4) after the
// watches' snapshot (r1), then lets it go.
struct Lagged {
  std::unique_ptr<TestWatch> strict, latest;
  Revision r1 = 0, r2 = 0, r3 = 0, r4 = 0;
};

void lag_behind(NatsStore& store, Lagged& out) {
  out.r1 = store.create("k", "v1").revision;
  out.strict = open_keys(store, {"k"});
  out.latest = open_keys(store, {"k"}, true);
  ASSERT_TRUE(poll_until(*out.strict, [](const TestWatch& t) { return t.caught_up(); }));
  ASSERT_TRUE(poll_until(*out.latest, [](const TestWatch& t) { return t.caught_up(); }));

  auto stall = std::make_shared<Stall>();
  WatchOptions so;
  so.notify = [stall] { stall->notify(); };
  auto staller = store.watch_keys(std::vector<std::string>{"stall"}, so);
  {
    std::lock_guard lock(stall->mu);
    stall->armed = true;
  }
  ASSERT_TRUE(store.create("stall", "x").ok);
  {
    std::unique_lock lock(stall->mu);
    ASSERT_TRUE(stall->cv.wait_for(lock, kWaitTimeout, [&] { return stall->entered; }));
  }
  const std::uint64_t hints = store.stats().key_hints;
  out.r2 = store.update("k", "v2", out.r1).revision;
  out.r3 = store.update("k", "v3", out.r2).revision;
  out.r4 = store.update("k", "v4", out.r3).revision;
  ASSERT_TRUE(out.r2 != 0 && out.r3 != 0 && out.r4 != 0);
  ASSERT_TRUE(eventually([&] { return store.stats().key_hints >= hints + 6; }, kWaitTimeout));
  stall->release();
}

TEST(NatsKeyWatch, ALaggingWatchBreaksOnAGapButALatestOnlyOneGoesOnToTheLatest) {
  NatsStore store(options_for(unique_bucket()));  // history 1: r2 and r3 are gone
  Lagged l;
  ASSERT_NO_FATAL_FAILURE(lag_behind(store, l));
  EXPECT_FALSE(poll_until(
      *l.strict, [](const TestWatch&) { return false; }, kWaitTimeout));
  EXPECT_TRUE(l.strict->broken);
  EXPECT_THAT(l.strict->broken_message, HasSubstr("never read"));
  ASSERT_TRUE(poll_until(*l.latest, [&](const TestWatch& t) { return t.saw("k", l.r4); }))
      << l.latest->broken_message;
  EXPECT_EQ(revisions_of(*l.latest, "k"), std::vector<Revision>{l.r4});
  EXPECT_FALSE(l.latest->broken);
}

TEST(NatsKeyWatch, ALaggingWatchOnABucketWithHistoryReadsTheSkippedValuesBack) {
  NatsStoreOptions o = options_for(unique_bucket());
  o.history = 8;
  NatsStore store(o);
  Lagged l;
  ASSERT_NO_FATAL_FAILURE(lag_behind(store, l));
  ASSERT_TRUE(poll_until(*l.strict, [&](const TestWatch& t) { return t.saw("k", l.r4); }))
      << l.strict->broken_message;
  EXPECT_EQ(revisions_of(*l.strict, "k"), (std::vector<Revision>{l.r2, l.r3, l.r4}));
  ASSERT_TRUE(poll_until(*l.latest, [&](const TestWatch& t) { return t.saw("k", l.r4); }));
  EXPECT_EQ(revisions_of(*l.latest, "k"), std::vector<Revision>{l.r4});
}

// The server-side cost: key watches hold core subscriptions only (no JetStream consumer), and
// writes to other keys reach none of them.
TEST(NatsKeyWatch, KeyWatchesCreateNoConsumerAndOtherKeysWritesReachNone) {
  const std::string bucket = unique_bucket();
  NatsStore store(options_for(bucket));
  const std::vector<std::string> servers{shared_server().url()};
  ASSERT_EQ(consumer_count(servers, bucket), 0u);
  std::vector<std::unique_ptr<TestWatch>> watches;
  for (int w = 0; w < 20; ++w) {
    std::vector<std::string> keys;
    for (int k = 0; k < 5; ++k) keys.push_back(fmt::format("m{}.k{}", w, k));
    watches.push_back(open_keys(store, keys, true));
  }
  for (auto& w : watches) {
    ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  }
  EXPECT_EQ(consumer_count(servers, bucket), 0u);
  {  // the measurement sees consumers: a prefix watch holds one
    auto prefix = open_watch(store, "m0.");
    EXPECT_EQ(consumer_count(servers, bucket), 1u);
  }

  const std::uint64_t hints = store.stats().key_hints;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(store.create(fmt::format("other.k{}", i), "x").ok);
  auto sentinel = store.create("m7.k3", "s");
  ASSERT_TRUE(sentinel.ok);
  ASSERT_TRUE(poll_until(*watches[7],
                         [&](const TestWatch& t) { return t.saw("m7.k3", sentinel.revision); }));
  EXPECT_EQ(store.stats().key_hints, hints + 1);
}

TEST(NatsKeyWatch, BreakWatchesCloseAndOverflowBreakKeyWatches) {
  auto store = NatsStore::open(options_for(unique_bucket()));
  ASSERT_TRUE(store->create("a", "1").ok);
  ASSERT_TRUE(store->create("b", "2").ok);
  ASSERT_TRUE(store->create("c", "3").ok);

  auto small = open_keys(*store, {"a", "b", "c"}, false, 3);  // 3 puts + caught_up do not fit
  EXPECT_FALSE(poll_until(
      *small, [](const TestWatch&) { return false; }, 2s));
  EXPECT_TRUE(small->broken);
  EXPECT_THAT(small->broken_message, HasSubstr("max_pending"));

  auto w = open_keys(*store, {"a"});
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  store->break_watches("test");
  EXPECT_FALSE(poll_until(
      *w, [](const TestWatch&) { return false; }, 2s));
  EXPECT_TRUE(w->broken);
  auto again = open_keys(*store, {"a"});
  ASSERT_TRUE(poll_until(*again, [](const TestWatch& t) { return t.caught_up(); }));
  EXPECT_EQ(store->watcher_count(), 1u);

  store.reset();  // the watch outlives its store, broken
  EXPECT_FALSE(poll_until(
      *again, [](const TestWatch&) { return false; }, 2s));
  EXPECT_TRUE(again->broken);
  again.reset();
}

TEST(NatsKeyWatch, BadKeySetsAndOptionsAreInvalidArguments) {
  NatsStore store(options_for(unique_bucket()));
  auto watch_of = [&](std::vector<std::string> keys, std::size_t max_pending = 16) {
    WatchOptions o;
    o.max_pending = max_pending;
    return code_of([&] { store.watch_keys(keys, o); });
  };
  EXPECT_EQ(watch_of({}), StoreErrc::invalid_argument);
  EXPECT_EQ(watch_of({"a", "a"}), StoreErrc::invalid_argument);
  EXPECT_EQ(watch_of({"a.>"}), StoreErrc::invalid_argument);
  EXPECT_EQ(watch_of({"a"}, 0), StoreErrc::invalid_argument);
  std::vector<std::string> many;
  for (std::size_t i = 0; i <= kMaxWatchKeys; ++i) many.push_back("k" + std::to_string(i));
  EXPECT_EQ(watch_of(many), StoreErrc::invalid_argument);
  many.pop_back();
  EXPECT_NO_THROW(store.watch_keys(many, WatchOptions{}));
  store.close();
  EXPECT_EQ(watch_of({"a"}), StoreErrc::closed);
}

}  // namespace
}  // namespace etlc::testing
