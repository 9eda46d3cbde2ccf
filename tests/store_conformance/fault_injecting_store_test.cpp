// FaultInjectingStore: each fault, the op log and counters, watch holding/release/break, thread
// safety and determinism. (Transparency without faults is proven by the conformance suite.)
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "etlc/errors.hpp"
#include "etlc/fault_injecting_store.hpp"
#include "etlc/kv_store_wrapper.hpp"
#include "etlc/memory_store.hpp"
#include "store_conformance/conformance.hpp"

namespace etlc::testing {
namespace {

using Kind = WatchEvent::Kind;

struct Fixture : ::testing::Test {
  std::shared_ptr<MemoryStore> memory = std::make_shared<MemoryStore>();
  FaultInjectingStore store{memory};
};

template <typename F>
StoreErrc error_of(F&& f) {
  try {
    f();
  } catch (const StoreError& e) {
    return e.code();
  }
  ADD_FAILURE() << "no StoreError thrown";
  return StoreErrc::closed;
}

std::vector<WatchEvent> poll_all(Watch& w) {
  std::vector<WatchEvent> out;
  while (w.poll(out, 1000) > 0) {
  }
  return out;
}

std::vector<std::string> keys_of(const std::vector<WatchEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.kind == Kind::caught_up ? "^" : e.key);
  return out;
}

using FaultInjectingStoreTest = Fixture;

TEST(FaultInjectingStoreCtor, RejectsNullInner) {
  EXPECT_THROW(FaultInjectingStore(nullptr), UsageError);
}

TEST(KvStoreWrapperCtor, RejectsNullInner) {
  EXPECT_THROW(KvStoreWrapper(nullptr), UsageError);
}

TEST_F(FaultInjectingStoreTest, FailNextFailsEveryKindWithoutReachingTheInnerStore) {
  const Revision r = store.create("k", "v").revision;
  store.fail_next(6);
  EXPECT_EQ(store.failures_pending(), 6u);
  EXPECT_EQ(error_of([&] { store.create("new", "v"); }), StoreErrc::unavailable);
  EXPECT_EQ(error_of([&] { store.update("k", "v2", r); }), StoreErrc::unavailable);
  EXPECT_EQ(error_of([&] { store.erase("k", r); }), StoreErrc::unavailable);
  EXPECT_EQ(error_of([&] { store.get("k"); }), StoreErrc::unavailable);
  EXPECT_EQ(error_of([&] { store.list(""); }), StoreErrc::unavailable);
  EXPECT_EQ(error_of([&] { store.watch("", {}); }), StoreErrc::unavailable);
  EXPECT_EQ(store.failures_pending(), 0u);
  EXPECT_EQ(memory->last_revision(), r) << "nothing reached the inner store";
  EXPECT_FALSE(memory->get("new").has_value());
  EXPECT_EQ(memory->watcher_count(), 0u);
  // The seventh call goes through.
  EXPECT_TRUE(store.update("k", "v2", r).ok);
}

TEST_F(FaultInjectingStoreTest, FailNextUsesTheGivenCode) {
  store.fail_next(1, StoreErrc::closed);
  EXPECT_EQ(error_of([&] { store.get("k"); }), StoreErrc::closed);
  EXPECT_FALSE(store.get("k").has_value());
}

TEST_F(FaultInjectingStoreTest, InvalidArgumentsConsumeNoFault) {
  store.fail_next(1);
  EXPECT_EQ(error_of([&] { store.create("bad..key", "v"); }), StoreErrc::invalid_argument);
  EXPECT_EQ(error_of([&] { store.list("no-dot"); }), StoreErrc::invalid_argument);
  EXPECT_EQ(store.failures_pending(), 1u);
  EXPECT_EQ(error_of([&] { store.get("k"); }), StoreErrc::unavailable);
}

TEST_F(FaultInjectingStoreTest, UnknownOutcomeNotAppliedLeavesTheStoreUnchanged) {
  store.unknown_outcome_next(1, /*apply=*/false);
  EXPECT_FALSE(store.get("k").has_value()) << "reads do not consume unknown outcomes";
  EXPECT_EQ(store.unknown_outcomes_pending(), 1u);
  EXPECT_EQ(error_of([&] { store.create("k", "v"); }), StoreErrc::unknown_outcome);
  EXPECT_FALSE(memory->get("k").has_value());
  EXPECT_EQ(memory->last_revision(), 0u);
  EXPECT_TRUE(store.create("k", "v").ok);
}

TEST_F(FaultInjectingStoreTest, UnknownOutcomeAppliedLandsEveryWriteKind) {
  store.unknown_outcome_next(3, /*apply=*/true);
  EXPECT_EQ(error_of([&] { store.create("k", "v1"); }), StoreErrc::unknown_outcome);
  const auto created = memory->get("k");
  ASSERT_TRUE(created.has_value()) << "an applied unknown outcome landed";
  EXPECT_EQ(error_of([&] { store.update("k", "v2", created->revision); }),
            StoreErrc::unknown_outcome);
  const auto updated = memory->get("k");
  ASSERT_TRUE(updated.has_value());
  EXPECT_EQ(updated->value, "v2");
  EXPECT_EQ(error_of([&] { store.erase("k", updated->revision); }), StoreErrc::unknown_outcome);
  EXPECT_FALSE(memory->get("k").has_value());

  const auto log = store.op_log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].revision, created->revision);
  EXPECT_EQ(log[1].revision, updated->revision);
  for (const OpRecord& rec : log) {
    EXPECT_EQ(rec.outcome, OpOutcome::error);
    EXPECT_EQ(rec.error, StoreErrc::unknown_outcome);
    EXPECT_TRUE(rec.injected);
    EXPECT_TRUE(rec.landed);
  }
}

TEST_F(FaultInjectingStoreTest, AppliedUnknownOutcomeOfALosingWriteDidNotLand) {
  const Revision r = store.create("k", "v").revision;
  store.unknown_outcome_next(1, /*apply=*/true);
  EXPECT_EQ(error_of([&] { store.update("k", "x", r + 100); }), StoreErrc::unknown_outcome);
  EXPECT_EQ(memory->get("k")->value, "v");
  const OpRecord last = store.op_log().back();
  EXPECT_FALSE(last.landed);
  EXPECT_TRUE(last.injected);
}

TEST_F(FaultInjectingStoreTest, FailNextIsConsumedBeforeUnknownOutcome) {
  store.fail_next(1);
  store.unknown_outcome_next(1, true);
  EXPECT_EQ(error_of([&] { store.create("k", "v"); }), StoreErrc::unavailable);
  EXPECT_EQ(error_of([&] { store.create("k", "v"); }), StoreErrc::unknown_outcome);
  EXPECT_TRUE(memory->get("k").has_value());
  store.fail_next(3);
  store.unknown_outcome_next(3, true);
  store.clear_faults();
  EXPECT_EQ(store.failures_pending(), 0u);
  EXPECT_EQ(store.unknown_outcomes_pending(), 0u);
  EXPECT_TRUE(store.get("k").has_value());
}

TEST_F(FaultInjectingStoreTest, OpLogRecordsEveryOperation) {
  const WriteResult c = store.create("a.k", "v");
  store.create("a.k", "again");    // conflict
  store.get("a.missing");          // absent
  store.get("a.k");                // ok
  store.list("a.");                // ok
  auto w = store.watch("a.", {});  // ok
  store.fail_next(1);
  EXPECT_THROW(store.erase("a.k", c.revision), StoreError);  // injected
  EXPECT_THROW(store.get(""), StoreError);                   // invalid, not injected
  const auto log = store.op_log();
  ASSERT_EQ(log.size(), 8u);
  for (std::size_t i = 0; i < log.size(); ++i) EXPECT_EQ(log[i].seq, i + 1);
  EXPECT_EQ(log[0].kind, OpKind::create);
  EXPECT_EQ(log[0].outcome, OpOutcome::ok);
  EXPECT_EQ(log[0].revision, c.revision);
  EXPECT_TRUE(log[0].landed);
  EXPECT_EQ(log[1].outcome, OpOutcome::conflict);
  EXPECT_FALSE(log[1].landed);
  EXPECT_EQ(log[2].outcome, OpOutcome::absent);
  EXPECT_EQ(log[3].outcome, OpOutcome::ok);
  EXPECT_EQ(log[3].revision, c.revision);
  EXPECT_EQ(log[4].kind, OpKind::list);
  EXPECT_EQ(log[4].key, "a.");
  EXPECT_EQ(log[5].kind, OpKind::watch);
  EXPECT_EQ(log[6].kind, OpKind::erase);
  EXPECT_EQ(log[6].outcome, OpOutcome::error);
  EXPECT_EQ(log[6].error, StoreErrc::unavailable);
  EXPECT_TRUE(log[6].injected);
  EXPECT_EQ(log[7].error, StoreErrc::invalid_argument);
  EXPECT_FALSE(log[7].injected);

  EXPECT_EQ(store.op_count(OpKind::create), 2u);
  EXPECT_EQ(store.op_count(OpKind::get), 3u);
  EXPECT_EQ(store.op_count(OpKind::erase), 1u);
  EXPECT_EQ(store.op_count(OpKind::update), 0u);
  store.clear_op_log();
  EXPECT_TRUE(store.op_log().empty());
  EXPECT_EQ(store.op_count(OpKind::create), 2u) << "counters survive clear_op_log";
}

TEST(FaultInjectingStoreLog, IsARingBufferOfTheConfiguredCapacity) {
  FaultInjectingStore store(std::make_shared<MemoryStore>(), 3);
  for (int i = 0; i < 5; ++i) store.get("k" + std::to_string(i));
  const auto log = store.op_log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].seq, 3u);
  EXPECT_EQ(log[0].key, "k2");
  EXPECT_EQ(log[2].key, "k4");

  FaultInjectingStore silent(std::make_shared<MemoryStore>(), 0);
  silent.get("k");
  EXPECT_TRUE(silent.op_log().empty());
  EXPECT_EQ(silent.op_count(OpKind::get), 1u);
}

TEST_F(FaultInjectingStoreTest, HeldEventsAreInvisibleUntilReleasedInOrder) {
  store.create("h.a", "1");
  auto w = open_watch(store, "h.");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  store.hold_watch_events(true);
  EXPECT_TRUE(store.holding_watch_events());
  store.create("h.b", "1");
  store.create("h.c", "1");
  store.create("h.d", "1");
  drain(*w);
  EXPECT_EQ(w->live().size(), 0u) << "held events must not be visible";

  const std::uint64_t before = w->signal->count();
  EXPECT_EQ(store.release_held(1), 1u);
  EXPECT_GT(w->signal->count(), before) << "a release notifies the watch";
  drain(*w);
  EXPECT_EQ(keys_of(w->live()), (std::vector<std::string>{"h.b"}));
  EXPECT_EQ(store.release_held(), 2u);
  drain(*w);
  EXPECT_EQ(keys_of(w->live()), (std::vector<std::string>{"h.b", "h.c", "h.d"}));

  store.create("h.e", "1");
  store.hold_watch_events(false);
  EXPECT_EQ(store.release_held(), 0u) << "release is a no-op when not holding";
  drain(*w);
  EXPECT_EQ(keys_of(w->live()), (std::vector<std::string>{"h.b", "h.c", "h.d", "h.e"}));
  store.create("h.f", "1");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.live().size() == 5; }));
}

TEST_F(FaultInjectingStoreTest, UnholdingMakesReleasedThenWaitingEventsVisibleInOrder) {
  auto w = store.watch("u.", {});
  store.hold_watch_events(true);
  store.create("u.1", "v");
  store.create("u.2", "v");
  store.create("u.3", "v");
  std::vector<WatchEvent> first;
  // Nothing visible yet, not even the caught_up that was queued before holding started (held
  // events are whatever poll has not read).
  EXPECT_EQ(w->poll(first, 100), 0u);
  store.release_held(2);  // caught_up and u.1
  store.hold_watch_events(false);
  EXPECT_EQ(keys_of(poll_all(*w)), (std::vector<std::string>{"^", "u.1", "u.2", "u.3"}));
}

TEST_F(FaultInjectingStoreTest, WatchCreatedWhileHoldingHidesItsSnapshot) {
  store.create("s.a", "v");
  store.hold_watch_events(true);
  auto w = store.watch("s.", {});
  EXPECT_TRUE(poll_all(*w).empty());
  EXPECT_EQ(store.release_held(), 2u);
  EXPECT_EQ(keys_of(poll_all(*w)), (std::vector<std::string>{"s.a", "^"}));
}

TEST_F(FaultInjectingStoreTest, ReleaseIsPerWatchInCreationOrder) {
  auto a = store.watch("p.", {});
  auto b = store.watch("p.", {});
  poll_all(*a);
  poll_all(*b);
  store.hold_watch_events(true);
  for (int i = 0; i < 3; ++i) store.create("p.k" + std::to_string(i), "v");
  EXPECT_EQ(store.release_held(2), 4u);  // two per watch
  EXPECT_EQ(poll_all(*a).size(), 2u);
  EXPECT_EQ(poll_all(*b).size(), 2u);
}

TEST_F(FaultInjectingStoreTest, AWatchHeldTooLongOverflowsAndBreaks) {
  WatchOptions options;
  options.max_pending = 4;
  auto w = store.watch("o.", options);
  store.hold_watch_events(true);
  for (int i = 0; i < 10; ++i) store.create("o.k" + std::to_string(i), "v");
  EXPECT_EQ(store.release_held(), 4u);
  std::vector<WatchEvent> out;
  EXPECT_EQ(w->poll(out, 100), 4u);
  EXPECT_EQ(w->poll(out, 100), 0u) << "the break is held back like an event";
  EXPECT_EQ(store.release_held(), 0u);
  EXPECT_EQ(error_of([&] { w->poll(out, 100); }), StoreErrc::watch_broken);
  EXPECT_EQ(error_of([&] { w->poll(out, 100); }), StoreErrc::watch_broken);
  EXPECT_EQ(store.watch_count(), 0u);
}

TEST_F(FaultInjectingStoreTest, BreakWatchesBreaksEveryLiveWatchAtOnce) {
  auto a = open_watch(store, "b.");
  auto b = open_watch(store, "");
  ASSERT_TRUE(poll_until(*a, [](const TestWatch& t) { return t.caught_up(); }));
  store.create("b.k", "v");  // pending, never polled: discarded by the break
  EXPECT_EQ(store.watch_count(), 2u);
  const std::uint64_t before = a->signal->count();
  store.break_watches();
  EXPECT_GT(a->signal->count(), before) << "a broken watch is notified";
  EXPECT_EQ(store.watch_count(), 0u);
  EXPECT_EQ(memory->watcher_count(), 0u) << "the inner watches are released";
  std::vector<WatchEvent> out;
  EXPECT_EQ(error_of([&] { a->watch->poll(out, 100); }), StoreErrc::watch_broken);
  EXPECT_EQ(error_of([&] { a->watch->poll(out, 100); }), StoreErrc::watch_broken);
  EXPECT_EQ(error_of([&] { b->watch->poll(out, 100); }), StoreErrc::watch_broken);
  EXPECT_TRUE(out.empty());

  // Re-watching works and yields a fresh snapshot.
  auto again = store.watch("b.", {});
  EXPECT_EQ(keys_of(poll_all(*again)), (std::vector<std::string>{"b.k", "^"}));
  EXPECT_EQ(store.watch_count(), 1u);
}

TEST_F(FaultInjectingStoreTest, WatchMayOutliveTheDecorator) {
  auto decorated = std::make_shared<FaultInjectingStore>(memory);
  auto w = decorated->watch("x.", {});
  decorated.reset();
  memory->create("x.k", "v");
  EXPECT_EQ(keys_of(poll_all(*w)), (std::vector<std::string>{"^", "x.k"}));
}

// --- key watches ------------------------------------------------------------------------------

TEST_F(FaultInjectingStoreTest, KeyWatchEventsAreHeldReleasedAndUnheldInOrder) {
  store.create("h.a", "1");
  auto w = open_key_watch(store, {"h.c", "h.a"});
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  EXPECT_EQ(keys_of(w->snapshot()), (std::vector<std::string>{"h.a"}));
  store.hold_watch_events(true);
  const Revision a2 = store.update("h.a", "2", store.get("h.a")->revision).revision;
  store.create("h.b", "not watched");
  store.create("h.c", "1");
  drain(*w);
  EXPECT_EQ(w->live().size(), 0u) << "held events must not be visible";
  const std::uint64_t before = w->signal->count();
  EXPECT_EQ(store.release_held(1), 1u);
  EXPECT_GT(w->signal->count(), before) << "a release notifies the watch";
  drain(*w);
  ASSERT_EQ(keys_of(w->live()), (std::vector<std::string>{"h.a"}));
  EXPECT_EQ(w->live()[0].revision, a2);
  store.create("h.d", "not watched");
  store.erase("h.a", a2);
  store.hold_watch_events(false);
  drain(*w);
  EXPECT_EQ(keys_of(w->live()), (std::vector<std::string>{"h.a", "h.c", "h.a"}));
  EXPECT_EQ(w->live().back().kind, Kind::erase);
}

TEST_F(FaultInjectingStoreTest, KeyWatchCreatedWhileHoldingHidesItsSnapshot) {
  store.create("s.a", "v");
  store.hold_watch_events(true);
  const std::vector<std::string> keys = {"s.a", "s.b"};
  auto w = store.watch_keys(keys, {});
  EXPECT_TRUE(poll_all(*w).empty());
  EXPECT_EQ(store.release_held(), 2u);
  EXPECT_EQ(keys_of(poll_all(*w)), (std::vector<std::string>{"s.a", "^"}));
}

TEST_F(FaultInjectingStoreTest, AKeyWatchHeldTooLongOverflowsAndBreaks) {
  WatchOptions options;
  options.max_pending = 3;
  const std::vector<std::string> keys = {"o.k"};
  auto w = store.watch_keys(keys, options);  // caught_up takes one slot
  store.hold_watch_events(true);
  Revision r = store.create("o.k", "0").revision;
  for (int i = 1; i < 6; ++i) r = store.update("o.k", std::to_string(i), r).revision;
  EXPECT_EQ(store.release_held(), 3u);
  std::vector<WatchEvent> out;
  EXPECT_EQ(w->poll(out, 100), 3u);
  EXPECT_EQ(keys_of(out), (std::vector<std::string>{"^", "o.k", "o.k"}));
  EXPECT_EQ(w->poll(out, 100), 0u) << "the break is held back like an event";
  EXPECT_EQ(store.release_held(), 0u);  // releases the break
  EXPECT_EQ(error_of([&] { w->poll(out, 100); }), StoreErrc::watch_broken);
  EXPECT_EQ(store.watch_count(), 0u);
}

TEST_F(FaultInjectingStoreTest, BreakWatchesBreaksKeyWatchesWithPrefixWatches) {
  auto prefix = open_watch(store, "b.");
  auto keys = open_key_watch(store, {"b.k", "c.k"});
  ASSERT_TRUE(poll_until(*keys, [](const TestWatch& t) { return t.caught_up(); }));
  store.create("c.k", "v");  // pending, never polled: discarded by the break
  EXPECT_EQ(store.watch_count(), 2u);
  const std::uint64_t before = keys->signal->count();
  store.break_watches();
  EXPECT_GT(keys->signal->count(), before) << "a broken key watch is notified";
  EXPECT_EQ(store.watch_count(), 0u);
  EXPECT_EQ(memory->watcher_count(), 0u) << "the inner key watch is released";
  std::vector<WatchEvent> out;
  EXPECT_EQ(error_of([&] { keys->watch->poll(out, 100); }), StoreErrc::watch_broken);
  EXPECT_EQ(error_of([&] { keys->watch->poll(out, 100); }), StoreErrc::watch_broken);
  EXPECT_EQ(error_of([&] { prefix->watch->poll(out, 100); }), StoreErrc::watch_broken);
  EXPECT_TRUE(out.empty());
  const std::vector<std::string> again_keys = {"c.k"};
  auto again = store.watch_keys(again_keys, {});
  EXPECT_EQ(keys_of(poll_all(*again)), (std::vector<std::string>{"c.k", "^"}));
}

TEST_F(FaultInjectingStoreTest, WatchKeysTakesFailNextNotUnknownOutcomes) {
  const std::vector<std::string> keys = {"f.a", "f.b"};
  store.fail_next(1);
  EXPECT_EQ(error_of([&] { store.watch_keys(keys, {}); }), StoreErrc::unavailable);
  EXPECT_EQ(memory->watcher_count(), 0u) << "an injected failure opens nothing";
  const std::vector<std::string> dup = {"f.a", "f.a"};
  store.fail_next(1);
  EXPECT_EQ(error_of([&] { store.watch_keys(dup, {}); }), StoreErrc::invalid_argument);
  EXPECT_EQ(store.failures_pending(), 1u) << "an invalid key set consumes no fault";
  store.clear_faults();
  store.unknown_outcome_next(1, true);
  auto w = store.watch_keys(keys, {});
  EXPECT_EQ(store.unknown_outcomes_pending(), 1u) << "a watch is not a write";
  const auto log = store.op_log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].kind, OpKind::watch_keys);
  EXPECT_TRUE(log[0].injected);
  EXPECT_EQ(log[2].key, "f.a,f.b");
  EXPECT_EQ(log[2].outcome, OpOutcome::ok);
  EXPECT_EQ(store.op_count(OpKind::watch_keys), 3u);
  EXPECT_EQ(to_string(OpKind::watch_keys), "watch_keys");
}

// --- create_many ------------------------------------------------------------------------------

// Counts what reaches the store under the decorator.
class CountingStore final : public KvStoreWrapper {
 public:
  using KvStoreWrapper::KvStoreWrapper;
  WriteResult create(std::string_view key, std::string_view value) override {
    ++creates;
    return KvStoreWrapper::create(key, value);
  }
  std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests) override {
    batches.emplace_back();
    for (const CreateRequest& r : requests) batches.back().emplace_back(r.key);
    return KvStoreWrapper::create_many(requests);
  }
  int creates = 0;
  std::vector<std::vector<std::string>> batches;
};

std::vector<CreateRequest> batch_of(const std::vector<std::string>& keys) {
  std::vector<CreateRequest> out;
  for (const std::string& k : keys) out.push_back(CreateRequest{k, "v"});
  return out;
}

std::vector<std::string> errors_of(const std::vector<CreateOutcome>& outcomes) {
  std::vector<std::string> out;
  for (const CreateOutcome& o : outcomes) {
    out.emplace_back(o.error ? std::string(to_string(*o.error)) : o.result.ok ? "ok" : "lost");
  }
  return out;
}

TEST_F(FaultInjectingStoreTest, CreateManyTakesOneFaultPerRequestInOrder) {
  store.create("m.exists", "v");
  store.fail_next(1);
  store.unknown_outcome_next(2, /*apply=*/true);
  const std::vector<std::string> keys = {"m.a", "m.b", "m.exists", "m.c"};
  const auto out = store.create_many(batch_of(keys));
  EXPECT_EQ(errors_of(out),
            (std::vector<std::string>{"unavailable", "unknown_outcome", "unknown_outcome", "ok"}));
  EXPECT_EQ(store.failures_pending(), 0u);
  EXPECT_EQ(store.unknown_outcomes_pending(), 0u);
  EXPECT_FALSE(memory->get("m.a").has_value()) << "a failed request is not applied";
  EXPECT_TRUE(memory->get("m.b").has_value()) << "an applied unknown outcome landed";
  EXPECT_EQ(memory->get("m.c")->revision, out[3].result.revision);
  const auto log = store.op_log();
  ASSERT_EQ(log.size(), 5u);  // the create, then one record per request
  for (std::size_t i = 1; i < log.size(); ++i) {
    EXPECT_EQ(log[i].kind, OpKind::create_many);
    EXPECT_EQ(log[i].key, keys[i - 1]);
    EXPECT_EQ(log[i].seq, log[0].seq + i) << "one seq per request";
  }
  EXPECT_TRUE(log[1].injected && !log[1].landed);
  EXPECT_TRUE(log[2].injected && log[2].landed);
  EXPECT_TRUE(log[3].injected && !log[3].landed) << "the create of an existing key lost";
  EXPECT_TRUE(!log[4].injected && log[4].landed && log[4].outcome == OpOutcome::ok);
  EXPECT_EQ(store.op_count(OpKind::create_many), 1u);
  EXPECT_EQ(store.op_count(OpKind::create), 1u);
}

TEST(FaultInjectingStoreBatch, SendsTheUnfailedRequestsAsOneInnerBatch) {
  auto counting = std::make_shared<CountingStore>(std::make_shared<MemoryStore>());
  FaultInjectingStore store(counting);
  store.unknown_outcome_next(2, /*apply=*/false);
  const auto out = store.create_many(batch_of({"p.a", "p.b", "p.c", "p.d"}));
  EXPECT_EQ(errors_of(out),
            (std::vector<std::string>{"unknown_outcome", "unknown_outcome", "ok", "ok"}));
  store.unknown_outcome_next(1, /*apply=*/true);
  store.create_many(batch_of({"p.e", "p.f"}));
  EXPECT_EQ(counting->creates, 0) << "no request became a single create";
  EXPECT_EQ(counting->batches,
            (std::vector<std::vector<std::string>>{{"p.c", "p.d"}, {"p.e", "p.f"}}))
      << "one inner batch per call, without the dropped requests, in order";
  store.fail_next(2);
  EXPECT_EQ(errors_of(store.create_many(batch_of({"p.x", "p.y"}))),
            (std::vector<std::string>{"unavailable", "unavailable"}));
  EXPECT_EQ(counting->batches.size(), 2u) << "a batch with nothing left to send sends nothing";
}

TEST_F(FaultInjectingStoreTest, CreateManyThrowsAFailCodeNoRequestCanHave) {
  store.fail_next(2, StoreErrc::closed);
  EXPECT_EQ(error_of([&] { store.create_many(batch_of({"w.a", "w.b"})); }), StoreErrc::closed);
  EXPECT_EQ(store.failures_pending(), 1u) << "the batch took one fault, as one call";
  EXPECT_EQ(memory->size(), 0u);
  EXPECT_TRUE(store.create_many({}).empty());
  EXPECT_EQ(store.failures_pending(), 1u) << "an empty batch takes no fault";
  const std::string too_big(kMaxValueBytes + 1, 'x');
  const std::vector<CreateRequest> bad = {{"w.a", "v"}, {"w.b", too_big}};
  EXPECT_EQ(error_of([&] { store.create_many(bad); }), StoreErrc::invalid_argument);
  EXPECT_EQ(store.failures_pending(), 1u) << "an invalid batch takes no fault";
  EXPECT_EQ(memory->size(), 0u);
  const auto log = store.op_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_TRUE(log[0].injected);
  EXPECT_EQ(log[0].error, StoreErrc::closed);
  EXPECT_FALSE(log[1].injected);
  EXPECT_EQ(log[1].error, StoreErrc::invalid_argument);
}

// Concurrent callers consume armed faults exactly once each.
TEST_F(FaultInjectingStoreTest, FaultsAreConsumedExactlyOnceUnderConcurrency) {
  constexpr int kThreads = 4;
  constexpr int kOps = 200;
  store.fail_next(150);
  std::atomic<int> failed{0};
  std::atomic<int> other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        try {
          store.create(fmt::format("c.t{}.k{}", t, i), "v");
        } catch (const StoreError& e) {
          (e.code() == StoreErrc::unavailable ? failed : other)++;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed, 150);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(memory->size(), static_cast<std::size_t>(kThreads * kOps - 150));
  EXPECT_EQ(store.op_count(OpKind::create), static_cast<std::uint64_t>(kThreads * kOps));
}

// Hold, release, break and destroy race with writers; no callback may run after its watch's
// destructor returned (checked here and, in sanitizer builds, by TSan/ASan).
TEST_F(FaultInjectingStoreTest, WatchControlsAreSafeUnderConcurrency) {
  struct Probe {
    std::atomic<bool> destroyed{false};
  };
  std::vector<std::unique_ptr<Probe>> probes;
  std::atomic<int> late{0};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; i < 200'000 && !stop; ++i) {
      const std::string k = "r.k" + std::to_string(i % 8);
      const auto e = store.get(k);
      if (e) {
        store.update(k, std::to_string(i), e->revision);
      } else {
        store.create(k, "v");
      }
    }
  });
  std::thread controller([&] {
    for (int i = 0; i < 2'000 && !stop; ++i) {
      switch (i % 4) {
        case 0:
          store.hold_watch_events(true);
          break;
        case 1:
          store.release_held(3);
          break;
        case 2:
          store.hold_watch_events(false);
          break;
        default:
          store.break_watches();
          break;
      }
    }
  });
  for (int i = 0; i < 300; ++i) {
    probes.push_back(std::make_unique<Probe>());
    Probe* probe = probes.back().get();
    WatchOptions options;
    options.notify = [probe, &late] {
      if (probe->destroyed) ++late;
    };
    // Prefix and key watches alike.
    const std::vector<std::string> keys = {"r.k1", "r.k" + std::to_string(2 + i % 6)};
    auto w = i % 2 == 0 ? store.watch("r.", options) : store.watch_keys(keys, options);
    std::vector<WatchEvent> out;
    try {
      w->poll(out, 8);
    } catch (const StoreError& e) {
      EXPECT_EQ(e.code(), StoreErrc::watch_broken);
    }
    w.reset();
    probe->destroyed = true;
  }
  stop = true;
  writer.join();
  controller.join();
  EXPECT_EQ(late, 0);
}

// The simulator relies on this: the same calls give the same results, events and log.
TEST(FaultInjectingStoreDeterminism, SameScriptSameRun) {
  auto run = [] {
    FaultInjectingStore store(std::make_shared<MemoryStore>());
    auto w = store.watch("d.", {});
    std::vector<std::string> trace;
    for (int i = 0; i < 60; ++i) {
      if (i % 7 == 0) store.fail_next(1);
      if (i % 11 == 0) store.unknown_outcome_next(1, i % 2 == 0);
      if (i % 13 == 0) store.hold_watch_events(i % 26 == 0);
      if (i % 5 == 0) store.release_held(2);
      const std::string k = "d.k" + std::to_string(i % 4);
      try {
        const auto e = store.get(k);
        const WriteResult r =
            e ? store.update(k, std::to_string(i), e->revision) : store.create(k, "0");
        trace.push_back(fmt::format("w{}:{}", r.ok, r.revision));
      } catch (const StoreError& e) {
        trace.push_back(fmt::format("x{}", to_string(e.code())));
      }
      std::vector<WatchEvent> events;
      try {
        w->poll(events, 100);
      } catch (const StoreError& e) {
        trace.push_back(fmt::format("broken:{}", to_string(e.code())));
        w = store.watch("d.", {});
      }
      for (const auto& ev : events) trace.push_back(fmt::format("e{}@{}", ev.key, ev.revision));
    }
    for (const OpRecord& rec : store.op_log()) {
      trace.push_back(fmt::format("{}:{}:{}:{}:{}:{}:{}", rec.seq, to_string(rec.kind), rec.key,
                                  to_string(rec.outcome), rec.revision, rec.injected, rec.landed));
    }
    return trace;
  };
  const auto first = run();
  EXPECT_EQ(first, run());
  EXPECT_GT(first.size(), 120u);
}

}  // namespace
}  // namespace etlc::testing
