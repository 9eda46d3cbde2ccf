#include "counting_store.hpp"

#include <chrono>

#include "core/keys.hpp"

namespace etlc::bench {

namespace {
std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void CountingStore::Tracer::add(TraceEntry::Kind kind, std::string_view key, std::int64_t start,
                                std::int64_t end) {
  std::lock_guard lk(mu);
  if (entries.size() < max_entries)
    entries.push_back(TraceEntry{kind, std::string(key), start, end});
}

void CountingStore::enable_trace(std::size_t max_entries) {
  std::lock_guard lk(counters_->tracer.mu);
  counters_->tracer.max_entries = max_entries;
  counters_->tracer.entries.reserve(std::min<std::size_t>(max_entries, 1 << 16));
  counters_->tracer.on = true;
}

std::vector<TraceEntry> CountingStore::trace() const {
  std::lock_guard lk(counters_->tracer.mu);
  return counters_->tracer.entries;
}

template <typename Call>
auto CountingStore::traced(TraceEntry::Kind kind, std::string_view key, Call&& call)
    -> decltype(call()) {
  if (!counters_->tracer.on.load(std::memory_order_relaxed)) return call();
  const std::int64_t start = steady_ns();
  auto out = call();
  counters_->tracer.add(kind, key, start, steady_ns());
  return out;
}

Family family_of(std::string_view key) {
  auto starts = [&](std::string_view p) { return key.substr(0, p.size()) == p; };
  if (starts(core::kJobPrefix)) return Family::job;
  if (starts(core::kMemberPrefix)) return Family::member;
  if (starts(core::kLeasePrefix)) return Family::lease;
  if (starts(core::kAssignPrefix)) return Family::assign;
  if (starts(core::kSplitPrefix)) return Family::split;
  if (starts(core::kSpecPrefix)) return Family::spec;
  if (starts(core::kCordonPrefix)) return Family::cordon;
  return Family::other;
}

std::string_view to_string(Family f) {
  static constexpr std::array<std::string_view, kFamilies> kNames = {
      "job", "member", "lease", "assign", "split", "spec", "cordon", "other"};
  return kNames[static_cast<std::size_t>(f)];
}

std::uint64_t StoreCounts::total_writes() const {
  std::uint64_t n = 0;
  for (auto w : writes) n += w;
  return n;
}

std::uint64_t StoreCounts::total_watch_events() const {
  std::uint64_t n = 0;
  for (auto w : watch_events) n += w;
  return n;
}

StoreCounts StoreCounts::operator-(const StoreCounts& e) const {
  StoreCounts d;
  for (std::size_t i = 0; i < kFamilies; ++i) {
    d.writes[i] = writes[i] - e.writes[i];
    d.writes_ok[i] = writes_ok[i] - e.writes_ok[i];
    d.watch_events[i] = watch_events[i] - e.watch_events[i];
  }
  d.gets = gets - e.gets;
  d.lists = lists - e.lists;
  d.watches_opened = watches_opened - e.watches_opened;
  return d;
}

// Counts the events poll() hands to the member (the snapshot included: it is traffic too).
class CountingWatch final : public Watch {
 public:
  CountingWatch(std::unique_ptr<Watch> inner, std::shared_ptr<CountingStore::Counters> counters)
      : inner_(std::move(inner)), counters_(std::move(counters)) {}

  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) override {
    const std::size_t first = out.size();
    const std::size_t n = inner_->poll(out, max_events);
    const bool tracing = counters_->tracer.on.load(std::memory_order_relaxed);
    const std::int64_t at = tracing ? steady_ns() : 0;
    for (std::size_t i = first; i < out.size(); ++i) {
      if (out[i].kind == WatchEvent::Kind::caught_up) continue;
      if (tracing) {
        counters_->tracer.add(out[i].kind == WatchEvent::Kind::put ? TraceEntry::Kind::watch_put
                                                                   : TraceEntry::Kind::watch_erase,
                              out[i].key, at, at);
      }
      counters_->watch_events[static_cast<std::size_t>(family_of(out[i].key))].fetch_add(
          1, std::memory_order_relaxed);
    }
    return n;
  }

 private:
  std::unique_ptr<Watch> inner_;
  std::shared_ptr<CountingStore::Counters> counters_;
};

CountingStore::CountingStore(std::shared_ptr<KvStore> inner)
    : KvStoreWrapper(std::move(inner)), counters_(std::make_shared<Counters>()) {}

WriteResult CountingStore::counted(WriteOp op, std::string_view key, std::string_view value,
                                   WriteResult r) {
  const auto f = static_cast<std::size_t>(family_of(key));
  counters_->writes[f].fetch_add(1, std::memory_order_relaxed);
  if (r.ok) {
    counters_->writes_ok[f].fetch_add(1, std::memory_order_relaxed);
    if (observer_) observer_(op, key, value, r.revision);
  }
  return r;
}

WriteResult CountingStore::create(std::string_view key, std::string_view value) {
  return counted(WriteOp::create, key, value, traced(TraceEntry::Kind::create, key, [&] {
                   return KvStoreWrapper::create(key, value);
                 }));
}

WriteResult CountingStore::update(std::string_view key, std::string_view value, Revision expected) {
  return counted(WriteOp::update, key, value, traced(TraceEntry::Kind::update, key, [&] {
                   return KvStoreWrapper::update(key, value, expected);
                 }));
}

WriteResult CountingStore::erase(std::string_view key, Revision expected) {
  return counted(WriteOp::erase, key, {}, traced(TraceEntry::Kind::erase, key, [&] {
                   return KvStoreWrapper::erase(key, expected);
                 }));
}

std::vector<CreateOutcome> CountingStore::create_many(std::span<const CreateRequest> requests) {
  const bool tracing = counters_->tracer.on.load(std::memory_order_relaxed);
  const std::int64_t start = tracing ? steady_ns() : 0;
  std::vector<CreateOutcome> out = KvStoreWrapper::create_many(requests);
  const std::int64_t end = tracing ? steady_ns() : 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (tracing) counters_->tracer.add(TraceEntry::Kind::create, requests[i].key, start, end);
    counted(WriteOp::create, requests[i].key, requests[i].value,
            out[i].error ? WriteResult{} : out[i].result);
  }
  return out;
}

std::optional<Entry> CountingStore::get(std::string_view key) {
  counters_->gets.fetch_add(1, std::memory_order_relaxed);
  return traced(TraceEntry::Kind::get, key, [&] { return KvStoreWrapper::get(key); });
}

// Wraps a watch's notify so that tracing records each callback under `what`.
void CountingStore::trace_notify(WatchOptions& options, const std::shared_ptr<Counters>& counters,
                                 std::string what) {
  if (!counters->tracer.on.load() || !options.notify) return;
  options.notify = [inner_notify = std::move(options.notify), counters, what = std::move(what)] {
    if (counters->tracer.on.load(std::memory_order_relaxed)) {
      const std::int64_t at = steady_ns();
      counters->tracer.add(TraceEntry::Kind::notify, what, at, at);
    }
    inner_notify();
  };
}

std::unique_ptr<Watch> CountingStore::watch(std::string_view prefix, WatchOptions options) {
  counters_->watches_opened.fetch_add(1, std::memory_order_relaxed);
  trace_notify(options, counters_, std::string(prefix));
  return std::make_unique<CountingWatch>(KvStoreWrapper::watch(prefix, std::move(options)),
                                         counters_);
}

std::unique_ptr<Watch> CountingStore::watch_keys(std::span<const std::string> keys,
                                                 WatchOptions options) {
  counters_->watches_opened.fetch_add(1, std::memory_order_relaxed);
  trace_notify(options, counters_, keys.empty() ? std::string() : keys.front());
  return std::make_unique<CountingWatch>(KvStoreWrapper::watch_keys(keys, std::move(options)),
                                         counters_);
}

std::vector<Entry> CountingStore::list(std::string_view prefix) {
  counters_->lists.fetch_add(1, std::memory_order_relaxed);
  return KvStoreWrapper::list(prefix);
}

StoreCounts CountingStore::counts() const {
  StoreCounts c;
  for (std::size_t i = 0; i < kFamilies; ++i) {
    c.writes[i] = counters_->writes[i].load(std::memory_order_relaxed);
    c.writes_ok[i] = counters_->writes_ok[i].load(std::memory_order_relaxed);
    c.watch_events[i] = counters_->watch_events[i].load(std::memory_order_relaxed);
  }
  c.gets = counters_->gets.load(std::memory_order_relaxed);
  c.lists = counters_->lists.load(std::memory_order_relaxed);
  c.watches_opened = counters_->watches_opened.load(std::memory_order_relaxed);
  return c;
}

}  // namespace etlc::bench
