// MemoryStore (see include/etlc/memory_store.hpp).
//
// Locking: one SharedMutex guards the data and the watch registry (reads take it shared). Each
// watch has its own state object with its own mutex; the order is always store lock, then watch
// lock. Notify callbacks run with no lock held: a write collects the watches to notify under the
// locks, counts each as "notify in flight" on its state, and runs the callbacks after unlocking. A
// Watch destructor unregisters (so no new notify can start), then waits for the in-flight count
// to reach zero.
#include "etlc/memory_store.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "etlc/detail/mutex.hpp"

namespace etlc {
namespace detail {
namespace {

// Per-watch state shared by the store's registry and the Watch handle.
struct WatchState {
  WatchState(std::function<void()> notify_fn, std::size_t max_pending_events)
      : notify(std::move(notify_fn)), max_pending(max_pending_events) {}

  const std::function<void()> notify;  // immutable: called without holding `mu`
  const std::size_t max_pending;

  Mutex mu;
  CondVar idle;  // signalled when notifies_in_flight drops to 0
  std::deque<WatchEvent> queue ETLC_GUARDED_BY(mu);
  bool broken ETLC_GUARDED_BY(mu) = false;
  std::string broken_reason ETLC_GUARDED_BY(mu);
  bool cancelled ETLC_GUARDED_BY(mu) = false;  // the handle is being destroyed: no new notify
  std::size_t notifies_in_flight ETLC_GUARDED_BY(mu) = 0;
};

using WatchStatePtr = std::shared_ptr<WatchState>;

// Appends `event` unless that would exceed max_pending, in which case the watch breaks.
// Returns false if the watch is (now) broken.
bool enqueue_locked(WatchState& state, WatchEvent event) ETLC_REQUIRES(state.mu) {
  if (state.broken) return false;
  if (state.queue.size() >= state.max_pending) {
    state.broken = true;
    state.broken_reason = fmt::format(
        "watch overflowed: more than max_pending ({}) events were left unpolled; re-watch",
        state.max_pending);
    return false;
  }
  state.queue.push_back(std::move(event));
  return true;
}

// Marks a notify as in flight if the watch wants one.
bool begin_notify_locked(WatchState& state) ETLC_REQUIRES(state.mu) {
  if (!state.notify || state.cancelled) return false;
  ++state.notifies_in_flight;
  return true;
}

// Runs the callback of a watch whose notify was begun. noexcept: a throwing callback breaks the
// documented contract and terminates.
void run_notify(WatchState& state) noexcept ETLC_EXCLUDES(state.mu) {
  bool call = false;
  {
    MutexLock lock(state.mu);
    call = !state.cancelled;  // the handle is going away: skip, but still end the in-flight count
  }
  if (call) state.notify();
  MutexLock lock(state.mu);
  if (--state.notifies_in_flight == 0) state.idle.notify_all();
}

void run_notifies(const std::vector<WatchStatePtr>& states) noexcept {
  for (const WatchStatePtr& state : states) run_notify(*state);
}

bool has_prefix(std::string_view key, std::string_view prefix) {
  return key.size() >= prefix.size() && key.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

class MemoryStoreCore : public std::enable_shared_from_this<MemoryStoreCore> {
 public:
  WriteResult create(std::string_view key, std::string_view value) ETLC_EXCLUDES(mu_) {
    validate_key(key);
    validate_value(key, value);
    std::vector<WatchStatePtr> to_notify;
    WriteResult result;
    {
      WriterLock lock(mu_);
      check_open_locked();
      auto it = live_.find(key);
      if (it != live_.end()) return WriteResult{false, it->second.revision};
      const Revision revision = ++revision_;
      live_.emplace(std::string(key), Stored{std::string(value), revision});
      publish_locked(
          key, WatchEvent{WatchEvent::Kind::put, std::string(key), std::string(value), revision},
          to_notify);
      result = WriteResult{true, revision};
    }
    run_notifies(to_notify);
    return result;
  }

  WriteResult update(std::string_view key, std::string_view value, Revision expected)
      ETLC_EXCLUDES(mu_) {
    validate_key(key);
    validate_value(key, value);
    std::vector<WatchStatePtr> to_notify;
    WriteResult result;
    {
      WriterLock lock(mu_);
      check_open_locked();
      auto it = live_.find(key);
      if (it == live_.end()) return WriteResult{false, 0};
      if (it->second.revision != expected) return WriteResult{false, it->second.revision};
      const Revision revision = ++revision_;
      it->second = Stored{std::string(value), revision};
      publish_locked(
          key, WatchEvent{WatchEvent::Kind::put, std::string(key), std::string(value), revision},
          to_notify);
      result = WriteResult{true, revision};
    }
    run_notifies(to_notify);
    return result;
  }

  WriteResult erase(std::string_view key, Revision expected) ETLC_EXCLUDES(mu_) {
    validate_key(key);
    std::vector<WatchStatePtr> to_notify;
    WriteResult result;
    {
      WriterLock lock(mu_);
      check_open_locked();
      auto it = live_.find(key);
      if (it == live_.end()) return WriteResult{false, 0};
      if (it->second.revision != expected) return WriteResult{false, it->second.revision};
      const Revision revision = ++revision_;
      live_.erase(it);
      publish_locked(key, WatchEvent{WatchEvent::Kind::erase, std::string(key), {}, revision},
                     to_notify);
      result = WriteResult{true, revision};
    }
    run_notifies(to_notify);
    return result;
  }

  std::optional<Entry> get(std::string_view key) const ETLC_EXCLUDES(mu_) {
    validate_key(key);
    ReaderLock lock(mu_);
    check_open_locked();
    auto it = live_.find(key);
    if (it == live_.end()) return std::nullopt;
    return Entry{it->first, it->second.value, it->second.revision};
  }

  std::vector<Entry> list(std::string_view prefix) const ETLC_EXCLUDES(mu_) {
    validate_prefix(prefix);
    ReaderLock lock(mu_);
    check_open_locked();
    std::vector<Entry> out;
    for (auto it = live_.lower_bound(prefix); it != live_.end() && has_prefix(it->first, prefix);
         ++it) {
      out.push_back(Entry{it->first, it->second.value, it->second.revision});
    }
    return out;
  }

  std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) ETLC_EXCLUDES(mu_);
  std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys, WatchOptions options)
      ETLC_EXCLUDES(mu_);

  void unregister(const std::string& prefix, std::uint64_t id) ETLC_EXCLUDES(mu_) {
    WriterLock lock(mu_);
    auto bucket = watchers_.find(prefix);
    if (bucket == watchers_.end()) return;
    if (bucket->second.erase(id) == 1) --watcher_total_;
    if (bucket->second.empty()) watchers_.erase(bucket);
  }

  void unregister_keys(std::span<const std::string> keys, std::uint64_t id) ETLC_EXCLUDES(mu_) {
    WriterLock lock(mu_);
    for (const std::string& key : keys) {
      auto bucket = key_watchers_.find(key);
      if (bucket == key_watchers_.end()) continue;
      bucket->second.erase(id);
      if (bucket->second.empty()) key_watchers_.erase(bucket);
    }
    key_watch_ids_.erase(id);
  }

  void close() ETLC_EXCLUDES(mu_) {
    std::vector<WatchStatePtr> to_notify;
    {
      WriterLock lock(mu_);
      if (closed_) return;
      closed_ = true;
      for (auto& [prefix, bucket] : watchers_) {
        for (auto& [id, state] : bucket) {
          MutexLock state_lock(state->mu);
          if (!state->broken) {
            state->broken = true;
            state->broken_reason = "the memory store was closed";
          }
          if (begin_notify_locked(*state)) to_notify.push_back(state);
        }
      }
      for (auto& [key, bucket] : key_watchers_) {
        for (auto& [id, state] : bucket) {
          MutexLock state_lock(state->mu);
          if (!state->broken) {
            state->broken = true;
            state->broken_reason = "the memory store was closed";
          }
          // Registered under each of its keys: notified once, on the first visit.
          if (key_watch_ids_.erase(id) == 1 && begin_notify_locked(*state)) {
            to_notify.push_back(state);
          }
        }
      }
      watchers_.clear();
      watcher_total_ = 0;
      key_watchers_.clear();
      key_watch_ids_.clear();
    }
    run_notifies(to_notify);
  }

  std::uint64_t last_revision() const ETLC_EXCLUDES(mu_) {
    ReaderLock lock(mu_);
    return revision_;
  }
  std::size_t size() const ETLC_EXCLUDES(mu_) {
    ReaderLock lock(mu_);
    return live_.size();
  }
  std::size_t watcher_count() const ETLC_EXCLUDES(mu_) {
    ReaderLock lock(mu_);
    return watcher_total_ + key_watch_ids_.size();
  }

 private:
  struct Stored {
    std::string value;
    Revision revision = 0;
  };
  using Bucket = std::map<std::uint64_t, WatchStatePtr>;  // by watch id

  void check_open_locked() const ETLC_REQUIRES_SHARED(mu_) {
    if (closed_) throw StoreError(StoreErrc::closed, "the memory store was closed");
  }

  // Queues `event` on every watch whose prefix matches `key` and collects the ones to notify.
  // Only prefixes of `key` can match ("" and every head ending in '.'), so a write looks up at
  // most one bucket per '.'-token instead of visiting every watch.
  void publish_locked(std::string_view key, const WatchEvent& event,
                      std::vector<WatchStatePtr>& to_notify) ETLC_REQUIRES(mu_) {
    publish_keys_locked(key, event, to_notify);
    if (watchers_.empty()) return;
    publish_bucket_locked("", event, to_notify);
    for (std::size_t i = 0; i < key.size(); ++i) {
      if (key[i] == '.') publish_bucket_locked(key.substr(0, i + 1), event, to_notify);
    }
  }

  void publish_bucket_locked(std::string_view prefix, const WatchEvent& event,
                             std::vector<WatchStatePtr>& to_notify) ETLC_REQUIRES(mu_) {
    auto bucket = watchers_.find(prefix);
    if (bucket == watchers_.end()) return;
    for (auto it = bucket->second.begin(); it != bucket->second.end();) {
      WatchState& state = *it->second;
      bool keep = true;
      {
        MutexLock state_lock(state.mu);
        keep = enqueue_locked(state, event);
        if (begin_notify_locked(state)) to_notify.push_back(it->second);
      }
      if (keep) {
        ++it;
      } else {  // overflowed: it will never take another event
        it = bucket->second.erase(it);
        --watcher_total_;
      }
    }
    if (bucket->second.empty()) watchers_.erase(bucket);
  }

  // Queues `event` on every key watch of `key`. A key watch that overflows stays registered
  // (broken, it takes no more events) until its handle unregisters it.
  void publish_keys_locked(std::string_view key, const WatchEvent& event,
                           std::vector<WatchStatePtr>& to_notify) ETLC_REQUIRES(mu_) {
    auto bucket = key_watchers_.find(key);
    if (bucket == key_watchers_.end()) return;
    for (auto& [id, state] : bucket->second) {
      MutexLock state_lock(state->mu);
      if (!enqueue_locked(*state, event)) key_watch_ids_.erase(id);
      if (begin_notify_locked(*state)) to_notify.push_back(state);
    }
  }

  mutable SharedMutex mu_;  // before any WatchState::mu
  bool closed_ ETLC_GUARDED_BY(mu_) = false;
  Revision revision_ ETLC_GUARDED_BY(mu_) = 0;
  std::map<std::string, Stored, std::less<>> live_ ETLC_GUARDED_BY(mu_);
  std::map<std::string, Bucket, std::less<>> watchers_ ETLC_GUARDED_BY(mu_);  // by prefix
  std::size_t watcher_total_ ETLC_GUARDED_BY(mu_) = 0;
  std::map<std::string, Bucket, std::less<>> key_watchers_ ETLC_GUARDED_BY(mu_);  // by key
  std::set<std::uint64_t> key_watch_ids_ ETLC_GUARDED_BY(mu_);  // live, unbroken key watches
  std::uint64_t next_watch_id_ ETLC_GUARDED_BY(mu_) = 1;
};

namespace {

class MemoryWatch final : public Watch {
 public:
  // A prefix watch (`keys` empty) or a key watch of `keys`; `what` names it in errors.
  MemoryWatch(std::weak_ptr<MemoryStoreCore> core, WatchStatePtr state, std::string prefix,
              std::vector<std::string> keys, std::uint64_t id)
      : core_(std::move(core)),
        state_(std::move(state)),
        prefix_(std::move(prefix)),
        keys_(std::move(keys)),
        id_(id) {}

  ~MemoryWatch() override {
    if (auto core = core_.lock()) {  // no new notify can start
      if (keys_.empty()) {
        core->unregister(prefix_, id_);
      } else {
        core->unregister_keys(keys_, id_);
      }
    }
    MutexLock lock(state_->mu);
    state_->cancelled = true;
    while (state_->notifies_in_flight != 0) state_->idle.wait(state_->mu);
  }

  MemoryWatch(const MemoryWatch&) = delete;
  MemoryWatch& operator=(const MemoryWatch&) = delete;

  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) override {
    MutexLock lock(state_->mu);
    std::size_t n = 0;
    while (n < max_events && !state_->queue.empty()) {
      out.push_back(std::move(state_->queue.front()));
      state_->queue.pop_front();
      ++n;
    }
    if (n == 0 && state_->queue.empty() && state_->broken) {
      throw StoreError(StoreErrc::watch_broken,
                       fmt::format("watch of {}: {}", what(), state_->broken_reason));
    }
    return n;
  }

 private:
  std::string what() const {
    if (keys_.empty()) return fmt::format("'{}'", prefix_);
    return fmt::format("the keys '{}'{}", keys_.front(),
                       keys_.size() > 1 ? fmt::format(" and {} more", keys_.size() - 1) : "");
  }

  std::weak_ptr<MemoryStoreCore> core_;
  WatchStatePtr state_;
  std::string prefix_;
  std::vector<std::string> keys_;
  std::uint64_t id_;
};

void check_watch_options(const WatchOptions& options) {
  if (options.max_pending == 0 || options.max_pending > kMaxWatchPending) {
    throw StoreError(StoreErrc::invalid_argument,
                     fmt::format("WatchOptions::max_pending is {}; it must be in [1, {}]",
                                 options.max_pending, kMaxWatchPending));
  }
}

}  // namespace

std::unique_ptr<Watch> MemoryStoreCore::watch(std::string_view prefix, WatchOptions options) {
  validate_prefix(prefix);
  check_watch_options(options);
  auto state = std::make_shared<WatchState>(std::move(options.notify), options.max_pending);
  std::uint64_t id = 0;
  {
    WriterLock lock(mu_);
    check_open_locked();
    MutexLock state_lock(state->mu);
    bool fits = true;
    for (auto it = live_.lower_bound(prefix);
         fits && it != live_.end() && has_prefix(it->first, prefix); ++it) {
      fits = enqueue_locked(*state, WatchEvent{WatchEvent::Kind::put, it->first, it->second.value,
                                               it->second.revision});
    }
    if (fits) fits = enqueue_locked(*state, WatchEvent{WatchEvent::Kind::caught_up, {}, {}, 0});
    if (fits) {  // a broken watch is never registered: it takes no more events
      id = next_watch_id_++;
      watchers_[std::string(prefix)].emplace(id, state);
      ++watcher_total_;
    }
  }
  // Nobody else can hold the handle yet, so this call needs no in-flight accounting; a writer
  // may already be notifying concurrently, which the contract allows.
  if (state->notify) state->notify();
  return std::make_unique<MemoryWatch>(weak_from_this(), std::move(state), std::string(prefix),
                                       std::vector<std::string>{}, id);
}

std::unique_ptr<Watch> MemoryStoreCore::watch_keys(std::span<const std::string> keys,
                                                   WatchOptions options) {
  validate_watch_keys(keys);
  check_watch_options(options);
  std::vector<std::string> sorted(keys.begin(), keys.end());
  std::sort(sorted.begin(), sorted.end());
  auto state = std::make_shared<WatchState>(std::move(options.notify), options.max_pending);
  std::uint64_t id = 0;
  {
    WriterLock lock(mu_);
    check_open_locked();
    MutexLock state_lock(state->mu);
    bool fits = true;
    for (const std::string& key : sorted) {
      auto it = live_.find(key);
      if (fits && it != live_.end()) {
        fits = enqueue_locked(*state, WatchEvent{WatchEvent::Kind::put, it->first, it->second.value,
                                                 it->second.revision});
      }
    }
    if (fits) fits = enqueue_locked(*state, WatchEvent{WatchEvent::Kind::caught_up, {}, {}, 0});
    id = next_watch_id_++;
    if (fits) {  // a broken watch is never registered: it takes no more events
      for (const std::string& key : sorted) key_watchers_[key].emplace(id, state);
      key_watch_ids_.insert(id);
    }
  }
  if (state->notify) state->notify();
  return std::make_unique<MemoryWatch>(weak_from_this(), std::move(state), std::string(),
                                       std::move(sorted), id);
}

}  // namespace detail

MemoryStore::MemoryStore() : core_(std::make_shared<detail::MemoryStoreCore>()) {}

MemoryStore::~MemoryStore() {
  core_->close();
}

WriteResult MemoryStore::create(std::string_view key, std::string_view value) {
  return core_->create(key, value);
}

WriteResult MemoryStore::update(std::string_view key, std::string_view value, Revision expected) {
  return core_->update(key, value, expected);
}

WriteResult MemoryStore::erase(std::string_view key, Revision expected) {
  return core_->erase(key, expected);
}

std::optional<Entry> MemoryStore::get(std::string_view key) {
  return core_->get(key);
}

std::unique_ptr<Watch> MemoryStore::watch(std::string_view prefix, WatchOptions options) {
  return core_->watch(prefix, std::move(options));
}

std::vector<Entry> MemoryStore::list(std::string_view prefix) {
  return core_->list(prefix);
}

std::unique_ptr<Watch> MemoryStore::watch_keys(std::span<const std::string> keys,
                                               WatchOptions options) {
  return core_->watch_keys(keys, std::move(options));
}

void MemoryStore::close() {
  core_->close();
}

std::uint64_t MemoryStore::last_revision() const {
  return core_->last_revision();
}

std::size_t MemoryStore::size() const {
  return core_->size();
}

std::size_t MemoryStore::watcher_count() const {
  return core_->watcher_count();
}

}  // namespace etlc
