// HintReader: the one thread of a NatsStore that reads keys for all of its key watches.
//
// A key watch learns that a key may have changed from a core NATS message (a hint) and must
// then read the key from the stream leader, a network round trip. nats.c's callback must stay
// cheap and Watch::poll must never block, so the reads happen here: one thread per store, fed
// by a bounded queue of keys to read. Requests coalesce by key across the store's watches: a
// key already queued is not queued again, and one read of a key serves every watch attached to
// it (as do the older messages read back to bridge a gap: GapReader). A request made while the
// key's read is in progress queues one more read, which runs after it, so a change hinted
// during a read is never missed. Requests may also be delayed (a confirming read after a watch
// opens, a retry); when due they join the queue under the same rule. A full queue refuses the
// request and the caller breaks its watch: requests are never dropped silently.
//
// Targets are held weakly: a watch destroyed meanwhile is skipped. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "etlc/detail/mutex.hpp"
#include "store/nats/nats_core.hpp"

namespace etlc::nats_detail {

class HintReader;

// One key's older messages by stream sequence, for bridging a watch's gap: from the reader's
// cache of messages (a stored message never changes), else one leader read each. Reader thread
// only.
class GapReader {
 public:
  GapReader(HintReader& reader, const std::string& key, const std::string& what)
      : reader_(reader), key_(key), what_(what) {}
  // The message at `sequence` if it is still stored and is this key's (else exists == false).
  // Throws like Core::read_sequence.
  LastMessage at(std::uint64_t sequence);

 private:
  HintReader& reader_;
  const std::string& key_;
  const std::string& what_;
};

// A watch whose keys the reader reads.
class HintTarget {
 public:
  virtual ~HintTarget() = default;
  // Key number `key` of the watch was read: `last` is its last message. Reader thread, one call
  // at a time; may read older messages through `gaps`.
  virtual void on_read(std::uint32_t key, const LastMessage& last, GapReader& gaps) = 0;
  // The read failed with `error`.
  virtual void on_read_failure(std::uint32_t key, const StoreError& error) = 0;
};

class HintReader {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Bounds: keys waiting to be read, and delayed requests waiting to become due.
  static constexpr std::size_t kMaxQueued = std::size_t{1} << 16;
  static constexpr std::size_t kMaxDelayed = std::size_t{1} << 16;
  // Bound of the message cache (values and keys), oldest evicted first.
  static constexpr std::size_t kMessageCacheBytes = std::size_t{8} << 20;

  // Starts the thread. `core` outlives the reader (Core stops it in close()).
  explicit HintReader(Core& core);
  // stop().
  ~HintReader();
  HintReader(const HintReader&) = delete;
  HintReader& operator=(const HintReader&) = delete;

  // Reads of `key` reach `target` as its key number `index` until detach(watch_id). watch_id
  // is unique per watch and never reused.
  void attach(const std::string& key, std::uint64_t watch_id,
              const std::weak_ptr<HintTarget>& target, std::uint32_t index) ETLC_EXCLUDES(mu_);
  void detach(std::uint64_t watch_id, std::span<const std::string> keys) ETLC_EXCLUDES(mu_);

  // Queues a read of `key` unless one is queued already (coalesced: true). False if the queue
  // is full or the reader stopped.
  bool request(const std::string& key) ETLC_EXCLUDES(mu_);
  // The same once `due` has come. False if the delayed requests are at their bound or the
  // reader stopped.
  bool request_at(const std::string& key, TimePoint due) ETLC_EXCLUDES(mu_);

  // Ends the thread after the read in progress and drops every request. Idempotent. Must not
  // run on the reader thread: only Core owns the reader (key watches hold it weakly), and Core
  // stops it in close(), which NatsStore's destructor calls before a watch can hold the last
  // reference to the Core.
  void stop() ETLC_EXCLUDES(mu_);

 private:
  friend class GapReader;
  struct Listener {
    std::uint64_t watch_id = 0;
    std::weak_ptr<HintTarget> target;
    std::uint32_t index = 0;
  };
  void run() ETLC_EXCLUDES(mu_);
  // Reads `key` once and hands the result to every watch attached to it.
  void read_and_dispatch(const std::string& key, const std::vector<Listener>& listeners);
  bool enqueue_locked(std::string key) ETLC_REQUIRES(mu_);
  // Moves the delayed requests that are due into the queue, coalesced; past kMaxQueued too
  // (ready_ holds at most kMaxQueued + kMaxDelayed), since nobody could be told of a refusal.
  void promote_due_locked(TimePoint now) ETLC_REQUIRES(mu_);
  // The cached message at `sequence`, else a leader read (cached). Reader thread only.
  LastMessage message_at(const std::string& key, std::uint64_t sequence, const std::string& what);
  void cache(const std::string& key, const LastMessage& message);

  Core& core_;
  // Messages the reader read, by sequence, so that each is read at most once while cached even
  // when several watches lag behind by different amounts. Reader thread only.
  struct Cached {
    std::string key;
    LastMessage message;
  };
  std::map<std::uint64_t, Cached> cache_;
  std::deque<std::uint64_t> cache_order_;
  std::size_t cache_bytes_ = 0;
  mutable Mutex mu_;
  CondVar cv_;  // signalled on a new request and on stop
  std::deque<std::string> ready_ ETLC_GUARDED_BY(mu_);
  std::set<std::string, std::less<>> queued_ ETLC_GUARDED_BY(mu_);  // the keys in ready_
  std::multimap<TimePoint, std::string> delayed_ ETLC_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::vector<Listener>> listeners_ ETLC_GUARDED_BY(mu_);
  bool stopping_ ETLC_GUARDED_BY(mu_) = false;
  // Started by the constructor; joined by stop(), which the owner calls from one thread.
  std::thread thread_;
};

}  // namespace etlc::nats_detail
