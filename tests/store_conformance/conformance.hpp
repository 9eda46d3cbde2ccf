// The KvStore conformance suite: one set of parameterised tests every backend must pass.
//
// To run it against a backend, compile conformance_tests.cpp together with one file of your own
// that instantiates the suite with a factory (see memory_conformance.cpp and
// docs/store-contract.md):
//
//   INSTANTIATE_TEST_SUITE_P(Nats, etlc::testing::StoreConformance,
//       ::testing::Values(etlc::testing::StoreFactory{"nats", [] { return make_nats(); }, {}}),
//       etlc::testing::StoreFactoryName{});
//
// The tests are written for networked backends too: every test works under its own random key
// namespace (so a factory may hand out one shared bucket), every wait is bounded by kWaitTimeout
// and driven by the watch's notify callback (events may arrive asynchronously), and the
// concurrency tests check counts and orders, never timings.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "etlc/store.hpp"

namespace etlc::testing {

// How the suite obtains stores of one backend.
struct StoreFactory {
  // Shown in test names: [A-Za-z0-9_] only.
  std::string name;
  // A store for one test. May return the same (shared) store or bucket every time: tests keep
  // to their own key namespace.
  std::function<std::shared_ptr<etlc::KvStore>()> make;
  // Optional: makes every live watch of `store` (a store returned by `make`) break, as a lost
  // connection would. The store may be unusable afterwards. Tests that need it are skipped when
  // it is empty.
  std::function<void(etlc::KvStore&)> break_watches;
};

inline void PrintTo(const StoreFactory& factory, std::ostream* os) {
  *os << factory.name;
}

// Name generator for INSTANTIATE_TEST_SUITE_P, so that test names show the backend.
struct StoreFactoryName {
  std::string operator()(const ::testing::TestParamInfo<StoreFactory>& info) const {
    return info.param.name;
  }
};

// The bound of every wait for watch events. Generous because a networked backend under a loaded
// CI machine may be slow; a conforming store answers in milliseconds.
inline constexpr std::chrono::milliseconds kWaitTimeout{10'000};

// Counts notify callbacks and lets a test thread wait for the next one.
class WatchSignal {
 public:
  void notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++count_;
    }
    cv_.notify_all();
  }

  std::uint64_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

  // Waits until more than `seen` callbacks have run, or the deadline passes. True if they ran.
  bool wait_beyond(std::uint64_t seen, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return count_ > seen; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t count_ = 0;
};

// A watch plus everything it has delivered so far.
struct TestWatch {
  std::string prefix;
  std::shared_ptr<WatchSignal> signal = std::make_shared<WatchSignal>();
  std::unique_ptr<etlc::Watch> watch;
  std::vector<etlc::WatchEvent> events;  // every event polled, in delivery order
  bool broken = false;                   // poll threw watch_broken
  std::string broken_message;

  // Index of the caught_up event in `events`, or events.size() if not seen yet.
  std::size_t caught_up_index() const {
    for (std::size_t i = 0; i < events.size(); ++i) {
      if (events[i].kind == etlc::WatchEvent::Kind::caught_up) return i;
    }
    return events.size();
  }
  bool caught_up() const { return caught_up_index() < events.size(); }
  // The snapshot part (events before caught_up).
  std::vector<etlc::WatchEvent> snapshot() const {
    return {events.begin(), events.begin() + static_cast<std::ptrdiff_t>(caught_up_index())};
  }
  // Events after caught_up (empty before it).
  std::vector<etlc::WatchEvent> live() const {
    const std::size_t i = caught_up_index();
    if (i == events.size()) return {};
    return {events.begin() + static_cast<std::ptrdiff_t>(i) + 1, events.end()};
  }
  // Whether a live event for `key` at `revision` has been seen.
  bool saw(std::string_view key, etlc::Revision revision) const {
    for (const auto& e : live()) {
      if (e.key == key && e.revision == revision) return true;
    }
    return false;
  }
};

// Opens a watch on `prefix` whose notify callback wakes poll_until. Throws what store.watch throws.
inline std::unique_ptr<TestWatch> open_watch(etlc::KvStore& store, std::string prefix,
                                             std::size_t max_pending = WatchOptions{}.max_pending,
                                             bool latest_only = false) {
  auto w = std::make_unique<TestWatch>();
  w->prefix = std::move(prefix);
  etlc::WatchOptions options;
  options.max_pending = max_pending;
  options.latest_only = latest_only;
  options.notify = [signal = w->signal] { signal->notify(); };
  w->watch = store.watch(w->prefix, std::move(options));
  return w;
}

// Opens a key watch of `keys` whose notify callback wakes poll_until; w.prefix names the keys
// (for messages only). Throws what store.watch_keys throws.
inline std::unique_ptr<TestWatch> open_key_watch(
    etlc::KvStore& store, const std::vector<std::string>& keys,
    std::size_t max_pending = WatchOptions{}.max_pending, bool latest_only = false) {
  auto w = std::make_unique<TestWatch>();
  w->prefix = keys.empty() ? std::string("(no keys)") : "keys " + keys.front() + "...";
  etlc::WatchOptions options;
  options.max_pending = max_pending;
  options.latest_only = latest_only;
  options.notify = [signal = w->signal] { signal->notify(); };
  w->watch = store.watch_keys(keys, std::move(options));
  return w;
}

// Polls everything `w` has ready into w.events; records a break instead of throwing it.
inline void drain(TestWatch& w) {
  if (w.broken) return;
  try {
    while (w.watch->poll(w.events, 4096) > 0) {
    }
  } catch (const etlc::StoreError& e) {
    if (e.code() != etlc::StoreErrc::watch_broken) throw;
    w.broken = true;
    w.broken_message = e.what();
  }
}

// Polls `w` (appending to w.events) until `done(w)` holds, the watch breaks, or `timeout`
// passes. Waits on the notify callback between polls, never sleeps. Returns done(w) at the end.
inline bool poll_until(TestWatch& w, const std::function<bool(const TestWatch&)>& done,
                       std::chrono::milliseconds timeout = kWaitTimeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Read the counter before polling: a callback after this point ends the wait at once.
    const std::uint64_t seen = w.signal->count();
    drain(w);
    if (done(w)) return true;
    if (w.broken) return false;
    if (!w.signal->wait_beyond(seen, deadline)) {
      drain(w);  // the deadline passed; a last look in case a callback was missed
      return done(w);
    }
  }
}

// A key namespace no other test (or process) uses: "cf.<16 hex digits>.".
inline std::string unique_namespace() {
  std::random_device device;
  const std::uint64_t token = (std::uint64_t{device()} << 32) ^ std::uint64_t{device()};
  return fmt::format("cf.{:016x}.", token);
}

// The parameterised fixture. Each test gets store() from the factory and a namespace ns() of its
// own; keys it writes should be made with key().
class StoreConformance : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(GetParam().make) << "StoreFactory '" << GetParam().name << "' has no make()";
    store_ = GetParam().make();
    ASSERT_NE(store_, nullptr) << "StoreFactory '" << GetParam().name << "' returned null";
    ns_ = unique_namespace();
  }

  // Removes what the test left under its namespace, so a shared bucket does not grow. Best
  // effort: the store may be closed or broken on purpose.
  void TearDown() override {
    if (!store_) return;
    try {
      for (const etlc::Entry& e : store_->list(ns_)) store_->erase(e.key, e.revision);
    } catch (const etlc::StoreError&) {  // NOLINT(bugprone-empty-catch): best effort
    }
  }

  etlc::KvStore& store() { return *store_; }
  const std::shared_ptr<etlc::KvStore>& store_ptr() { return store_; }
  const StoreFactory& factory() const { return GetParam(); }
  // The test's namespace, ending in '.', usable as a watch or list prefix.
  const std::string& ns() const { return ns_; }
  // A key (or, ending in '.', a prefix) inside the test's namespace.
  std::string key(std::string_view suffix) const { return ns_ + std::string(suffix); }

 private:
  std::shared_ptr<etlc::KvStore> store_;
  std::string ns_;
};

}  // namespace etlc::testing
