// Watches and listings over a JetStream ordered push consumer on the bucket's stream.
//
// Not nats.c's kvWatcher: it hides message headers, and the headers are how a watch proves it
// has no gap. Every write NatsStore makes carries "Nats-Expected-Last-Subject-Sequence", i.e. the
// revision the key had just before. A history-1 bucket drops a key's older value when the next
// one is stored, so a watcher that lags behind a key being overwritten never receives the
// dropped value; comparing each message's expected revision with the last revision this watch
// saw for the key detects that, and the watch breaks (the contract forbids silent gaps).
//
// WatchState runs one thread per watch: it blocks in natsSubscription_NextMsg, keeps the
// snapshot aside until the consumer has nothing pending (so the consumer of the Watch sees
// exactly one put per live key, never a snapshot delete marker, then caught_up), then queues
// every live put/erase. A watch breaks (poll throws watch_broken once drained) on a gap, when
// nats.c reports a subscription error, the queue would exceed max_pending, or the store breaks
// it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "etlc/detail/mutex.hpp"
#include "etlc/store.hpp"
#include "store/nats/nats_core.hpp"

namespace etlc::nats_detail {

// One message of the bucket as the consumer delivered it.
struct StreamRecord {
  std::string key;
  bool tombstone = false;  // DEL or PURGE marker
  std::uint64_t revision = 0;
  std::uint64_t pending = 0;  // messages the consumer still had to deliver after this one
  // The key's revision before this write, if the writer stated it (NatsStore always does).
  std::optional<std::uint64_t> previous;
  std::string value;
};

// Where a snapshot (a watch's, a list's) ends. It is complete once the consumer has passed the
// last message under the prefix as of the start: every key live then has been delivered, except
// one whose last message was replaced before the consumer read it (the bucket keeps `history`
// values per key); its newer message lies past the boundary. So on reaching the boundary it is
// re-read, and the snapshot goes on while it moved, at most kRounds times: a key missed then must
// have been rewritten again within the milliseconds a round takes. (The server's "nothing
// pending" count, used before, ended snapshots that missed live keys under write load: see
// ASnapshotTakenUnderWriteLoadHasEveryLiveKey.) Not thread-safe.
class SnapshotBoundary {
 public:
  static constexpr int kRounds = 2;
  // One leader read. Throws unavailable/closed (as a read).
  SnapshotBoundary(Core& core, std::string_view prefix, std::string what);
  // Nothing under the prefix at the start: the snapshot is empty and complete.
  bool empty() const { return boundary_ == 0; }
  // After the consumer returned a message at `revision`: whether the snapshot is complete. May
  // re-read the boundary (throws like the constructor).
  bool reached(std::uint64_t revision);

 private:
  std::uint64_t read();
  Core& core_;
  std::string filter_;
  std::string what_;
  std::uint64_t boundary_ = 0;
  int rounds_ = 0;
};

// An ordered push consumer over "$KV.<bucket>.<prefix>>", delivering every message the bucket
// holds (`history` per key, deletes included). Owns its subscription. next() may run on one thread
// while stop() runs on another.
class KeyConsumer {
 public:
  // Throws unavailable/closed (as a read).
  KeyConsumer(Core& core, std::string_view prefix, std::string_view what);
  ~KeyConsumer();
  KeyConsumer(const KeyConsumer&) = delete;
  KeyConsumer& operator=(const KeyConsumer&) = delete;

  // NATS_OK and a record, NATS_TIMEOUT, or another status (the consumer failed or was stopped).
  natsStatus next(StreamRecord& out, std::int64_t timeout_ms);
  // True once everything that existed when the consumer started has been returned by next():
  // the server has nothing pending and the last message it delivered is the last one next()
  // returned. One request to the server.
  bool drained();
  // Wakes a blocked next() (which then fails) and ends the subscription. Idempotent.
  void stop() ETLC_EXCLUDES(stop_mu_);

 private:
  Core& core_;
  // Set by the constructor, destroyed by the destructor; nats.c serialises the calls on it.
  natsSubscription* sub_ = nullptr;
  std::uint64_t last_revision_ = 0;  // next()'s thread only
  Mutex stop_mu_;
  bool stopped_ ETLC_GUARDED_BY(stop_mu_) = false;
};

class WatchState final : public RegisteredWatch {
 public:
  WatchState(std::shared_ptr<Core> core, std::string prefix, WatchOptions options);
  ~WatchState() override;
  WatchState(const WatchState&) = delete;
  WatchState& operator=(const WatchState&) = delete;

  // Creates the consumer and starts the thread. Throws unavailable/closed.
  void start() ETLC_EXCLUDES(mu_);
  // Consumer side (see etlc::Watch::poll).
  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) ETLC_EXCLUDES(mu_);
  // Breaks the watch with `reason` (the first reason wins) and notifies the consumer. Safe from
  // any thread, any number of times.
  void fail(std::string reason) override ETLC_EXCLUDES(mu_);
  bool broken() const override ETLC_EXCLUDES(mu_);
  bool breaks_on_disconnect() const override { return false; }
  // Stops the thread, waits for running notify callbacks, frees the consumer. After it returns
  // the notify callback never runs again. Idempotent. Called by the handle's and the state's
  // destructors, never concurrently with itself or start().
  void shutdown() ETLC_EXCLUDES(mu_);

 private:
  void run() ETLC_EXCLUDES(mu_);
  void on_record(StreamRecord& record) ETLC_EXCLUDES(mu_);
  void on_caught_up() ETLC_EXCLUDES(mu_);
  // Marks broken. Returns false if already broken. The caller then stops the consumer (outside
  // mu_: stopping is a request to the server) and notifies.
  bool break_locked(std::string reason) ETLC_REQUIRES(mu_);
  void stop_consumer() ETLC_EXCLUDES(mu_);
  void notify_consumer() ETLC_EXCLUDES(mu_);

  const std::shared_ptr<Core> core_;
  const std::string prefix_;
  const WatchOptions options_;

  std::optional<SnapshotBoundary> boundary_;  // set by start(); then the watch thread's

  // After Core's close and registry locks (Core::break_watches calls fail()); held neither while
  // calling the consumer's callback nor while talking to the server.
  mutable Mutex mu_;
  CondVar idle_cv_;  // signalled when notifying_ drops to 0
  std::deque<WatchEvent> queue_ ETLC_GUARDED_BY(mu_);
  std::map<std::string, WatchEvent> snapshot_ ETLC_GUARDED_BY(mu_);  // until caught_up
  // Last revision seen per key (delete markers included), to detect dropped revisions. Only the
  // watch thread touches it.
  std::unordered_map<std::string, std::uint64_t> last_seen_;
  bool caught_up_ ETLC_GUARDED_BY(mu_) = false;
  bool broken_ ETLC_GUARDED_BY(mu_) = false;
  bool stopping_ ETLC_GUARDED_BY(mu_) = false;
  std::string reason_ ETLC_GUARDED_BY(mu_);
  int notifying_ ETLC_GUARDED_BY(mu_) = 0;
  // Shared so that fail() on another thread can stop it outside mu_ while shutdown() runs.
  std::shared_ptr<KeyConsumer> consumer_ ETLC_GUARDED_BY(mu_);
  // Started by start(), joined by shutdown() (outside mu_: the thread takes it); no other
  // thread touches it.
  std::thread thread_;
};

// The etlc::Watch handed to callers.
class NatsWatch final : public Watch {
 public:
  explicit NatsWatch(std::shared_ptr<WatchState> state, std::shared_ptr<Core> core);
  ~NatsWatch() override;
  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) override;

 private:
  std::shared_ptr<WatchState> state_;
  std::shared_ptr<Core> core_;
};

// Point-in-time listing of the live keys under `prefix`, sorted by key, built from a consumer
// that runs until drained (each wait bounded by op_timeout_ms of inactivity).
std::vector<Entry> list_from_consumer(Core& core, std::string_view prefix);

}  // namespace etlc::nats_detail
