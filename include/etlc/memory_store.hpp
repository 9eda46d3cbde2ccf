// MemoryStore: an in-process KvStore for single-process fleets, tests and the simulator.
//
// It implements the whole contract of etlc/store.hpp (see docs/store-contract.md):
//  * One revision counter for the whole store, like a NATS stream sequence: every write (create,
//    update, erase) takes the next value, starting at 1. Revisions therefore never repeat for a
//    key across delete and re-create (no ABA), and a delete has its own revision.
//  * A deleted key is simply absent: create succeeds on it, get/list/watch snapshots omit it,
//    update/erase lose on it whatever revision they expect.
//  * Keys, prefixes and values are checked with validate_key/validate_prefix/validate_value on
//    every call, so a key the NATS backend would reject is rejected here too (invalid_argument).
//  * Nothing is persisted; there are no internal threads, timers or randomness, so a sequence of
//    calls from one thread always produces the same revisions and events.
//
// Watches: watch(prefix) queues the snapshot (one put per live key under the prefix, sorted by
// key), then one caught_up, then every later put/erase under the prefix, in revision order. The
// queue holds at most WatchOptions::max_pending events (the snapshot and caught_up included); one
// more breaks the watch: poll returns what is queued, then throws StoreError(watch_broken). A
// snapshot that does not fit breaks the watch at once in the same way.
//
// watch_keys(keys) works the same way over exactly those keys (the snapshot sorted by key); a
// write looks its key up once in an index of watched keys, so a key watch costs nothing to writes
// of other keys.
//
// Notify callbacks run on the writing thread, AFTER the store's and the watch's locks have been
// released (so a callback may take a lock that its consumer holds while calling the store), once
// per write that queued an event for that watch, and once during watch() for the snapshot.
// Several writer threads may run the same callback concurrently. A callback must not throw (the
// process terminates) and must not call the store or the Watch. Destroying a Watch waits for any
// callback of that watch already running on another thread, so after the destructor returns the
// callback never runs again: do not destroy a Watch while holding a lock its callback takes.
//
// Cost: writes are O(log n + t·log p + w) with n live keys, t '.'-tokens in the key, p distinct
// watched prefixes and w watches whose prefix matches the key (watches are indexed by prefix).
// get is O(log n); list and a watch's snapshot are O(log n + result).
//
// Thread safety: every method may be called concurrently from any thread. Share one store between
// several members of one process through std::shared_ptr. Watch handles may outlive the store;
// destroying the store breaks them (as close() does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/store.hpp"

namespace etlc {

namespace detail {
class MemoryStoreCore;
}  // namespace detail

class MemoryStore final : public KvStore {
 public:
  MemoryStore();
  // Breaks every live watch (as close()) and frees the data.
  ~MemoryStore() override;

  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  // KvStore (see etlc/store.hpp). Each throws StoreError(invalid_argument) for a key, prefix or
  // value that breaks the shared rules (and for WatchOptions::max_pending of 0 or above
  // kMaxWatchPending), and StoreError(closed) after close(). Never throws unavailable or
  // unknown_outcome: wrap the store in a FaultInjectingStore to simulate those.
  WriteResult create(std::string_view key, std::string_view value) override;
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override;
  WriteResult erase(std::string_view key, Revision expected) override;
  std::optional<Entry> get(std::string_view key) override;
  std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) override;
  std::vector<Entry> list(std::string_view prefix) override;
  std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys,
                                    WatchOptions options) override;

  // Shuts the store down: every later KvStore call throws StoreError(closed) and every live watch
  // breaks (its consumer is notified; poll returns the queued events, then throws watch_broken).
  // Idempotent. The introspection methods below keep working.
  void close();

  // Introspection for tests and benchmarks; each is a consistent snapshot.
  // The revision of the last write (0 before the first write).
  std::uint64_t last_revision() const;
  // Number of live (not deleted) keys.
  std::size_t size() const;
  // Number of watches that are registered: created, not yet destroyed, not broken.
  std::size_t watcher_count() const;

 private:
  std::shared_ptr<detail::MemoryStoreCore> core_;
};

}  // namespace etlc
