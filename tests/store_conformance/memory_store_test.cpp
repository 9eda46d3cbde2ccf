// MemoryStore behaviour beyond the shared contract: the global revision counter, introspection,
// watch overflow, close(), lifetimes, and where notify callbacks run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "etlc/memory_store.hpp"
#include "store_conformance/conformance.hpp"

namespace etlc::testing {
namespace {

using Kind = WatchEvent::Kind;

// CreateRequest views its key and value, so it refuses a temporary std::string (issue 40: a
// batch built as CreateRequest{k, "v" + k} read a dead string); views, literals and named
// strings are accepted.
static_assert(!std::is_constructible_v<CreateRequest, std::string, std::string_view>);
static_assert(!std::is_constructible_v<CreateRequest, std::string_view, std::string>);
static_assert(!std::is_constructible_v<CreateRequest, const std::string&&, const char*>);
static_assert(std::is_constructible_v<CreateRequest, const std::string&, std::string&>);
static_assert(std::is_constructible_v<CreateRequest, std::string_view, const char (&)[2]>);
static_assert(std::is_default_constructible_v<CreateRequest>);

TEST(MemoryStore, CreateManyStoresTheValuesTheRequestsView) {
  MemoryStore store;
  const std::vector<std::string> keys = {"cr.a", "cr.b"};
  const std::string value = "named";
  const std::vector<CreateRequest> batch = {{keys[0], value}, {std::string_view(keys[1]), "lit"}};
  const std::vector<CreateOutcome> out = store.create_many(batch);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].result.ok && !out[0].error);
  EXPECT_TRUE(out[1].result.ok && !out[1].error);
  EXPECT_EQ(store.get("cr.a")->value, "named");
  EXPECT_EQ(store.get("cr.b")->value, "lit");
}

std::vector<WatchEvent> poll_all(Watch& w) {
  std::vector<WatchEvent> out;
  while (w.poll(out, 1000) > 0) {
  }
  return out;
}

StoreErrc poll_error(Watch& w) {
  std::vector<WatchEvent> out;
  try {
    w.poll(out, 1000);
  } catch (const StoreError& e) {
    return e.code();
  }
  ADD_FAILURE() << "poll did not throw; returned " << out.size() << " events";
  return StoreErrc::unavailable;
}

TEST(MemoryStore, OneRevisionCounterAcrossAllKeys) {
  MemoryStore store;
  EXPECT_EQ(store.last_revision(), 0u);
  EXPECT_EQ(store.create("a", "1").revision, 1u);
  EXPECT_EQ(store.create("b", "1").revision, 2u);
  EXPECT_EQ(store.update("a", "2", 1).revision, 3u);
  EXPECT_EQ(store.erase("b", 2).revision, 4u);
  EXPECT_FALSE(store.create("a", "x").ok);  // a losing write takes no revision
  EXPECT_FALSE(store.update("a", "x", 1).ok);
  EXPECT_EQ(store.last_revision(), 4u);
  EXPECT_EQ(store.create("b", "again").revision, 5u);
  EXPECT_EQ(store.size(), 2u);
}

TEST(MemoryStore, ConflictsReportTheCurrentRevision) {
  MemoryStore store;
  const Revision r = store.create("k", "v").revision;
  EXPECT_EQ(store.create("k", "v").revision, r);
  EXPECT_EQ(store.update("k", "v", r + 7).revision, r);
  EXPECT_EQ(store.erase("k", r + 7).revision, r);
  EXPECT_EQ(store.update("absent", "v", 1).revision, 0u);
}

TEST(MemoryStore, SizeCountsLiveKeysOnly) {
  MemoryStore store;
  const Revision a = store.create("a", "1").revision;
  store.create("b", "1");
  EXPECT_EQ(store.size(), 2u);
  store.erase("a", a);
  EXPECT_EQ(store.size(), 1u);
}

TEST(MemoryStore, EmptyPrefixWatchSeesEveryKey) {
  MemoryStore store;
  store.create("x.1", "a");
  auto w = open_watch(store, "");
  store.create("y", "b");
  store.create("z.z.z", "c");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.live().size() == 2; }));
  EXPECT_EQ(w->snapshot().size(), 1u);
}

TEST(MemoryStore, WatcherCountFollowsWatchLifetimes) {
  MemoryStore store;
  EXPECT_EQ(store.watcher_count(), 0u);
  auto a = store.watch("a.", {});
  auto b = store.watch("a.", {});
  auto c = store.watch("b.", {});
  EXPECT_EQ(store.watcher_count(), 3u);
  b.reset();
  EXPECT_EQ(store.watcher_count(), 2u);
  a.reset();
  c.reset();
  EXPECT_EQ(store.watcher_count(), 0u);
}

TEST(MemoryStore, SnapshotIsSortedByKey) {
  MemoryStore store;
  for (const char* k : {"p.c", "p.a", "p.b"}) store.create(k, k);
  auto w = store.watch("p.", {});
  const auto events = poll_all(*w);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].key, "p.a");
  EXPECT_EQ(events[1].key, "p.b");
  EXPECT_EQ(events[2].key, "p.c");
  EXPECT_EQ(events[3].kind, Kind::caught_up);
}

TEST(MemoryStore, OverflowBreaksTheWatchAfterQueuedEvents) {
  MemoryStore store;
  WatchOptions options;
  options.max_pending = 4;
  auto w = store.watch("o.", options);  // caught_up takes one slot
  for (int i = 0; i < 10; ++i) store.create("o.k" + std::to_string(i), "v");
  EXPECT_EQ(store.watcher_count(), 0u) << "an overflowed watch is unregistered";
  std::vector<WatchEvent> out;
  EXPECT_EQ(w->poll(out, 100), 4u) << "the queued events come first";
  EXPECT_EQ(out[0].kind, Kind::caught_up);
  EXPECT_EQ(out[1].key, "o.k0");
  EXPECT_EQ(out[3].key, "o.k2");
  EXPECT_EQ(poll_error(*w), StoreErrc::watch_broken);
  EXPECT_EQ(poll_error(*w), StoreErrc::watch_broken) << "a broken watch stays broken";
}

TEST(MemoryStore, PollingInTimeAvoidsOverflow) {
  MemoryStore store;
  WatchOptions options;
  options.max_pending = 2;
  auto w = store.watch("o.", options);
  std::size_t seen = 0;
  for (int i = 0; i < 50; ++i) {
    store.create("o.k" + std::to_string(i), "v");
    seen += poll_all(*w).size();
  }
  EXPECT_EQ(seen, 51u);  // caught_up + 50 puts
  EXPECT_EQ(store.watcher_count(), 1u);
}

TEST(MemoryStore, SnapshotLargerThanMaxPendingBreaksAtOnce) {
  MemoryStore store;
  for (int i = 0; i < 5; ++i) store.create("s.k" + std::to_string(i), "v");
  WatchOptions options;
  options.max_pending = 3;
  auto w = store.watch("s.", options);
  EXPECT_EQ(store.watcher_count(), 0u);
  std::vector<WatchEvent> out;
  EXPECT_EQ(w->poll(out, 100), 3u);
  EXPECT_EQ(poll_error(*w), StoreErrc::watch_broken);
}

TEST(MemoryStore, MaxPendingOutOfRangeIsInvalid) {
  MemoryStore store;
  for (std::size_t bad : {std::size_t{0}, kMaxWatchPending + 1}) {
    WatchOptions options;
    options.max_pending = bad;
    try {
      store.watch("a.", options);
      ADD_FAILURE() << "max_pending " << bad << " accepted";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.code(), StoreErrc::invalid_argument);
    }
  }
}

TEST(MemoryStore, CloseFailsEveryCallAndBreaksWatches) {
  MemoryStore store;
  const Revision r = store.create("c.k", "v").revision;
  auto w = open_watch(store, "c.");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  store.create("c.k2", "v");  // queued, not yet polled
  const std::uint64_t notified = w->signal->count();
  store.close();
  EXPECT_GT(w->signal->count(), notified) << "close notifies every watch";
  std::vector<WatchEvent> out;
  EXPECT_EQ(w->watch->poll(out, 100), 1u) << "events queued before close are still delivered";
  EXPECT_EQ(poll_error(*w->watch), StoreErrc::watch_broken);

  auto expect_closed = [](auto&& f) {
    try {
      f();
      ADD_FAILURE() << "no exception after close()";
    } catch (const StoreError& e) {
      EXPECT_EQ(e.code(), StoreErrc::closed);
    }
  };
  expect_closed([&] { store.create("c.x", "v"); });
  expect_closed([&] { store.update("c.k", "v", r); });
  expect_closed([&] { store.erase("c.k", r); });
  expect_closed([&] { store.get("c.k"); });
  expect_closed([&] { store.list("c."); });
  expect_closed([&] { store.watch("c.", {}); });
  store.close();  // idempotent
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.last_revision(), r + 1);
  EXPECT_EQ(store.watcher_count(), 0u);
}

TEST(MemoryStore, WatchMayOutliveTheStore) {
  auto store = std::make_shared<MemoryStore>();
  store->create("l.k", "v");
  auto w = open_watch(*store, "l.");
  store.reset();
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.broken; }));
  EXPECT_EQ(w->events.size(), 2u) << "the snapshot queued before destruction is delivered";
  w.reset();  // destroying the handle after the store must be safe
}

TEST(MemoryStore, SameCallsGiveTheSameRevisionsAndEvents) {
  auto run = [] {
    MemoryStore store;
    auto w = store.watch("", {});
    std::vector<Revision> revisions;
    for (int i = 0; i < 20; ++i) {
      const std::string k = "k" + std::to_string(i % 3);
      const auto e = store.get(k);
      const WriteResult r = e ? (i % 4 == 0 ? store.erase(k, e->revision)
                                            : store.update(k, std::to_string(i), e->revision))
                              : store.create(k, std::to_string(i));
      revisions.push_back(r.revision);
    }
    std::vector<std::string> seen;
    for (const WatchEvent& e : poll_all(*w)) {
      seen.push_back(
          fmt::format("{}:{}:{}:{}", static_cast<int>(e.kind), e.key, e.value, e.revision));
    }
    return std::make_pair(revisions, seen);
  };
  EXPECT_EQ(run(), run());
}

// The callback runs with no store lock held: a consumer may take, inside the callback, a lock it
// also holds while calling the store. (If callbacks ran under the store lock, this deadlocks.)
TEST(MemoryStore, NotifyRunsOutsideTheStoreLock) {
  auto store = std::make_shared<MemoryStore>();
  std::mutex consumer_mu;
  std::atomic<int> callbacks{0};
  WatchOptions options;
  options.notify = [&] {
    std::lock_guard<std::mutex> lock(consumer_mu);
    ++callbacks;
  };
  auto w = store->watch("d.", options);
  auto body = std::async(std::launch::async, [&] {
    std::thread writer([&] {
      for (int i = 0; i < 2000; ++i) store->create("d.k" + std::to_string(i), "v");
    });
    for (int i = 0; i < 2000; ++i) {
      std::lock_guard<std::mutex> lock(consumer_mu);  // held while calling the store
      store->get("d.k" + std::to_string(i));
    }
    writer.join();
  });
  if (body.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "NotifyRunsOutsideTheStoreLock: deadlock (callback under store lock)\n");
    std::abort();
  }
  body.get();
  EXPECT_GE(callbacks.load(), 2000);  // the snapshot's plus one per write
  w.reset();
}

// Watches are indexed by prefix: a write reaches the watches on each of its key's prefixes and
// no others, whatever their number.
TEST(MemoryStore, WritesReachOnlyWatchesOnMatchingPrefixes) {
  MemoryStore store;
  std::vector<std::unique_ptr<Watch>> unrelated;
  for (int i = 0; i < 500; ++i) unrelated.push_back(store.watch(fmt::format("u{}.", i), {}));
  auto root = store.watch("", {});
  auto a = store.watch("a.", {});
  auto ab = store.watch("a.b.", {});
  auto abc = store.watch("a.b.c.", {});
  auto other = store.watch("a.c.", {});
  for (auto* w : {root.get(), a.get(), ab.get(), abc.get(), other.get()}) poll_all(*w);
  store.create("a.b.x", "v");
  EXPECT_EQ(poll_all(*root).size(), 1u);
  EXPECT_EQ(poll_all(*a).size(), 1u);
  EXPECT_EQ(poll_all(*ab).size(), 1u);
  EXPECT_EQ(poll_all(*abc).size(), 0u);
  EXPECT_EQ(poll_all(*other).size(), 0u);
  for (auto& w : unrelated) EXPECT_EQ(poll_all(*w).size(), 1u);  // only their caught_up
  EXPECT_EQ(store.watcher_count(), 505u);
}

}  // namespace
}  // namespace etlc::testing
