// Key watches (KvStore::watch_keys) on NATS: core subscriptions as change hints, leader reads
// as the facts.
//
// nats-server 2.9.10 gives a JetStream consumer one filter subject, so a consumer per watched
// key would cost the server a consumer (and its state, acks, heartbeats) per key per member. A
// key watch instead holds one core NATS subscription per key on the key's subject
// "$KV.<bucket>.<key>": the server forwards every publish to that subject, and nothing else,
// so the cost does not grow with the bucket's other keys or their writes. No thread per watch:
// callbacks come from nats.c's shared delivery pool, reads from the store's HintReader.
//
// A hint is a reason to read, never a fact: the server forwards a publish to subscribers
// whether or not the stream stores it (a lost CAS, a create that lost), and possibly before the
// stream has stored it (R3 commits through raft). So on a hint the reader reads the key's last
// message from the stream leader (revision = stream sequence; a DEL/PURGE marker is an erase)
// and emits an event only for a revision newer than the last one the watch knows of the key.
// A hint's "Nats-Expected-Last-Subject-Sequence" E says which revision the publish replaces: the
// stream can still store it only while the key's last revision is E. So while a read still
// finds revision E (or older), the write may be on its way and the key is read again with
// backoff; once the key moved past E the publish has been stored or can never be. A hint without
// the header (a foreign writer) waits for any revision newer than the watch knew then. A write
// that stays undecided for kMaxAwaitRereads re-reads breaks the watch rather than risk a miss.
//
// The open sequence and its window: see KeyWatchState::open in key_watch.cpp.
//
// Gaps: every NatsStore write names the revision it replaced. After caught_up, a read whose
// previous revision is not the last one the watch knew of the key means a value was skipped
// (the key was written again before the watch read it). A bucket with history > 1 may still
// hold the skipped values: they are read back by sequence (leader reads) and delivered in
// order. Otherwise the watch breaks, unless WatchOptions::latest_only lets it go on from the
// newer value. With history 1, a watch that is not latest_only therefore breaks whenever a key
// is written twice within about one read round trip. Breaks (poll throws watch_broken once
// drained): the queue at max_pending, the reader's queue full, a read failing kMaxReadRetries + 1
// times in a row (unavailable) or once otherwise (closed), a disconnect or reconnect (hints sent
// meanwhile are lost), a slow consumer or subscription error reported by nats.c, break_watches,
// close.
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "etlc/detail/mutex.hpp"
#include "etlc/store.hpp"
#include "store/nats/hint_reader.hpp"
#include "store/nats/nats_core.hpp"

namespace etlc::nats_detail {

class KeyWatchState final : public HintTarget,
                            public RegisteredWatch,
                            public std::enable_shared_from_this<KeyWatchState> {
 public:
  // Re-reads of a key that still shows the revision a hinted write expects to replace, with
  // backoff from 1 ms doubling to kAwaitBackoffCap (about 3.3 s in all), before the watch breaks.
  static constexpr int kMaxAwaitRereads = 20;
  static constexpr std::chrono::milliseconds kAwaitBackoffCap{250};
  // Retries of a read that failed with unavailable (50 ms doubling: 1.55 s in all).
  static constexpr int kMaxReadRetries = 5;
  static constexpr std::chrono::milliseconds kReadRetryPause{50};
  // Confirming reads of every key after the snapshot (see open()), and of a key after a hint
  // without an expected revision (a foreign write: nothing says when it has landed).
  static constexpr std::chrono::milliseconds kConfirmDelays[] = {std::chrono::milliseconds(100),
                                                                 std::chrono::milliseconds(2000)};
  // nats.c's pending limits per key subscription (a slow consumer breaks every watch).
  static constexpr int kSubPendingMessages = 1024;
  static constexpr int kSubPendingBytes = 16 * 1024 * 1024;

  // `keys` valid (validate_watch_keys), options checked, `reader` the core's. Does no I/O.
  KeyWatchState(std::shared_ptr<Core> core, std::vector<std::string> keys, WatchOptions options,
                std::weak_ptr<HintReader> reader);
  ~KeyWatchState() override;
  KeyWatchState(const KeyWatchState&) = delete;
  KeyWatchState& operator=(const KeyWatchState&) = delete;

  // Subscribes, confirms the interest, reads the snapshot, queues it and caught_up, schedules
  // the confirming reads. Throws unavailable/closed; the caller then calls shutdown().
  void open() ETLC_EXCLUDES(mu_, subs_mu_);
  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) ETLC_EXCLUDES(mu_);
  void fail(std::string reason) override ETLC_EXCLUDES(mu_, subs_mu_);
  bool broken() const override ETLC_EXCLUDES(mu_);
  bool breaks_on_disconnect() const override { return true; }
  // The reader thread's results (HintTarget).
  void on_read(std::uint32_t key, const LastMessage& last, GapReader& gaps) override
      ETLC_EXCLUDES(mu_, subs_mu_);
  void on_read_failure(std::uint32_t key, const StoreError& error) override
      ETLC_EXCLUDES(mu_, subs_mu_);
  // From nats.c's delivery thread: a publish to the subject of key `key`, expecting to replace
  // `expected` (nullopt: no such header). Cheap: bookkeeping and a queued read.
  void on_hint(std::uint32_t key, std::optional<std::uint64_t> expected)
      ETLC_EXCLUDES(mu_, subs_mu_);
  // Index of `subject`'s key, or nullopt if it is not one of ours.
  std::optional<std::uint32_t> key_of_subject(std::string_view subject) const;
  // Unsubscribes, waits for running notify callbacks; afterwards notify never runs again.
  // Idempotent; never concurrent with open().
  void shutdown() ETLC_EXCLUDES(mu_, subs_mu_);

 private:
  // What the watch knows of one key. Guarded by mu_.
  struct KeySlot {
    std::uint64_t last_seen = 0;  // newest revision applied (a value or a delete marker), 0: none
    bool live = false;
    std::string value;  // until caught_up: the snapshot value
    // Highest revision hinted writes expect to replace, while one may still be stored.
    std::optional<std::uint64_t> awaited;
    int await_rereads = 0;
    int failed_reads = 0;  // consecutive
  };
  // The next step after applying a read.
  struct Followup {
    std::optional<std::string> break_reason;
    std::optional<std::chrono::milliseconds> reread_after;
    bool notify = false;
  };

  void subscribe_all() ETLC_EXCLUDES(subs_mu_);
  bool fill_gap(std::uint32_t key, const LastMessage& read, GapReader& gaps,
                std::vector<LastMessage>& missing) ETLC_EXCLUDES(mu_);
  // Applies one read of `key`: its last message (`latest`) or an older one read back by
  // fill_gap, oldest first. `bridged`: fill_gap looked for skipped values (it does not before
  // caught_up).
  void apply(std::uint32_t key, LastMessage& read, bool latest, bool bridged = true)
      ETLC_EXCLUDES(mu_, subs_mu_);
  Followup apply_locked(std::uint32_t key, LastMessage& read, bool latest, bool bridged)
      ETLC_REQUIRES(mu_);
  std::optional<std::string> emit_locked(std::uint32_t key, LastMessage& read) ETLC_REQUIRES(mu_);
  std::optional<std::chrono::milliseconds> await_locked(std::uint32_t key, std::uint64_t last,
                                                        std::optional<std::string>& reason)
      ETLC_REQUIRES(mu_);
  void finish_snapshot() ETLC_EXCLUDES(mu_, subs_mu_);
  bool request_read(std::uint32_t key, std::optional<std::chrono::milliseconds> delay);
  // Marks broken; false if it already was. The caller then unsubscribes and notifies.
  bool break_locked(std::string reason) ETLC_REQUIRES(mu_);
  void unsubscribe_all() ETLC_EXCLUDES(subs_mu_);
  void notify_consumer() ETLC_EXCLUDES(mu_);

  const std::shared_ptr<Core> core_;
  const std::vector<std::string> keys_;
  const std::unordered_map<std::string, std::uint32_t> index_;  // subject suffix -> key
  const WatchOptions options_;
  const std::string what_;
  const std::uint64_t id_;  // unique in the process: the subscriptions' token, the reader's id
  const std::weak_ptr<HintReader> reader_;  // owned by the Core, which stops it on close

  // After Core's close and registry locks (Core::break_watches calls fail()) and before the
  // reader's; held neither while calling notify nor while talking to the server.
  mutable Mutex mu_ ETLC_ACQUIRED_BEFORE(subs_mu_);
  CondVar idle_cv_;  // signalled when notifying_ drops to 0
  std::deque<WatchEvent> queue_ ETLC_GUARDED_BY(mu_);
  std::vector<KeySlot> slots_ ETLC_GUARDED_BY(mu_);
  bool caught_up_ ETLC_GUARDED_BY(mu_) = false;
  bool broken_ ETLC_GUARDED_BY(mu_) = false;
  bool stopping_ ETLC_GUARDED_BY(mu_) = false;
  std::string reason_ ETLC_GUARDED_BY(mu_);
  int notifying_ ETLC_GUARDED_BY(mu_) = 0;

  Mutex subs_mu_;
  std::vector<natsSubscription*> subs_ ETLC_GUARDED_BY(subs_mu_);
  bool unsubscribed_ ETLC_GUARDED_BY(subs_mu_) = false;
};

// The etlc::Watch handed to callers.
class NatsKeyWatch final : public Watch {
 public:
  NatsKeyWatch(std::shared_ptr<KeyWatchState> state, std::shared_ptr<Core> core);
  ~NatsKeyWatch() override;
  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) override;

 private:
  std::shared_ptr<KeyWatchState> state_;
  std::shared_ptr<Core> core_;
};

// Opens a key watch of `keys` (validated by the caller). Throws unavailable/closed.
std::unique_ptr<Watch> open_key_watch(const std::shared_ptr<Core>& core,
                                      std::span<const std::string> keys, WatchOptions options);

}  // namespace etlc::nats_detail
