// The KvStore conformance cases (see conformance.hpp). No INSTANTIATE here: each backend's test
// executable compiles this file with its own instantiation.
#include <algorithm>
#include <atomic>
#include <cstdint>
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
