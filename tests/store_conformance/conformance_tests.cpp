// The KvStore conformance cases (see conformance.hpp). No INSTANTIATE here: each backend's test
// executable compiles this file with its own instantiation.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "store_conformance/conformance.hpp"

namespace etlc::testing {
namespace {

using Kind = WatchEvent::Kind;

// Runs `f` and checks that it throws StoreError with `code`.
template <typename F>
void expect_store_error(StoreErrc code, F&& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no exception; expected StoreError(" << to_string(code) << ")";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), code) << what << ": " << e.what();
  }
}

// A conflict may report the key's current revision or 0 (unknown), never anything else.
void expect_conflict(const WriteResult& r, Revision current, const std::string& what) {
  EXPECT_FALSE(r.ok) << what;
  if (!r.ok) {
    EXPECT_TRUE(r.revision == 0 || r.revision == current)
        << what << ": a conflict reported revision " << r.revision << "; the key is at " << current;
  }
}

// Threads that are stopped and joined however the test exits (a failed ASSERT returns early).
struct Crew {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  ~Crew() { join(); }
  void join() {
    stop = true;
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

std::string describe(const WatchEvent& e) {
  const char* kind = e.kind == Kind::put ? "put" : e.kind == Kind::erase ? "erase" : "caught_up";
  return fmt::format("{} '{}' @{}", kind, e.key, e.revision);
}

std::size_t count_caught_up(const TestWatch& w) {
  return static_cast<std::size_t>(
      std::count_if(w.events.begin(), w.events.end(),
                    [](const WatchEvent& e) { return e.kind == Kind::caught_up; }));
}

// --- create
// ---------------------------------------------------------------------------------------

TEST_P(StoreConformance, CreateOnAbsentKeyWins) {
  const std::string k = key("a");
  const WriteResult r = store().create(k, "v1");
  ASSERT_TRUE(r.ok);
  EXPECT_GT(r.revision, 0u);
  const auto e = store().get(k);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->key, k);
  EXPECT_EQ(e->value, "v1");
  EXPECT_EQ(e->revision, r.revision);
}

TEST_P(StoreConformance, CreateOnPresentKeyLosesAndChangesNothing) {
  const std::string k = key("a");
  const WriteResult first = store().create(k, "v1");
  ASSERT_TRUE(first.ok);
  expect_conflict(store().create(k, "v2"), first.revision, "second create");
  const auto e = store().get(k);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->value, "v1");
  EXPECT_EQ(e->revision, first.revision);
}

TEST_P(StoreConformance, CreateOnDeletedKeyWinsWithHigherRevision) {
  const std::string k = key("a");
  const WriteResult c1 = store().create(k, "v1");
  ASSERT_TRUE(c1.ok);
  const WriteResult d = store().erase(k, c1.revision);
  ASSERT_TRUE(d.ok);
  const WriteResult c2 = store().create(k, "v2");
  ASSERT_TRUE(c2.ok) << "a deleted key must count as absent";
  EXPECT_GT(c2.revision, d.revision);
  const auto e = store().get(k);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->value, "v2");
  EXPECT_EQ(e->revision, c2.revision);
}

// --- update (compare-and-swap)
// ---------------------------------------------------------------------

TEST_P(StoreConformance, UpdateWithCurrentRevisionWinsAndRevisionIncreases) {
  const std::string k = key("a");
  WriteResult last = store().create(k, "0");
  ASSERT_TRUE(last.ok);
  for (int i = 1; i <= 5; ++i) {
    const WriteResult next = store().update(k, std::to_string(i), last.revision);
    ASSERT_TRUE(next.ok) << "update " << i;
    EXPECT_GT(next.revision, last.revision);
    last = next;
  }
  const auto e = store().get(k);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->value, "5");
  EXPECT_EQ(e->revision, last.revision);
}

TEST_P(StoreConformance, UpdateWithStaleRevisionLoses) {
  const std::string k = key("a");
  const WriteResult c = store().create(k, "v1");
  ASSERT_TRUE(c.ok);
  const WriteResult u = store().update(k, "v2", c.revision);
  ASSERT_TRUE(u.ok);
  expect_conflict(store().update(k, "stale", c.revision), u.revision, "update at a stale revision");
  expect_conflict(store().update(k, "future", u.revision + 1000), u.revision,
                  "update at a revision from the future");
  const auto e = store().get(k);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->value, "v2");
  EXPECT_EQ(e->revision, u.revision);
}

TEST_P(StoreConformance, UpdateOfAbsentOrDeletedKeyLoses) {
  const std::string never = key("never");
  expect_conflict(store().update(never, "x", 1), 0, "update of a never-written key");
  expect_conflict(store().update(never, "x", 1'000'000), 0, "update of a never-written key");
  EXPECT_FALSE(store().get(never).has_value());

  const std::string k = key("deleted");
  const WriteResult c = store().create(k, "v1");
  ASSERT_TRUE(c.ok);
  const WriteResult d = store().erase(k, c.revision);
  ASSERT_TRUE(d.ok);
  expect_conflict(store().update(k, "x", c.revision), 0, "update at the last live revision");
  expect_conflict(store().update(k, "x", d.revision), 0, "update at the delete's revision");
  EXPECT_FALSE(store().get(k).has_value()) << "a losing update must not resurrect a deleted key";
}

TEST_P(StoreConformance, UpdateWithExpectedZeroNeverMatches) {
  const std::string absent = key("absent");
  EXPECT_FALSE(store().update(absent, "x", 0).ok) << "expected 0 must not act as create";
  EXPECT_FALSE(store().get(absent).has_value());

  const std::string k = key("live");
  const WriteResult c = store().create(k, "v1");
  ASSERT_TRUE(c.ok);
  expect_conflict(store().update(k, "x", 0), c.revision, "update of a live key at 0");

  const WriteResult d = store().erase(k, c.revision);
  ASSERT_TRUE(d.ok);
  EXPECT_FALSE(store().update(k, "x", 0).ok) << "expected 0 must not re-create a deleted key";
  EXPECT_FALSE(store().get(k).has_value());
}

// --- erase (guarded delete)
// -----------------------------------------------------------------------

TEST_P(StoreConformance, EraseWithCurrentRevisionWins) {
  const std::string k = key("a");
  const WriteResult c = store().create(k, "v1");
  ASSERT_TRUE(c.ok);
  const WriteResult u = store().update(k, "v2", c.revision);
  ASSERT_TRUE(u.ok);
  const WriteResult d = store().erase(k, u.revision);
  ASSERT_TRUE(d.ok);
  EXPECT_GT(d.revision, u.revision) << "a delete has its own, higher revision";
  EXPECT_FALSE(store().get(k).has_value());
  for (const Entry& e : store().list(ns())) EXPECT_NE(e.key, k) << "a deleted key was listed";
}

TEST_P(StoreConformance, EraseWithStaleRevisionLoses) {
  const std::string k = key("a");
  const WriteResult c = store().create(k, "v1");
  ASSERT_TRUE(c.ok);
  const WriteResult u = store().update(k, "v2", c.revision);
  ASSERT_TRUE(u.ok);
  expect_conflict(store().erase(k, c.revision), u.revision, "erase at a stale revision");
  expect_conflict(store().erase(k, u.revision + 1000), u.revision, "erase at a future revision");
  expect_conflict(store().erase(k, 0), u.revision, "erase at revision 0");
  const auto e = store().get(k);
  ASSERT_TRUE(e.has_value()) << "a losing delete removed the key";
  EXPECT_EQ(e->value, "v2");
  EXPECT_EQ(e->revision, u.revision);
}

TEST_P(StoreConformance, EraseOfAbsentOrDeletedKeyLoses) {
  const std::string never = key("never");
  expect_conflict(store().erase(never, 1), 0, "erase of a never-written key");

  const std::string k = key("deleted");
  const WriteResult c = store().create(k, "v1");
  ASSERT_TRUE(c.ok);
  const WriteResult d = store().erase(k, c.revision);
  ASSERT_TRUE(d.ok);
  expect_conflict(store().erase(k, c.revision), 0, "erase at the last live revision");
  // A key is deleted only "iff it is live": the delete's own revision is not a live revision.
  expect_conflict(store().erase(k, d.revision), 0, "erase at the delete's own revision");
  EXPECT_FALSE(store().get(k).has_value());
  const WriteResult again = store().create(k, "v2");
  ASSERT_TRUE(again.ok);
  EXPECT_GT(again.revision, d.revision);
}

// --- revisions
// ------------------------------------------------------------------------------------

TEST_P(StoreConformance, RevisionsStrictlyIncreaseAcrossDeleteAndRecreateNoAba) {
  const std::string k = key("aba");
  std::vector<Revision> history;
  WriteResult r = store().create(k, "c1");
  ASSERT_TRUE(r.ok);
  history.push_back(r.revision);
  for (int incarnation = 0; incarnation < 3; ++incarnation) {
    r = store().update(k, fmt::format("u{}", incarnation), r.revision);
    ASSERT_TRUE(r.ok);
    history.push_back(r.revision);
    r = store().erase(k, r.revision);
    ASSERT_TRUE(r.ok);
    history.push_back(r.revision);
    r = store().create(k, fmt::format("c{}", incarnation + 2));
    ASSERT_TRUE(r.ok);
    history.push_back(r.revision);
  }
  for (std::size_t i = 1; i < history.size(); ++i) {
    EXPECT_GT(history[i], history[i - 1]) << "write " << i << " of the key's history";
  }
  const Revision current = history.back();
  for (std::size_t i = 0; i + 1 < history.size(); ++i) {
    expect_conflict(store().update(k, "aba", history[i]), current,
                    fmt::format("update at old revision {}", history[i]));
    expect_conflict(store().erase(k, history[i]), current,
                    fmt::format("erase at old revision {}", history[i]));
  }
  const auto e = store().get(k);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->value, "c4");
  EXPECT_EQ(e->revision, current);
}

// --- get
// ------------------------------------------------------------------------------------------

TEST_P(StoreConformance, GetOfAbsentAndDeletedKeysIsEmpty) {
  EXPECT_FALSE(store().get(key("never")).has_value());
  ASSERT_TRUE(store().create(key("p.child"), "c").ok);
  EXPECT_FALSE(store().get(key("p")).has_value()) << "get is exact, not a prefix match";
  const WriteResult c = store().create(key("gone"), "v");
  ASSERT_TRUE(c.ok);
  ASSERT_TRUE(store().erase(key("gone"), c.revision).ok);
  EXPECT_FALSE(store().get(key("gone")).has_value());
}

// --- list
// -----------------------------------------------------------------------------------------

TEST_P(StoreConformance, ListIsSortedLiveAndOnlyUnderThePrefix) {
  std::map<std::string, std::pair<std::string, Revision>> expected;
  for (const char* suffix : {"l.b", "l.a", "l.c.d", "l.a-2", "l.B"}) {
    const WriteResult r = store().create(key(suffix), suffix);
    ASSERT_TRUE(r.ok);
    expected[key(suffix)] = {suffix, r.revision};
  }
  for (const char* outside : {"l", "lx", "l2.a", "m.a", "k.z"}) {
    ASSERT_TRUE(store().create(key(outside), "outside").ok);
  }
  const WriteResult doomed = store().create(key("l.doomed"), "x");
  ASSERT_TRUE(doomed.ok);
  ASSERT_TRUE(store().erase(key("l.doomed"), doomed.revision).ok);
  const WriteResult moved = store().update(key("l.b"), "l.b-2", expected[key("l.b")].second);
  ASSERT_TRUE(moved.ok);
  expected[key("l.b")] = {"l.b-2", moved.revision};

  const std::vector<Entry> listed = store().list(key("l."));
  ASSERT_EQ(listed.size(), expected.size());
  auto it = expected.begin();  // std::map order is byte order, which list must follow
  for (const Entry& e : listed) {
    EXPECT_EQ(e.key, it->first);
    EXPECT_EQ(e.value, it->second.first) << e.key;
    EXPECT_EQ(e.revision, it->second.second) << e.key;
    ++it;
  }
  EXPECT_TRUE(store().list(key("none.")).empty());
}

TEST_P(StoreConformance, ListOfEverythingIncludesTheTestsKeys) {
  ASSERT_TRUE(store().create(key("e.1"), "1").ok);
  ASSERT_TRUE(store().create(key("e.2"), "2").ok);
  const std::vector<Entry> all = store().list("");
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end(),
                             [](const Entry& a, const Entry& b) { return a.key < b.key; }));
  std::set<std::string> keys;
  for (const Entry& e : all) keys.insert(e.key);
  EXPECT_EQ(keys.count(key("e.1")), 1u);
  EXPECT_EQ(keys.count(key("e.2")), 1u);
}

TEST_P(StoreConformance, ListNeverUnderReportsUnderConcurrentWriters) {
  const std::string prefix = key("s.");
  constexpr int kStable = 40;
  constexpr int kChurners = 2;
  constexpr int kMaxChurnOps = 20'000;
  constexpr int kLists = 100;
  std::set<std::string> stable;
  for (int i = 0; i < kStable; ++i) {
    const std::string k = prefix + fmt::format("k{:02}", i);
    ASSERT_TRUE(store().create(k, "stable").ok);
    stable.insert(k);
  }
  std::atomic<int> churn_ops{0};
  std::atomic<int> churn_errors{0};
  std::atomic<int> churners_done{0};
  Crew crew;
  for (int t = 0; t < kChurners; ++t) {
    crew.threads.emplace_back([&, t] {
      // Keys that sort between the stable ones ("k07-t1" after "k07"), created and deleted.
      for (int i = 0; i < kMaxChurnOps && !crew.stop; ++i) {
        const std::string k = prefix + fmt::format("k{:02}-t{}", (i * 7 + t) % kStable, t);
        try {
          const WriteResult c = store().create(k, "churn");
          if (c.ok) store().erase(k, c.revision);
        } catch (const StoreError&) {
          ++churn_errors;
        }
        ++churn_ops;
      }
      ++churners_done;
    });
  }
  int bad_lists = 0;
  // Keep listing until the churners have overlapped a while (or finished), at least kLists times.
  for (int lists = 0; lists < kLists || (churn_ops < 200 && churners_done < kChurners); ++lists) {
    const std::vector<Entry> entries = store().list(prefix);
    std::set<std::string> seen;
    bool ok = true;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::string& k = entries[i].key;
      if (k.compare(0, prefix.size(), prefix) != 0) ok = false;
      if (i > 0 && !(entries[i - 1].key < k)) ok = false;  // sorted, no duplicates
      seen.insert(k);
    }
    for (const std::string& k : stable) {
      if (seen.count(k) == 0) ok = false;
    }
    if (!ok) ++bad_lists;
    if (bad_lists > 0) break;
  }
  crew.join();
  EXPECT_EQ(bad_lists, 0) << "a listing missed a key that was live throughout, was unsorted, "
                             "or strayed outside the prefix";
  EXPECT_EQ(churn_errors, 0);
  EXPECT_GT(churn_ops, 0);
}

// --- watch
// ----------------------------------------------------------------------------------------

TEST_P(StoreConformance, WatchDeliversSnapshotThenCaughtUpThenLiveEvents) {
  const std::string p = key("w.");
  const WriteResult c1 = store().create(p + "k1", "one");
  const WriteResult c2 = store().create(p + "k2", "two");
  const WriteResult c3 = store().create(p + "k3", "three-a");
  ASSERT_TRUE(c1.ok && c2.ok && c3.ok);
  const WriteResult u3 = store().update(p + "k3", "three-b", c3.revision);
  ASSERT_TRUE(u3.ok);
  ASSERT_TRUE(store().erase(p + "k2", c2.revision).ok);
  const WriteResult outside = store().create(key("other.k"), "x");
  ASSERT_TRUE(outside.ok);
  ASSERT_TRUE(store().create(key("wx"), "x").ok);

  auto w = open_watch(store(), p);
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }))
      << "no caught_up within " << kWaitTimeout.count() << " ms";
  std::map<std::string, std::pair<std::string, Revision>> snap;
  for (const WatchEvent& e : w->snapshot()) {
    EXPECT_EQ(e.kind, Kind::put) << "the snapshot holds puts only: " << describe(e);
    EXPECT_TRUE(snap.emplace(e.key, std::make_pair(e.value, e.revision)).second)
        << "key twice in the snapshot: " << e.key;
  }
  const std::map<std::string, std::pair<std::string, Revision>> want_snap = {
      {p + "k1", {"one", c1.revision}}, {p + "k3", {"three-b", u3.revision}}};
  EXPECT_EQ(snap, want_snap) << "the snapshot is the live keys under the prefix, latest values";

  const WriteResult c4 = store().create(p + "k4", "four");
  const WriteResult u1 = store().update(p + "k1", "one-b", c1.revision);
  const WriteResult d3 = store().erase(p + "k3", u3.revision);
  ASSERT_TRUE(c4.ok && u1.ok && d3.ok);
  ASSERT_TRUE(store().update(key("other.k"), "y", outside.revision).ok);
  ASSERT_TRUE(poll_until(*w,
                         [&](const TestWatch& t) {
                           return t.saw(p + "k4", c4.revision) && t.saw(p + "k1", u1.revision) &&
                                  t.saw(p + "k3", d3.revision);
                         }))
      << "live events missing; got " << w->live().size();

  const std::vector<WatchEvent> live = w->live();
  ASSERT_EQ(live.size(), 3u);
  for (const WatchEvent& e : live) {
    if (e.key == p + "k4") {
      EXPECT_EQ(e.kind, Kind::put);
      EXPECT_EQ(e.value, "four");
      EXPECT_EQ(e.revision, c4.revision);
    } else if (e.key == p + "k1") {
      EXPECT_EQ(e.kind, Kind::put);
      EXPECT_EQ(e.value, "one-b");
      EXPECT_EQ(e.revision, u1.revision);
    } else {
      EXPECT_EQ(e.key, p + "k3");
      EXPECT_EQ(e.kind, Kind::erase) << "a delete is delivered as an erase";
      EXPECT_EQ(e.revision, d3.revision) << "an erase carries the delete's revision";
    }
  }
  EXPECT_EQ(count_caught_up(*w), 1u);
  EXPECT_FALSE(w->broken) << w->broken_message;
}

TEST_P(StoreConformance, WatchOfAnEmptyRangeCatchesUpAtOnce) {
  ASSERT_TRUE(store().create(key("elsewhere"), "x").ok);
  auto w = open_watch(store(), key("empty."));
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  EXPECT_EQ(w->caught_up_index(), 0u) << "nothing lives under the prefix";
  const WriteResult c = store().create(key("empty.first"), "1");
  ASSERT_TRUE(c.ok);
  ASSERT_TRUE(
      poll_until(*w, [&](const TestWatch& t) { return t.saw(key("empty.first"), c.revision); }));
}

TEST_P(StoreConformance, WatchDeliversOnlyKeysUnderItsPrefixTokenAligned) {
  const std::string p = key("a.b.");
  ASSERT_TRUE(store().create(key("a.bc"), "sibling").ok);  // "a.bc" is not under "a.b."
  ASSERT_TRUE(store().create(key("a.b"), "parent").ok);    // nor is "a.b" itself
  ASSERT_TRUE(store().create(key("a.bb.x"), "cousin").ok);
  const WriteResult inside = store().create(p + "x", "inside");
  ASSERT_TRUE(inside.ok);

  auto w = open_watch(store(), p);
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  const std::vector<WatchEvent> snap = w->snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].key, p + "x");
  EXPECT_EQ(snap[0].revision, inside.revision);

  ASSERT_TRUE(store().create(key("a.bc.y"), "no").ok);
  ASSERT_TRUE(store().create(key("a.b-c"), "no").ok);
  ASSERT_TRUE(store().create(key("a.bx"), "no").ok);
  const WriteResult deep = store().create(p + "y.z", "deep");
  ASSERT_TRUE(deep.ok);
  const WriteResult sentinel = store().create(p + "zz", "sentinel");
  ASSERT_TRUE(sentinel.ok);
  ASSERT_TRUE(poll_until(*w, [&](const TestWatch& t) {
    return t.saw(p + "y.z", deep.revision) && t.saw(p + "zz", sentinel.revision);
  }));
  for (const WatchEvent& e : w->events) {
    if (e.kind == Kind::caught_up) continue;
    EXPECT_EQ(e.key.compare(0, p.size(), p), 0) << "event outside the prefix: " << describe(e);
  }
  std::vector<std::string> listed;
  for (const Entry& e : store().list(p)) listed.push_back(e.key);
  EXPECT_EQ(listed, (std::vector<std::string>{p + "x", p + "y.z", p + "zz"}));
}

// Several threads race CAS increments on two keys while three watchers follow them. Each watcher
// must see, per key, exactly the winning writes in revision order with their values: the create,
// every winning CAS, and the final delete.
TEST_P(StoreConformance, WatchersSeeTheSamePerKeyOrderUnderConcurrentWriters) {
  const std::string p = key("o.");
  const std::vector<std::string> keys = {p + "k0", p + "k1"};
  constexpr int kThreads = 4;
  constexpr int kWinsPerThreadPerKey = 40;
  constexpr int kMaxAttempts = 100'000;
  std::vector<std::unique_ptr<TestWatch>> watchers;
  for (int i = 0; i < 3; ++i) {
    watchers.push_back(open_watch(store(), p));
    ASSERT_TRUE(poll_until(*watchers.back(), [](const TestWatch& t) { return t.caught_up(); }));
  }
  using Seen = std::tuple<Kind, Revision, std::string>;
  std::map<std::string, std::vector<Seen>> expected;  // per key, sorted by revision later
  for (const std::string& k : keys) {
    const WriteResult c = store().create(k, "0");
    ASSERT_TRUE(c.ok);
    expected[k].emplace_back(Kind::put, c.revision, "0");
  }
  std::vector<std::vector<std::pair<std::string, Seen>>> wins(kThreads);
  std::atomic<int> failures{0};
  {
    Crew crew;
    for (int t = 0; t < kThreads; ++t) {
      crew.threads.emplace_back([&, t] {
        try {
          for (int round = 0; round < kWinsPerThreadPerKey; ++round) {
            for (const std::string& k : keys) {
              bool won = false;
              for (int attempt = 0; attempt < kMaxAttempts && !won; ++attempt) {
                const auto e = store().get(k);
                if (!e) break;
                const std::string next = std::to_string(std::stoll(e->value) + 1);
                const WriteResult r = store().update(k, next, e->revision);
                if (r.ok) {
                  wins[static_cast<std::size_t>(t)].push_back(
                      {k, Seen{Kind::put, r.revision, next}});
                  won = true;
                }
              }
              if (!won) {
                ++failures;
                return;
              }
            }
          }
        } catch (const StoreError&) {
          ++failures;
        }
      });
    }
  }
  ASSERT_EQ(failures, 0);
  for (const auto& per_thread : wins) {
    for (const auto& [k, seen] : per_thread) expected[k].push_back(seen);
  }
  for (const std::string& k : keys) {
    auto& v = expected[k];
    std::sort(v.begin() + 1, v.end(),
              [](const Seen& a, const Seen& b) { return std::get<1>(a) < std::get<1>(b); });
    const auto e = store().get(k);
    ASSERT_TRUE(e.has_value());
    ASSERT_EQ(e->revision, std::get<1>(v.back()));
    const WriteResult d = store().erase(k, e->revision);
    ASSERT_TRUE(d.ok);
    v.emplace_back(Kind::erase, d.revision, "");
  }
  for (std::size_t i = 0; i < watchers.size(); ++i) {
    TestWatch& w = *watchers[i];
    ASSERT_TRUE(poll_until(w,
                           [&](const TestWatch& t) {
                             for (const std::string& k : keys) {
                               if (!t.saw(k, std::get<1>(expected[k].back()))) return false;
                             }
                             return true;
                           }))
        << "watcher " << i << " did not see every delete; " << w.live().size() << " live events";
    for (const std::string& k : keys) {
      std::vector<Seen> got;
      for (const WatchEvent& e : w.live()) {
        if (e.key == k) got.emplace_back(e.kind, e.revision, e.kind == Kind::put ? e.value : "");
      }
      EXPECT_EQ(got.size(), expected[k].size()) << "watcher " << i << ", key " << k;
      EXPECT_TRUE(got == expected[k])
          << "watcher " << i << " saw key " << k << " in a different order or with gaps";
    }
  }
}

TEST_P(StoreConformance, NotifyNeverRunsAfterTheWatchIsDestroyed) {
  const std::string p = key("n.");
  constexpr int kCycles = 200;
  struct Probe {
    std::atomic<bool> destroyed{false};
  };
  std::vector<std::unique_ptr<Probe>> probes;  // kept alive: a late callback must be observable
  std::atomic<int> late_callbacks{0};
  std::atomic<int> writer_errors{0};
  Crew crew;
  crew.threads.emplace_back([&] {
    Revision rev = 0;
    for (int i = 0; i < 1'000'000 && !crew.stop; ++i) {
      try {
        const WriteResult r = rev == 0 ? store().create(p + "x", std::to_string(i))
                                       : store().update(p + "x", std::to_string(i), rev);
        rev = r.ok ? r.revision : 0;
        if (!r.ok) {
          const auto e = store().get(p + "x");
          rev = e ? e->revision : 0;
        }
      } catch (const StoreError&) {
        ++writer_errors;
        return;
      }
    }
  });
  for (int i = 0; i < kCycles; ++i) {
    probes.push_back(std::make_unique<Probe>());
    Probe* probe = probes.back().get();
    WatchOptions options;
    options.notify = [probe, &late_callbacks] {
      if (probe->destroyed.load()) ++late_callbacks;
    };
    auto watch = store().watch(p, std::move(options));
    std::vector<WatchEvent> events;
    if (i % 2 == 0) watch->poll(events, 16);
    watch.reset();
    probe->destroyed = true;
  }
  crew.join();
  EXPECT_EQ(late_callbacks, 0) << "a notify callback ran after its Watch was destroyed";
  EXPECT_EQ(writer_errors, 0);
}

TEST_P(StoreConformance, BrokenWatchIsReportedNotSilent) {
  if (!factory().break_watches) GTEST_SKIP() << "the factory cannot break watches";
  const std::string p = key("b.");
  auto w = open_watch(store(), p);
  const WriteResult c = store().create(p + "x", "1");
  ASSERT_TRUE(c.ok);
  ASSERT_TRUE(poll_until(*w, [&](const TestWatch& t) { return t.saw(p + "x", c.revision); }));
  factory().break_watches(store());
  EXPECT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.broken; }))
      << "a broken watch must make poll throw watch_broken";
  std::vector<WatchEvent> more;
  expect_store_error(
      StoreErrc::watch_broken, [&] { w->watch->poll(more, 16); },
      "poll after the break (a broken watch stays broken)");
}

// --- key watches (watch_keys)
// ------------------------------------------------------------------------------

// The events `w` delivered for `k` (snapshot and live), in delivery order.
std::vector<WatchEvent> events_of(const TestWatch& w, const std::string& k) {
  std::vector<WatchEvent> out;
  for (const WatchEvent& e : w.events) {
    if (e.kind != Kind::caught_up && e.key == k) out.push_back(e);
  }
  return out;
}

// Whether the last event `w` delivered for `k` says the key is live at `revision`.
bool ends_live_at(const TestWatch& w, const std::string& k, Revision revision) {
  const std::vector<WatchEvent> seen = events_of(w, k);
  return !seen.empty() && seen.back().kind == Kind::put && seen.back().revision == revision;
}

// Checks that every event of `w` is about one of `keys`; returns a description of the first
// stray one, or "".
std::string stray_event(const TestWatch& w, const std::vector<std::string>& keys) {
  for (const WatchEvent& e : w.events) {
    if (e.kind == Kind::caught_up) continue;
    if (std::find(keys.begin(), keys.end(), e.key) == keys.end()) return describe(e);
  }
  return "";
}

TEST_P(StoreConformance, KeyWatchDeliversSnapshotOfLiveKeysThenCaughtUpThenLiveEvents) {
  const std::string live = key("kw.live");
  const std::string moved = key("kw.moved");
  const std::string gone = key("kw.gone");
  const std::string never = key("kw.never");
  const WriteResult c1 = store().create(live, "one");
  const WriteResult c2 = store().create(moved, "two-a");
  const WriteResult c3 = store().create(gone, "three");
  ASSERT_TRUE(c1.ok && c2.ok && c3.ok);
  const WriteResult u2 = store().update(moved, "two-b", c2.revision);
  ASSERT_TRUE(u2.ok);
  const WriteResult d3 = store().erase(gone, c3.revision);
  ASSERT_TRUE(d3.ok);
  ASSERT_TRUE(store().create(key("kw.other"), "not watched").ok);

  auto w = open_key_watch(store(), {never, gone, moved, live});
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }))
      << "no caught_up within " << kWaitTimeout.count() << " ms";
  std::map<std::string, std::pair<std::string, Revision>> snap;
  for (const WatchEvent& e : w->snapshot()) {
    EXPECT_EQ(e.kind, Kind::put) << "the snapshot holds puts only: " << describe(e);
    EXPECT_TRUE(snap.emplace(e.key, std::make_pair(e.value, e.revision)).second)
        << "key twice in the snapshot: " << e.key;
  }
  const std::map<std::string, std::pair<std::string, Revision>> want_snap = {
      {live, {"one", c1.revision}}, {moved, {"two-b", u2.revision}}};
  EXPECT_EQ(snap, want_snap) << "the snapshot is the live watched keys, latest values";

  const WriteResult c4 = store().create(never, "four");
  const WriteResult c5 = store().create(gone, "three-again");
  const WriteResult u1 = store().update(live, "one-b", c1.revision);
  const WriteResult d2 = store().erase(moved, u2.revision);
  ASSERT_TRUE(c4.ok && c5.ok && u1.ok && d2.ok);
  ASSERT_TRUE(poll_until(*w,
                         [&](const TestWatch& t) {
                           return t.saw(never, c4.revision) && t.saw(gone, c5.revision) &&
                                  t.saw(live, u1.revision) && t.saw(moved, d2.revision);
                         }))
      << "live events missing; got " << w->live().size();
  using Seen = std::tuple<std::string, Kind, std::string, Revision>;
  std::set<Seen> got;
  for (const WatchEvent& e : w->live()) got.emplace(e.key, e.kind, e.value, e.revision);
  const std::set<Seen> want = {{never, Kind::put, "four", c4.revision},
                               {gone, Kind::put, "three-again", c5.revision},
                               {live, Kind::put, "one-b", u1.revision},
                               {moved, Kind::erase, "", d2.revision}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(w->live().size(), 4u) << "an event was delivered twice";
  EXPECT_EQ(count_caught_up(*w), 1u);
  EXPECT_FALSE(w->broken) << w->broken_message;
}

TEST_P(StoreConformance, KeyWatchOfAbsentKeysCatchesUpAtOnce) {
  const std::string gone = key("ka.gone");
  const WriteResult c = store().create(gone, "x");
  ASSERT_TRUE(c.ok);
  ASSERT_TRUE(store().erase(gone, c.revision).ok);
  ASSERT_TRUE(store().create(key("ka.neighbour"), "x").ok);
  auto w = open_key_watch(store(), {key("ka.never"), gone});
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  EXPECT_EQ(w->caught_up_index(), 0u) << "no watched key is live: the snapshot is empty";
  const WriteResult first = store().create(key("ka.never"), "1");
  ASSERT_TRUE(first.ok);
  ASSERT_TRUE(
      poll_until(*w, [&](const TestWatch& t) { return t.saw(key("ka.never"), first.revision); }));
  EXPECT_EQ(w->live().size(), 1u);
  EXPECT_EQ(count_caught_up(*w), 1u);
}

// Exact keys, not prefixes: "a.b" is not "a.bc", "a.b.c", "a" or "a.b-c", and each of those
// watched alone sees none of the others.
TEST_P(StoreConformance, KeyWatchDeliversOnlyItsOwnKeys) {
  const std::vector<std::string> all = {key("x.a"),     key("x.a.b"),   key("x.a.bc"),
                                        key("x.a.b.c"), key("x.a.b-c"), key("x.a.c")};
  std::map<std::string, Revision> created;
  for (std::size_t i = 0; i < all.size(); i += 2) {  // half exist before the watches open
    const WriteResult r = store().create(all[i], "before");
    ASSERT_TRUE(r.ok);
    created[all[i]] = r.revision;
  }
  const std::vector<std::string> watched = {key("x.a.b"), key("x.a.bc"), key("x.a.b.c"),
                                            key("x.a")};
  std::vector<std::unique_ptr<TestWatch>> watches;
  for (const std::string& k : watched) {
    watches.push_back(open_key_watch(store(), {k}));
    ASSERT_TRUE(poll_until(*watches.back(), [](const TestWatch& t) { return t.caught_up(); }));
  }
  std::map<std::string, Revision> last;
  for (const std::string& k : all) {  // every key changes once more after the watches opened
    const auto it = created.find(k);
    const WriteResult r =
        it == created.end() ? store().create(k, "after") : store().update(k, "after", it->second);
    ASSERT_TRUE(r.ok) << k;
    last[k] = r.revision;
  }
  for (std::size_t i = 0; i < watches.size(); ++i) {
    TestWatch& w = *watches[i];
    const std::string& k = watched[i];
    ASSERT_TRUE(poll_until(w, [&](const TestWatch& t) { return t.saw(k, last[k]); }))
        << "the watch of " << k << " missed its key's write";
    EXPECT_EQ(stray_event(w, {k}), "") << "the watch of " << k << " saw another key";
    EXPECT_EQ(w.snapshot().size(), created.count(k)) << k;
    EXPECT_EQ(w.live().size(), 1u) << k;
  }
}

// Per key, the writes a watcher must see after caught_up: (kind, revision, value).
using KeySeen = std::tuple<Kind, Revision, std::string>;
using KeyHistory = std::map<std::string, std::vector<KeySeen>>;

// Creates `keys`, then `threads` threads race CAS increments on them (`wins` each per key), then
// every key is deleted. Returns each key's writes in revision order, or records a failure.
KeyHistory race_increments(KvStore& store, const std::vector<std::string>& keys, int threads,
                           int wins) {
  constexpr int kMaxAttempts = 100'000;
  KeyHistory expected;
  for (const std::string& k : keys) {
    const WriteResult c = store.create(k, "0");
    EXPECT_TRUE(c.ok) << k;
    expected[k].emplace_back(Kind::put, c.revision, "0");
  }
  std::vector<std::vector<std::pair<std::string, KeySeen>>> won(static_cast<std::size_t>(threads));
  std::atomic<int> failures{0};
  {
    Crew crew;
    for (int t = 0; t < threads; ++t) {
      crew.threads.emplace_back([&, t] {
        try {
          for (int round = 0; round < wins; ++round) {
            for (const std::string& k : keys) {
              bool ok = false;
              for (int attempt = 0; attempt < kMaxAttempts && !ok; ++attempt) {
                const auto e = store.get(k);
                if (!e) break;
                const std::string next = std::to_string(std::stoll(e->value) + 1);
                const WriteResult r = store.update(k, next, e->revision);
                ok = r.ok;
                if (ok)
                  won[static_cast<std::size_t>(t)].push_back({k, {Kind::put, r.revision, next}});
              }
              if (!ok) ++failures;
            }
          }
        } catch (const StoreError&) {
          ++failures;
        }
      });
    }
  }
  EXPECT_EQ(failures, 0);
  for (const auto& per_thread : won) {
    for (const auto& [k, seen] : per_thread) expected[k].push_back(seen);
  }
  for (auto& [k, v] : expected) {
    std::sort(v.begin(), v.end(),
              [](const KeySeen& a, const KeySeen& b) { return std::get<1>(a) < std::get<1>(b); });
    const WriteResult d = store.erase(k, std::get<1>(v.back()));
    EXPECT_TRUE(d.ok) << "the last winning CAS of " << k << " is not the key's revision";
    v.emplace_back(Kind::erase, d.revision, "");
  }
  return expected;
}

TEST_P(StoreConformance, KeyWatchersSeeThePerKeyOrderUnderConcurrentWriters) {
  const std::vector<std::string> keys = {key("ko.k0"), key("ko.k1"), key("ko.k2")};
  // Two watchers of every key, one of k1 alone, one of k0 and k2 (k1 is written between them).
  const std::vector<std::vector<std::string>> sets = {
      keys, {keys[2], keys[0], keys[1]}, {keys[1]}, {keys[0], keys[2]}};
  std::vector<std::unique_ptr<TestWatch>> watchers;
  for (const auto& set : sets) {
    watchers.push_back(open_key_watch(store(), set));
    ASSERT_TRUE(poll_until(*watchers.back(), [](const TestWatch& t) { return t.caught_up(); }));
    EXPECT_EQ(watchers.back()->caught_up_index(), 0u) << "no watched key exists yet";
  }
  const KeyHistory expected = race_increments(store(), keys, 4, 30);
  ASSERT_FALSE(HasFailure());
  for (std::size_t i = 0; i < watchers.size(); ++i) {
    TestWatch& w = *watchers[i];
    ASSERT_TRUE(poll_until(w,
                           [&](const TestWatch& t) {
                             for (const std::string& k : sets[i]) {
                               if (!t.saw(k, std::get<1>(expected.at(k).back()))) return false;
                             }
                             return true;
                           }))
        << "watcher " << i << " did not see every delete; " << w.live().size() << " live events";
    EXPECT_EQ(stray_event(w, sets[i]), "") << "watcher " << i;
    for (const std::string& k : sets[i]) {
      std::vector<KeySeen> got;
      for (const WatchEvent& e : events_of(w, k)) {
        got.emplace_back(e.kind, e.revision, e.kind == Kind::put ? e.value : "");
      }
      EXPECT_EQ(got.size(), expected.at(k).size()) << "watcher " << i << ", key " << k;
      EXPECT_TRUE(got == expected.at(k))
          << "watcher " << i << " saw key " << k << " in a different order or with gaps";
    }
  }
}

// Checks one watch's stream of `k` against the key's whole write history (revision order):
// the snapshot shows a state the key had (a put of the history, or absent: before the first
// write or right after an erase), and the live events are exactly the writes after that state.
// Returns what is wrong, or "".
std::string check_stream(const TestWatch& w, const std::string& k,
                         const std::vector<KeySeen>& history) {
  std::vector<WatchEvent> snap;
  for (const WatchEvent& e : w.snapshot()) {
    if (e.key == k) snap.push_back(e);
  }
  std::vector<WatchEvent> live;
  for (const WatchEvent& e : w.live()) {
    if (e.key == k) live.push_back(e);
  }
  if (snap.size() > 1) return "the key is twice in the snapshot";
  const auto at = [&](Revision r) {
    return std::find_if(history.begin(), history.end(),
                        [&](const KeySeen& s) { return std::get<1>(s) == r; });
  };
  auto next = history.begin();
  if (!snap.empty()) {
    const auto it = at(snap[0].revision);
    if (it == history.end() || std::get<0>(*it) != Kind::put || std::get<2>(*it) != snap[0].value)
      return "the snapshot shows a state the key never had: " + describe(snap[0]);
    next = it + 1;
  } else if (!live.empty()) {
    next = at(live[0].revision);
    if (next == history.end()) return "an event of a write that never happened";
    if (next != history.begin() && std::get<0>(*(next - 1)) != Kind::erase)
      return "the key was live when the watch opened, but its snapshot omits it";
  } else {
    return "the watch saw nothing of the key";
  }
  if (static_cast<std::size_t>(history.end() - next) != live.size())
    return fmt::format("{} live events, {} writes after the snapshot's state", live.size(),
                       history.end() - next);
  for (const WatchEvent& e : live) {
    const KeySeen want = *next++;
    if (KeySeen{e.kind, e.revision, e.kind == Kind::put ? e.value : ""} != want)
      return "live events do not continue from the snapshot: " + describe(e);
  }
  return "";
}

// A writer creates, updates and deletes one key over and over while watches of it open one after
// the other, so each watch opens around a create, an update or a delete. Every watch's stream
// must continue exactly from the state its snapshot shows and end at the key's final state.
TEST_P(StoreConformance, KeyWatchOpenedWhileTheKeyIsCreatedDeletedAndRecreatedIsConsistent) {
  const std::string k = key("kc.churned");
  const std::string stable = key("kc.stable");
  const WriteResult stable_rev = store().create(stable, "s");
  ASSERT_TRUE(stable_rev.ok);
  constexpr int kWatches = 40;
  constexpr int kMaxCycles = 20'000;
  std::vector<KeySeen> history;  // the writer's, read after join
  std::atomic<int> writes{0};
  std::atomic<bool> writer_done{false};
  std::atomic<int> writer_errors{0};
  Crew crew;
  crew.threads.emplace_back([&] {
    try {
      for (int i = 0; i < kMaxCycles && !crew.stop; ++i) {
        const std::string v1 = fmt::format("c{}", i);
        const std::string v2 = fmt::format("u{}", i);
        const WriteResult c = store().create(k, v1);
        const WriteResult u = c.ok ? store().update(k, v2, c.revision) : WriteResult{};
        const WriteResult d = u.ok ? store().erase(k, u.revision) : WriteResult{};
        if (!d.ok) throw StoreError(StoreErrc::unavailable, "the only writer lost a race");
        history.insert(history.end(), {{Kind::put, c.revision, v1},
                                       {Kind::put, u.revision, v2},
                                       {Kind::erase, d.revision, ""}});
        writes += 3;
      }
    } catch (const StoreError&) {
      ++writer_errors;
    }
    writer_done = true;
  });
  std::vector<std::unique_ptr<TestWatch>> watches;
  for (int i = 0; i < kWatches; ++i) {
    // Let the writer move between two opens (it runs on; this only avoids opening all watches
    // before its first write on a fast store).
    const int seen = writes;
    while (writes == seen && !writer_done) std::this_thread::yield();
    watches.push_back(i % 2 == 0 ? open_key_watch(store(), {k})
                                 : open_key_watch(store(), {stable, k}));
    for (auto& w : watches) drain(*w);  // keep the queues short while the writer runs
  }
  crew.join();
  ASSERT_EQ(writer_errors, 0);
  const auto now = store().get(k);
  const WriteResult last =
      now ? store().update(k, "final", now->revision) : store().create(k, "final");
  ASSERT_TRUE(last.ok);
  history.emplace_back(Kind::put, last.revision, "final");
  for (int i = 0; i < kWatches; ++i) {
    TestWatch& w = *watches[static_cast<std::size_t>(i)];
    ASSERT_TRUE(poll_until(w, [&](const TestWatch& t) { return t.saw(k, last.revision); }))
        << "watch " << i << " did not reach the key's final state";
    EXPECT_EQ(count_caught_up(w), 1u) << "watch " << i;
    EXPECT_EQ(check_stream(w, k, history), "") << "watch " << i;
    if (i % 2 == 1) {  // the stable key: in the snapshot, never live
      EXPECT_EQ(events_of(w, stable).size(), 1u) << "watch " << i;
      EXPECT_TRUE(ends_live_at(w, stable, stable_rev.revision)) << "watch " << i;
    }
  }
  EXPECT_GT(history.size(), static_cast<std::size_t>(kWatches)) << "the writer hardly ran";
}

// 200 key watches opened from four threads at once while a writer changes their keys, then
// closed from four threads at once while it writes again: each catches up, ends at its keys'
// state, and no notify runs after its Watch was destroyed.
TEST_P(StoreConformance, ManyKeyWatchesOpenAndCloseAtOnceWhileKeysChange) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  constexpr int kKeys = 8;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(key(fmt::format("km.k{}", i)));
  struct Probe {
    std::atomic<bool> destroyed{false};
  };
  struct Slot {
    std::vector<std::string> keys;
    std::unique_ptr<Probe> probe = std::make_unique<Probe>();  // outlives the watch
    std::unique_ptr<TestWatch> w;
  };
  std::vector<Slot> slots(kThreads * kPerThread);
  for (std::size_t s = 0; s < slots.size(); ++s) {  // 1 to 3 keys, overlapping between slots
    for (std::size_t j = 0; j <= s % 3; ++j) slots[s].keys.push_back(keys[(s + 3 * j) % kKeys]);
  }
  std::atomic<int> late_callbacks{0};
  std::atomic<int> errors{0};
  // Rewrites the keys (create when absent, else update) until stopped.
  const auto writer = [&](Crew& crew) {
    crew.threads.emplace_back([&] {
      try {
        for (int i = 0; i < 1'000'000 && !crew.stop; ++i) {
          const std::string& k = keys[static_cast<std::size_t>(i % kKeys)];
          const auto e = store().get(k);
          if (!(e ? store().update(k, std::to_string(i), e->revision) : store().create(k, "0")).ok)
            ++errors;
        }
      } catch (const StoreError&) {
        ++errors;
      }
    });
  };
  // Runs `f(slot)` for every slot, kPerThread slots per thread, the threads at once.
  const auto in_parallel = [&](const std::function<void(Slot&)>& f) {
    Crew workers;
    for (int t = 0; t < kThreads; ++t) {
      workers.threads.emplace_back([&, t] {
        try {
          for (int i = 0; i < kPerThread; ++i)
            f(slots[static_cast<std::size_t>(t * kPerThread + i)]);
        } catch (const StoreError&) {
          ++errors;
        }
      });
    }
  };
  {
    Crew crew;
    writer(crew);
    in_parallel([&](Slot& slot) {
      slot.w = std::make_unique<TestWatch>();
      WatchOptions options;
      options.notify = [signal = slot.w->signal, probe = slot.probe.get(), &late_callbacks] {
        if (probe->destroyed.load()) ++late_callbacks;
        signal->notify();
      };
      slot.w->watch = store().watch_keys(slot.keys, std::move(options));
    });
  }
  ASSERT_EQ(errors, 0);
  std::map<std::string, Revision> final_state;
  for (const std::string& k : keys) {
    const auto e = store().get(k);
    ASSERT_TRUE(e.has_value()) << k;
    final_state[k] = e->revision;
  }
  for (std::size_t s = 0; s < slots.size(); ++s) {
    TestWatch& w = *slots[s].w;
    ASSERT_TRUE(poll_until(w,
                           [&](const TestWatch& t) {
                             for (const std::string& k : slots[s].keys) {
                               if (!ends_live_at(t, k, final_state[k])) return false;
                             }
                             return true;
                           }))
        << "watch " << s << " did not reach its keys' state; broken: " << w.broken_message;
    EXPECT_EQ(count_caught_up(w), 1u) << "watch " << s;
    EXPECT_EQ(stray_event(w, slots[s].keys), "") << "watch " << s;
  }
  {
    Crew crew;
    writer(crew);
    in_parallel([&](Slot& slot) {
      slot.w->watch.reset();
      slot.probe->destroyed = true;
    });
  }
  EXPECT_EQ(late_callbacks, 0) << "a notify callback ran after its Watch was destroyed";
  EXPECT_EQ(errors, 0);
}

TEST_P(StoreConformance, BrokenKeyWatchIsReportedNotSilent) {
  if (!factory().break_watches) GTEST_SKIP() << "the factory cannot break watches";
  const std::string k = key("kb.x");
  auto w = open_key_watch(store(), {k});
  const WriteResult c = store().create(k, "1");
  ASSERT_TRUE(c.ok);
  ASSERT_TRUE(poll_until(*w, [&](const TestWatch& t) { return t.saw(k, c.revision); }));
  factory().break_watches(store());
  EXPECT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.broken; }))
      << "a broken key watch must make poll throw watch_broken";
  std::vector<WatchEvent> more;
  expect_store_error(
      StoreErrc::watch_broken, [&] { w->watch->poll(more, 16); },
      "poll after the break (a broken watch stays broken)");
}

// A key watch left unpolled breaks once more than max_pending events wait, after returning
// the events queued before the break (a prefix of the key's writes).
TEST_P(StoreConformance, KeyWatchOverflowBreaksAfterTheQueuedEvents) {
  const std::string k = key("kq.x");
  constexpr std::size_t kMaxPending = 4;
  constexpr int kWrites = 20;
  auto w = open_key_watch(store(), {k}, kMaxPending);
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  const std::uint64_t seen = w->signal->count();
  std::vector<Revision> revisions;
  WriteResult r = store().create(k, "0");
  for (int i = 1; r.ok && i <= kWrites; ++i) {
    revisions.push_back(r.revision);
    if (i < kWrites) r = store().update(k, std::to_string(i), r.revision);
  }
  ASSERT_EQ(revisions.size(), static_cast<std::size_t>(kWrites));
  // Not polling yet: wait until the watch has been told of the writes (or of its break). A
  // backend that coalesces callbacks lets the wait run to its bound, which is only slower.
  const auto deadline = std::chrono::steady_clock::now() + kWaitTimeout;
  for (std::uint64_t n = seen; n < seen + kMaxPending + 1 && w->signal->wait_beyond(n, deadline);) {
    n = w->signal->count();
  }
  drain(*w);
  EXPECT_TRUE(w->broken) << kWrites << " unpolled events did not break a watch of max_pending "
                         << kMaxPending;
  const std::vector<WatchEvent> live = w->live();
  EXPECT_LE(live.size(), kMaxPending);
  for (std::size_t i = 0; i < live.size() && i < revisions.size(); ++i) {
    EXPECT_EQ(live[i].revision, revisions[i]) << "event " << i << " before the break";
  }
}

TEST_P(StoreConformance, KeyWatchRejectsInvalidKeySets) {
  std::vector<std::string> too_many;
  for (std::size_t i = 0; i <= kMaxWatchKeys; ++i) too_many.push_back(key(fmt::format("kr.{}", i)));
  const std::vector<std::vector<std::string>> bad = {{},
                                                     too_many,
                                                     {key("kr.a"), key("kr.b"), key("kr.a")},
                                                     {key("kr.a"), key("kr..b")},
                                                     {key("kr.a.")},
                                                     {""},
                                                     {key("kr.*")},
                                                     {std::string(kMaxKeyBytes + 1, 'a')}};
  for (std::size_t i = 0; i < bad.size(); ++i) {
    expect_store_error(
        StoreErrc::invalid_argument, [&] { store().watch_keys(bad[i], WatchOptions{}); },
        fmt::format("key set {} ({} keys)", i, bad[i].size()));
  }
  WatchOptions zero;
  zero.max_pending = 0;
  const std::vector<std::string> one = {key("kr.a")};
  expect_store_error(
      StoreErrc::invalid_argument, [&] { store().watch_keys(one, zero); }, "max_pending 0");
  too_many.pop_back();  // exactly kMaxWatchKeys is allowed
  auto w = open_key_watch(store(), too_many);
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  const WriteResult c = store().create(too_many.back(), "v");
  ASSERT_TRUE(c.ok);
  EXPECT_TRUE(
      poll_until(*w, [&](const TestWatch& t) { return t.saw(too_many.back(), c.revision); }));
}

// --- create_many
// ----------------------------------------------------------------------------------

std::vector<CreateRequest> requests_of(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::vector<CreateRequest> out;
  for (const auto& [k, v] : kv) out.push_back(CreateRequest{k, v});
  return out;
}

TEST_P(StoreConformance, CreateManyAnswersEveryRequestInOrder) {
  const std::string existing = key("cm.existing");
  const std::string deleted = key("cm.deleted");
  const WriteResult e = store().create(existing, "old");
  const WriteResult d0 = store().create(deleted, "old");
  ASSERT_TRUE(e.ok && d0.ok);
  const WriteResult d = store().erase(deleted, d0.revision);
  ASSERT_TRUE(d.ok);
  const std::vector<std::pair<std::string, std::string>> kv = {
      {key("cm.n1"), "first"}, {existing, "new"},        {deleted, "again"},
      {key("cm.n2"), "two"},   {key("cm.n1"), "second"}, {key("cm.n3"), ""}};
  const std::vector<CreateOutcome> out = store().create_many(requests_of(kv));
  ASSERT_EQ(out.size(), kv.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_FALSE(out[i].error.has_value()) << "request " << i << ": " << to_string(*out[i].error);
  }
  const std::vector<bool> want_ok = {true, false, true, true, false, true};
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].result.ok, want_ok[i]) << "request " << i << " (" << kv[i].first << ")";
    if (out[i].result.ok) {
      EXPECT_GT(out[i].result.revision, 0u) << "request " << i;
    }
  }
  expect_conflict(out[1].result, e.revision, "create_many of an existing key");
  expect_conflict(out[4].result, out[0].result.revision, "the second request on one key");
  EXPECT_GT(out[2].result.revision, d.revision) << "a re-created key's revision passes the delete";
  const std::map<std::string, std::pair<std::string, Revision>> want = {
      {key("cm.n1"), {"first", out[0].result.revision}},
      {existing, {"old", e.revision}},
      {deleted, {"again", out[2].result.revision}},
      {key("cm.n2"), {"two", out[3].result.revision}},
      {key("cm.n3"), {"", out[5].result.revision}}};
  std::map<std::string, std::pair<std::string, Revision>> got;
  for (const Entry& entry : store().list(key("cm."))) {
    got[entry.key] = {entry.value, entry.revision};
  }
  EXPECT_EQ(got, want) << "the batch wrote what its outcomes say, and nothing else";
}

TEST_P(StoreConformance, CreateManyOfThousandsOfKeysCreatesEach) {
  constexpr std::size_t kKeys = 5000;
  std::vector<std::pair<std::string, std::string>> kv;
  for (std::size_t i = 0; i < kKeys; ++i) {
    kv.emplace_back(key(fmt::format("cb.k{:05}", i)), fmt::format("v{}", i));
  }
  const std::vector<CreateOutcome> out = store().create_many(requests_of(kv));
  ASSERT_EQ(out.size(), kKeys);
  std::set<Revision> revisions;
  for (std::size_t i = 0; i < kKeys; ++i) {
    ASSERT_FALSE(out[i].error.has_value()) << "request " << i << ": " << to_string(*out[i].error);
    ASSERT_TRUE(out[i].result.ok) << "request " << i;
    EXPECT_GT(out[i].result.revision, 0u);
    revisions.insert(out[i].result.revision);
  }
  EXPECT_EQ(revisions.size(), kKeys) << "two creates got the same revision";
  const std::vector<Entry> listed = store().list(key("cb."));
  ASSERT_EQ(listed.size(), kKeys);
  for (std::size_t i = 0; i < kKeys; ++i) {  // kv is sorted by key, as list is
    EXPECT_EQ(listed[i].key, kv[i].first);
    EXPECT_EQ(listed[i].value, kv[i].second);
    EXPECT_EQ(listed[i].revision, out[i].result.revision) << listed[i].key;
  }
}

// Four threads create the same keys in batches of different orders: each key is created once,
// by the request whose outcome says so.
TEST_P(StoreConformance, ConcurrentCreateManyBatchesCreateEachKeyOnce) {
  constexpr int kThreads = 4;
  constexpr std::size_t kKeys = 300;
  std::vector<std::vector<CreateOutcome>> outcomes(kThreads);
  std::vector<std::vector<std::pair<std::string, std::string>>> batches(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (std::size_t i = 0; i < kKeys; ++i) {
      const std::size_t k = t % 2 == 0 ? i : kKeys - 1 - i;
      batches[static_cast<std::size_t>(t)].emplace_back(key(fmt::format("cc.k{}", k)),
                                                        fmt::format("t{}", t));
    }
  }
  std::atomic<int> errors{0};
  {
    Crew crew;
    for (int t = 0; t < kThreads; ++t) {
      crew.threads.emplace_back([&, t] {
        try {
          const auto u = static_cast<std::size_t>(t);
          outcomes[u] = store().create_many(requests_of(batches[u]));
        } catch (const StoreError&) {
          ++errors;
        }
      });
    }
  }
  ASSERT_EQ(errors, 0);
  std::map<std::string, std::pair<std::string, Revision>> winners;
  for (int t = 0; t < kThreads; ++t) {
    const auto u = static_cast<std::size_t>(t);
    ASSERT_EQ(outcomes[u].size(), kKeys);
    for (std::size_t i = 0; i < kKeys; ++i) {
      ASSERT_FALSE(outcomes[u][i].error.has_value()) << "thread " << t << ", request " << i;
      if (!outcomes[u][i].result.ok) continue;
      const auto& [k, v] = batches[u][i];
      EXPECT_TRUE(winners.emplace(k, std::make_pair(v, outcomes[u][i].result.revision)).second)
          << k << " was created twice";
    }
  }
  EXPECT_EQ(winners.size(), kKeys);
  for (const Entry& e : store().list(key("cc."))) {
    const auto it = winners.find(e.key);
    ASSERT_NE(it, winners.end()) << e.key;
    EXPECT_EQ(e.value, it->second.first) << e.key;
    EXPECT_EQ(e.revision, it->second.second) << e.key;
  }
}

TEST_P(StoreConformance, CreateManyRejectsBadBatchesBeforeWritingAnything) {
  EXPECT_TRUE(store().create_many({}).empty());
  const std::string a = key("cr.a");
  const std::string b = key("cr.b");
  const std::string too_big(kMaxValueBytes + 1, 'x');
  const std::vector<std::vector<std::pair<std::string, std::string>>> bad = {
      {{a, "1"}, {b, "2"}, {key("cr..c"), "3"}},
      {{a, "1"}, {key("cr.c."), "2"}, {b, "3"}},
      {{a, "1"}, {b, too_big}},
      {{a, "1"}, {"", "2"}}};
  for (std::size_t i = 0; i < bad.size(); ++i) {
    expect_store_error(
        StoreErrc::invalid_argument, [&] { store().create_many(requests_of(bad[i])); },
        fmt::format("batch {}", i));
  }
  std::vector<CreateRequest> over(kMaxBatchRequests + 1, CreateRequest{a, "v"});
  expect_store_error(
      StoreErrc::invalid_argument, [&] { store().create_many(over); },
      "a batch of kMaxBatchRequests + 1");
  EXPECT_FALSE(store().get(a).has_value()) << "a rejected batch wrote its first request";
  EXPECT_FALSE(store().get(b).has_value()) << "a rejected batch wrote a request";
  EXPECT_TRUE(store().list(key("cr.")).empty());
}

// --- concurrency: CAS race
// --------------------------------------------------------------------------

TEST_P(StoreConformance, CasRaceOfEightThreadsCountsExactly) {
  const std::string k = key("counter");
  ASSERT_TRUE(store().create(k, "0").ok);
  constexpr int kThreads = 8;
  constexpr int kIncrements = 500;
  constexpr std::uint64_t kMaxAttempts = 1'000'000;
  struct Tally {
    std::uint64_t attempts = 0;
    std::uint64_t wins = 0;
    std::uint64_t losses = 0;
    std::vector<Revision> revisions;
    std::string error;
  };
  std::vector<Tally> tallies(kThreads);
  {
    Crew crew;
    for (int t = 0; t < kThreads; ++t) {
      crew.threads.emplace_back([&, t] {
        Tally& tally = tallies[static_cast<std::size_t>(t)];
        try {
          while (tally.wins < kIncrements && tally.attempts < kMaxAttempts) {
            ++tally.attempts;
            const auto e = store().get(k);
            if (!e) {
              tally.error = "the counter disappeared";
              return;
            }
            const WriteResult r =
                store().update(k, std::to_string(std::stoll(e->value) + 1), e->revision);
            if (r.ok) {
              ++tally.wins;
              tally.revisions.push_back(r.revision);
            } else {
              ++tally.losses;
            }
          }
        } catch (const StoreError& err) {
          tally.error = err.what();
        }
      });
    }
  }
  std::uint64_t wins = 0;
  std::set<Revision> revisions;
  for (std::size_t t = 0; t < tallies.size(); ++t) {
    const Tally& tally = tallies[t];
    EXPECT_EQ(tally.error, "") << "thread " << t;
    EXPECT_EQ(tally.wins, static_cast<std::uint64_t>(kIncrements)) << "thread " << t;
    EXPECT_EQ(tally.wins + tally.losses, tally.attempts) << "thread " << t;
    EXPECT_TRUE(std::is_sorted(tally.revisions.begin(), tally.revisions.end())) << "thread " << t;
    wins += tally.wins;
    revisions.insert(tally.revisions.begin(), tally.revisions.end());
  }
  EXPECT_EQ(wins, static_cast<std::uint64_t>(kThreads * kIncrements));
  EXPECT_EQ(revisions.size(), wins) << "two winning CASes got the same revision";
  const auto e = store().get(k);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->value, std::to_string(kThreads * kIncrements))
      << "a CAS reported as won did not land, or a lost one did";
  ASSERT_FALSE(revisions.empty());
  EXPECT_EQ(e->revision, *revisions.rbegin());
}

// --- limits and validation
// --------------------------------------------------------------------------

TEST_P(StoreConformance, ValuesUpToTheLimitRoundTrip) {
  std::string big(kMaxValueBytes, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  const WriteResult c = store().create(key("big"), big);
  ASSERT_TRUE(c.ok);
  auto e = store().get(key("big"));
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->value == big) << "a value of kMaxValueBytes did not round-trip";
  std::string big2(kMaxValueBytes, 'z');
  const WriteResult u = store().update(key("big"), big2, c.revision);
  ASSERT_TRUE(u.ok);
  e = store().get(key("big"));
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->value == big2);
}

TEST_P(StoreConformance, ValuesOverTheLimitAreRejected) {
  const std::string too_big(kMaxValueBytes + 1, 'x');
  expect_store_error(
      StoreErrc::invalid_argument, [&] { store().create(key("big"), too_big); },
      "create with kMaxValueBytes + 1");
  EXPECT_FALSE(store().get(key("big")).has_value());
  const WriteResult c = store().create(key("big"), "small");
  ASSERT_TRUE(c.ok);
  expect_store_error(
      StoreErrc::invalid_argument, [&] { store().update(key("big"), too_big, c.revision); },
      "update with kMaxValueBytes + 1");
  const auto e = store().get(key("big"));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->value, "small");
  EXPECT_EQ(e->revision, c.revision);
}

TEST_P(StoreConformance, ValuesAreArbitraryBytes) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  ASSERT_TRUE(store().create(key("bin.all"), bytes).ok);
  ASSERT_TRUE(store().create(key("bin.empty"), "").ok);
  const auto all = store().get(key("bin.all"));
  ASSERT_TRUE(all.has_value());
  EXPECT_TRUE(all->value == bytes);
  const auto empty = store().get(key("bin.empty"));
  ASSERT_TRUE(empty.has_value()) << "an empty value is a live key, not a delete";
  EXPECT_EQ(empty->value, "");
  auto w = open_watch(store(), key("bin."));
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  const std::vector<WatchEvent> snap = w->snapshot();
  ASSERT_EQ(snap.size(), 2u);
  for (const WatchEvent& e : snap) {
    EXPECT_EQ(e.kind, Kind::put);
    EXPECT_TRUE(e.value == (e.key == key("bin.all") ? bytes : std::string())) << e.key;
  }
  EXPECT_EQ(store().list(key("bin.")).size(), 2u);
}

TEST_P(StoreConformance, InvalidKeysAreRejected) {
  const std::vector<std::string> bad = {"",
                                        ".",
                                        "a.",
                                        ".a",
                                        "a..b",
                                        "a b",
                                        "a*b",
                                        "a>b",
                                        "a:b",
                                        "a,b",
                                        "a\tb",
                                        std::string("a\0b", 3),
                                        "caf\xc3\xa9",
                                        key("x..y"),
                                        key("x."),
                                        std::string(kMaxKeyBytes + 1, 'a')};
  for (const std::string& k : bad) {
    const std::string what = fmt::format("key '{}' ({} bytes)", k.substr(0, 40), k.size());
    expect_store_error(
        StoreErrc::invalid_argument, [&] { store().create(k, "v"); }, "create of " + what);
    expect_store_error(
        StoreErrc::invalid_argument, [&] { store().update(k, "v", 1); }, "update of " + what);
    expect_store_error(
        StoreErrc::invalid_argument, [&] { store().erase(k, 1); }, "erase of " + what);
    expect_store_error(
        StoreErrc::invalid_argument, [&] { store().get(k); }, "get of " + what);
  }
}

TEST_P(StoreConformance, KeysOfTheFullAlphabetAndMaximumLengthAreAccepted) {
  const std::string alphabet =
      key("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-=/.t");
  const WriteResult a = store().create(alphabet, "v");
  ASSERT_TRUE(a.ok);
  const auto e = store().get(alphabet);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->revision, a.revision);

  std::string longest = key("long.");
  longest.append(kMaxKeyBytes - longest.size(), 'k');
  ASSERT_EQ(longest.size(), kMaxKeyBytes);
  const WriteResult l = store().create(longest, "v");
  ASSERT_TRUE(l.ok);
  EXPECT_TRUE(store().get(longest).has_value());
  expect_store_error(
      StoreErrc::invalid_argument, [&] { store().create(longest + "k", "v"); },
      "create of a key of kMaxKeyBytes + 1");
}

TEST_P(StoreConformance, InvalidPrefixesAreRejected) {
  // "a.." is "a." + '.': not a valid key followed by '.', and "a..>" is no valid NATS filter.
  const std::vector<std::string> bad = {"a",
                                        "a.b",
                                        ".",
                                        "..",
                                        "a..",
                                        ".a.",
                                        "a b.",
                                        "a*.",
                                        "a>.",
                                        key("x"),
                                        std::string(kMaxKeyBytes, 'a') + "."};
  for (const std::string& p : bad) {
    const std::string what = fmt::format("prefix '{}' ({} bytes)", p.substr(0, 40), p.size());
    expect_store_error(
        StoreErrc::invalid_argument, [&] { store().list(p); }, "list of " + what);
    expect_store_error(
        StoreErrc::invalid_argument, [&] { store().watch(p, WatchOptions{}); }, "watch of " + what);
  }
  EXPECT_NO_THROW(store().list(ns()));
}

}  // namespace
}  // namespace etlc::testing
