// CountingStore: a KvStore decorator that counts what one member asks of the store and what its
// watches deliver, by key family, and tells an observer about every write that took effect.
//
// The fleet benchmark puts one in front of every member's store connection, so per-member store
// cost (writes per second, watch events delivered per second) is counted where the member sees
// it, whatever the backend. The write observer runs on the writing thread right after the inner
// store acknowledged the write; scenarios use it to timestamp protocol steps (a claim's record
// CAS, a leader's first publish) without touching the runtime.
//
// Ownership: shares ownership of the inner store (KvStoreWrapper).
// Thread safety: every method may be called concurrently (counters are atomics). The observer is
// set before the member starts and must be cheap and thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/kv_store_wrapper.hpp"
#include "etlc/store.hpp"

namespace etlc::bench {

// The key families of the protocol (src/core/keys.hpp), plus everything else (probe keys).
enum class Family : std::uint8_t { job, member, lease, assign, split, spec, cordon, other };
inline constexpr std::size_t kFamilies = 8;
Family family_of(std::string_view key);
std::string_view to_string(Family f);

enum class WriteOp : std::uint8_t { create, update, erase };

// One traced store call or delivered watch event (tracing is off unless enabled).
struct TraceEntry {
  enum class Kind : std::uint8_t { create, update, erase, get, watch_put, watch_erase, notify };
  Kind kind = Kind::get;
  std::string key;
  // Steady clock. Watch events: when poll() returned them. notify: the watch's notify callback
  // ran (key = the watched prefix).
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

struct StoreCounts {
  std::array<std::uint64_t, kFamilies> writes{};        // successful or not
  std::array<std::uint64_t, kFamilies> writes_ok{};     // took effect
  std::array<std::uint64_t, kFamilies> watch_events{};  // put/erase delivered by poll()
  std::uint64_t gets = 0;
  std::uint64_t lists = 0;
  std::uint64_t watches_opened = 0;

  std::uint64_t total_writes() const;
  std::uint64_t total_watch_events() const;
  StoreCounts operator-(const StoreCounts& earlier) const;
};

class CountingStore final : public KvStoreWrapper {
 public:
  // (op, key, value, revision) of a write that took effect; value is empty for erase.
  using WriteObserver =
      std::function<void(WriteOp, std::string_view key, std::string_view value, Revision)>;

  explicit CountingStore(std::shared_ptr<KvStore> inner);

  void set_observer(WriteObserver observer) { observer_ = std::move(observer); }

  WriteResult create(std::string_view key, std::string_view value) override;
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override;
  WriteResult erase(std::string_view key, Revision expected) override;
  std::optional<Entry> get(std::string_view key) override;
  std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) override;
  std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys,
                                    WatchOptions options) override;
  std::vector<Entry> list(std::string_view prefix) override;
  // Forwarded as one batch (the backend's pipelining is kept); each request counts as a create
  // (an error outcome as a create that did not take effect) and is traced with the batch's span.
  std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests) override;

  StoreCounts counts() const;

  // Tracing: every call and delivered watch event is appended (bounded by `max_entries`).
  void enable_trace(std::size_t max_entries);
  std::vector<TraceEntry> trace() const;

 private:
  struct Counters;
  static void trace_notify(WatchOptions& options, const std::shared_ptr<Counters>& counters,
                           std::string what);
  friend class CountingWatch;
  struct Tracer {
    std::mutex mu;
    std::vector<TraceEntry> entries;
    std::size_t max_entries = 0;
    std::atomic<bool> on{false};
    void add(TraceEntry::Kind kind, std::string_view key, std::int64_t start, std::int64_t end);
  };
  struct Counters {
    std::array<std::atomic<std::uint64_t>, kFamilies> writes{};
    std::array<std::atomic<std::uint64_t>, kFamilies> writes_ok{};
    std::array<std::atomic<std::uint64_t>, kFamilies> watch_events{};
    std::atomic<std::uint64_t> gets{0};
    std::atomic<std::uint64_t> lists{0};
    std::atomic<std::uint64_t> watches_opened{0};
    Tracer tracer;
  };
  template <typename Call>
  auto traced(TraceEntry::Kind kind, std::string_view key, Call&& call) -> decltype(call());
  WriteResult counted(WriteOp op, std::string_view key, std::string_view value, WriteResult r);

  std::shared_ptr<Counters> counters_;  // shared with the watches, which may outlive the store
  WriteObserver observer_;
};

}  // namespace etlc::bench
