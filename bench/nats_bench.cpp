// nats_bench: NatsStore latency and throughput on real nats-server processes it starts itself
// (a single node, then a 3-node cluster with an R3 bucket), all on loopback.
//
// Measures, per topology:
//  * latency (median, p99, max) of each primitive: create of a new key, create over a delete
//    marker, get, update (CAS with a revision the store handed out), update with a guard read
//    (a revision the store never saw), erase (guarded delete);
//  * watch notification latency: from just before update() on connection A to the notify
//    callback of a watch on connection B; the same for a key watch (watch_keys) of the key;
//  * the cost of opening a key watch of 1 and of 8 keys (until its caught_up is polled);
//  * list of 1000 keys;
//  * sequential CAS throughput from one thread, and pipelined CAS throughput from T threads
//    sharing the store's one connection (each thread CAS-es its own key).
//
// Usage: nats_bench [--ops N] [--value-bytes B] [--topology single|cluster|both]
// Prints a Markdown table (docs/performance.md records one run and the command).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etlc/nats_store.hpp"
#include "support/nats_server.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using etlc::NatsStore;
using etlc::NatsStoreOptions;
using etlc::Revision;

struct Args {
  int ops = 2000;
  std::size_t value_bytes = 64;
  std::string topology = "both";
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--ops") {
      a.ops = std::max(10, std::atoi(next().c_str()));
    } else if (k == "--value-bytes") {
      a.value_bytes = static_cast<std::size_t>(std::max(1, std::atoi(next().c_str())));
    } else if (k == "--topology") {
      a.topology = next();
    } else {
      std::fprintf(stderr,
                   "usage: nats_bench [--ops N] [--value-bytes B] "
                   "[--topology single|cluster|both]\n");
      std::exit(2);
    }
  }
  return a;
}

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

struct Stats {
  double median = 0, p99 = 0, max = 0;
};

Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  s.p99 = v[std::min(v.size() - 1, (v.size() * 99) / 100)];
  s.max = v.back();
  return s;
}

void row(const std::string& topology, const std::string& what, const Stats& s) {
  std::printf("| %s | %s | %.1f | %.1f | %.1f |\n", topology.c_str(), what.c_str(), s.median, s.p99,
              s.max);
}

NatsStoreOptions options(std::vector<std::string> servers, const std::string& bucket,
                         int replicas) {
  NatsStoreOptions o;
  o.servers = std::move(servers);
  o.bucket = bucket;
  o.replicas = replicas;
  o.connect_timeout_ms = 15'000;
  o.op_timeout_ms = 5'000;
  o.probe_on_open = false;
  return o;
}

// Times `op(i)` for i in [0, n).
std::vector<double> time_each(int n, const std::function<void(int)>& op) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    op(i);
    out.push_back(micros(Clock::now() - t0));
  }
  return out;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "unexpected conflict in %s\n", what);
    std::exit(1);
  }
}

// A notify callback a thread can wait on.
struct Notified {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t count = 0;
  Clock::time_point last;
  void notify() {
    std::lock_guard lock(mu);
    ++count;
    last = Clock::now();
    cv.notify_all();
  }
  std::uint64_t seen() {
    std::lock_guard lock(mu);
    return count;
  }
  bool wait_beyond(std::uint64_t seen) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return count > seen; });
  }
};

// From just before a.update() to the notify callback of b's key watch of that key.
Stats key_watch_latency(NatsStore& a, NatsStore& b, const std::string& value, int n) {
  auto notified = std::make_shared<Notified>();
  etlc::WatchOptions wo;
  wo.notify = [notified] { notified->notify(); };
  wo.latest_only = true;
  Revision rev = a.create("kw.k", value).revision;
  auto watch = b.watch_keys(std::vector<std::string>{"kw.k"}, wo);
  std::vector<etlc::WatchEvent> events;
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    events.clear();
    const std::uint64_t before = notified->seen();
    watch->poll(events, 1 << 20);
    auto t0 = Clock::now();
    auto r = a.update("kw.k", value, rev);
    check(r.ok, "key-watched update");
    rev = r.revision;
    for (;;) {  // the notify that delivered this revision
      if (!notified->wait_beyond(before)) check(false, "key watch event missing");
      events.clear();
      watch->poll(events, 1 << 20);
      if (!events.empty() && events.back().revision == rev) break;
    }
    std::lock_guard lock(notified->mu);
    out.push_back(micros(notified->last - t0));
  }
  return summarize(out);
}

// watch_keys of `keys` keys until its caught_up event is polled, `rounds` times.
Stats key_watch_open(NatsStore& store, int keys, int rounds) {
  std::vector<std::string> names;
  for (int k = 0; k < keys; ++k) names.push_back("kwo.k" + std::to_string(k));
  for (const auto& k : names) store.create(k, "v");
  std::vector<double> out;
  for (int i = 0; i < rounds; ++i) {
    auto notified = std::make_shared<Notified>();
    etlc::WatchOptions wo;
    wo.notify = [notified] { notified->notify(); };
    auto t0 = Clock::now();
    auto watch = store.watch_keys(names, wo);
    std::vector<etlc::WatchEvent> events;
    while (events.empty() || events.back().kind != etlc::WatchEvent::Kind::caught_up) {
      const std::uint64_t seen = notified->seen();
      if (watch->poll(events, 1 << 20) == 0 && !notified->wait_beyond(seen)) {
        check(false, "key watch never caught up");
      }
    }
    out.push_back(micros(Clock::now() - t0));
  }
  return summarize(out);
}

void run(const std::string& topology, const std::vector<std::string>& servers, int replicas,
         const Args& args) {
  const std::string bucket = "bench_" + topology;
  NatsStore a(options(servers, bucket, replicas));
  NatsStore b(options(servers, bucket, replicas));  // a second connection: watcher, cold reader
  const std::string value(args.value_bytes, 'v');
  const int n = args.ops;

  // Warm-up.
  for (int i = 0; i < 200; ++i) check(a.create("warm.k" + std::to_string(i), value).ok, "warm");

  std::vector<Revision> revs(static_cast<std::size_t>(n));
  auto create = time_each(n, [&](int i) {
    auto r = a.create("p.k" + std::to_string(i), value);
    check(r.ok, "create");
    revs[static_cast<std::size_t>(i)] = r.revision;
  });
  auto get = time_each(n, [&](int i) {
    if (!a.get("p.k" + std::to_string(i))) check(false, "get");
  });
  auto update = time_each(n, [&](int i) {
    auto r = a.update("p.k" + std::to_string(i), value, revs[static_cast<std::size_t>(i)]);
    check(r.ok, "update");
    revs[static_cast<std::size_t>(i)] = r.revision;
  });
  // b never saw these revisions: each update first reads the key from the stream leader.
  auto update_guarded = time_each(n, [&](int i) {
    auto r = b.update("p.k" + std::to_string(i), value, revs[static_cast<std::size_t>(i)]);
    check(r.ok, "guarded update");
    revs[static_cast<std::size_t>(i)] = r.revision;
  });
  auto erase = time_each(n, [&](int i) {
    check(b.erase("p.k" + std::to_string(i), revs[static_cast<std::size_t>(i)]).ok, "erase");
  });
  // Half the keys are re-created by b, which wrote their delete markers (2 round trips), half by
  // a, which has to read the marker first (3 round trips).
  auto recreate_known = time_each(n / 2, [&](int i) {
    check(b.create("p.k" + std::to_string(i), value).ok, "create over a known delete marker");
  });
  auto recreate_unknown = time_each(n - n / 2, [&](int i) {
    check(a.create("p.k" + std::to_string(n / 2 + i), value).ok,
          "create over an unknown delete marker");
  });

  // list of the n live keys p.k0 .. p.k<n-1>.
  std::vector<double> list;
  for (int i = 0; i < 20; ++i) {
    auto t0 = Clock::now();
    auto entries = a.list("p.");
    list.push_back(micros(Clock::now() - t0));
    if (entries.size() != static_cast<std::size_t>(n)) check(false, "list size");
  }

  // Watch notification: writer a, watcher b (another connection).
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<std::int64_t> notified_ns{0};
  std::atomic<std::uint64_t> notified{0};
  etlc::WatchOptions wo;
  wo.notify = [&] {
    notified_ns.store(Clock::now().time_since_epoch().count());
    notified.fetch_add(1);
    std::lock_guard lock(mu);
    cv.notify_all();
  };
  auto watch = b.watch("w.", wo);
  std::vector<etlc::WatchEvent> events;
  auto drain = [&] {
    events.clear();
    watch->poll(events, 1 << 20);
  };
  {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return notified.load() > 0; });
  }
  drain();
  auto wr = a.create("w.k", value);
  Revision wrev = wr.revision;
  std::vector<double> watch_latency;
  for (int i = 0; i < n; ++i) {
    std::uint64_t before = notified.load();
    auto t0 = Clock::now();
    auto r = a.update("w.k", value, wrev);
    check(r.ok, "watched update");
    wrev = r.revision;
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return notified.load() > before; })) {
      std::fprintf(stderr, "watch event missing\n");
      std::exit(1);
    }
    lock.unlock();
    Clock::time_point t1{Clock::duration(notified_ns.load())};
    watch_latency.push_back(micros(t1 - t0));
    drain();
  }

  watch.reset();
  const Stats key_watch = key_watch_latency(a, b, value, n);
  const Stats open1 = key_watch_open(b, 1, 200);
  const Stats open8 = key_watch_open(b, 8, 200);

  // Sequential CAS throughput (one thread, one key).
  auto seq = a.create("t.seq", value);
  Revision srev = seq.revision;
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto r = a.update("t.seq", value, srev);
    check(r.ok, "sequential CAS");
    srev = r.revision;
  }
  double seq_ops = n / std::chrono::duration<double>(Clock::now() - t0).count();

  row(topology, "create (new key)", summarize(create));
  row(topology, "create over a delete marker it wrote", summarize(recreate_known));
  row(topology, "create over a delete marker it never saw", summarize(recreate_unknown));
  row(topology, "get (stream leader)", summarize(get));
  row(topology, "update (CAS, known revision)", summarize(update));
  row(topology, "update (CAS + guard read)", summarize(update_guarded));
  row(topology, "erase (guarded delete)", summarize(erase));
  row(topology, "watch notify (A update -> B callback)", summarize(watch_latency));
  row(topology, "key watch notify (A update -> B callback)", key_watch);
  row(topology, "open key watch, 1 key (until caught_up)", open1);
  row(topology, "open key watch, 8 keys (until caught_up)", open8);
  row(topology, "list " + std::to_string(n) + " keys", summarize(list));
  std::printf("| %s | sequential CAS, 1 thread | %.0f ops/s | | |\n", topology.c_str(), seq_ops);

  // Pipelined CAS: T threads on the one connection, each on its own key.
  for (int threads : {4, 16}) {
    std::vector<std::thread> ts;
    std::atomic<int> failures{0};
    const int per_thread = std::max(1, n / 2);
    auto start = Clock::now();
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        try {
          std::string k = "t.p" + std::to_string(threads) + "." + std::to_string(t);
          auto c = a.create(k, value);
          Revision r = c.revision;
          for (int i = 0; i < per_thread; ++i) {
            auto u = a.update(k, value, r);
            if (!u.ok) {
              ++failures;
              return;
            }
            r = u.revision;
          }
        } catch (const std::exception& e) {
          std::fprintf(stderr, "pipelined CAS: %s\n", e.what());
          ++failures;
        }
      });
    }
    for (auto& th : ts) th.join();
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    if (failures > 0) check(false, "pipelined CAS");
    std::printf("| %s | pipelined CAS, %d threads, 1 connection | %.0f ops/s | | |\n",
                topology.c_str(), threads, threads * per_thread / secs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse(argc, argv);
  std::printf("NatsStore on loopback: %d operations per row, %zu-byte values\n\n", args.ops,
              args.value_bytes);
  std::printf("| topology | operation | median µs | p99 µs | max µs |\n");
  std::printf("|---|---|---|---|---|\n");
  try {
    if (args.topology == "single" || args.topology == "both") {
      etlc::testing::NatsServer server;
      run("single", {server.url()}, 1, args);
    }
    if (args.topology == "cluster" || args.topology == "both") {
      etlc::testing::NatsCluster cluster(3);
      run("R3", cluster.urls(), 3, args);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nats_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
