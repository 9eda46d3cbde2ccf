// HintReader: the one thread of a NatsStore that reads keys for all of its key watches.
//
// A key watch learns that a key may have changed from a core NATS message (a hint) and must
// then read the key from the stream leader, a network round trip. nats.c's callback must stay
// cheap and Watch::poll must never block, so the reads happen here: one thread per store, fed
// by a bounded queue of (watch, key) requests. Requests coalesce: a (watch, key) already queued
// is not queued again, but a request made while its read is in progress queues one more read,
// which runs after it (so a change hinted during a read is never missed). Requests may also be
// delayed (a confirming read after a watch opens, a retry); when due they join the queue under
// the same rule. A full queue refuses the request, and the caller breaks its watch: requests
// are never dropped silently.
//
// Targets are held weakly: a request for a watch destroyed meanwhile does nothing. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <utility>

#include "etlc/detail/mutex.hpp"

namespace etlc::nats_detail {

// A watch whose keys the reader reads.
class HintTarget {
 public:
  virtual ~HintTarget() = default;
  // Reads key number `key` of the watch and acts on it. Runs on the reader thread, one call at a
  // time; may block for one request to the server (bounded by op_timeout_ms).
  virtual void read_key(std::uint32_t key) = 0;
};

class HintReader {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Bounds: requests waiting to run, and delayed requests waiting to become due.
  static constexpr std::size_t kMaxQueued = std::size_t{1} << 16;
  static constexpr std::size_t kMaxDelayed = std::size_t{1} << 16;

  // Starts the thread.
  HintReader();
  // stop().
  ~HintReader();
  HintReader(const HintReader&) = delete;
  HintReader& operator=(const HintReader&) = delete;

  // Queues a read of key `key` of watch `watch_id` (unique per watch, never reused) unless one
  // is queued already (coalesced: true). False if the queue is full or the reader stopped.
  bool request(std::uint64_t watch_id, const std::weak_ptr<HintTarget>& target, std::uint32_t key)
      ETLC_EXCLUDES(mu_);
  // The same once `due` has come. False if the delayed requests are at their bound or the
  // reader stopped.
  bool request_at(std::uint64_t watch_id, const std::weak_ptr<HintTarget>& target,
                  std::uint32_t key, TimePoint due) ETLC_EXCLUDES(mu_);

  // Ends the thread after the read in progress and drops every request. Idempotent. Must not
  // run on the reader thread: only Core owns the reader (key watches hold it weakly), and Core
  // stops it in close(), which NatsStore's destructor calls before a watch can hold the last
  // reference to the Core.
  void stop() ETLC_EXCLUDES(mu_);

  // Requests queued or delayed (for tests).
  std::size_t backlog() const ETLC_EXCLUDES(mu_);

 private:
  struct Request {
    std::uint64_t watch_id = 0;
    std::weak_ptr<HintTarget> target;
    std::uint32_t key = 0;
  };
  void run() ETLC_EXCLUDES(mu_);
  bool enqueue_locked(Request request) ETLC_REQUIRES(mu_);
  // Moves the delayed requests that are due into the queue, coalesced; past kMaxQueued too
  // (ready_ holds at most kMaxQueued + kMaxDelayed), since nobody could be told of a refusal.
  void promote_due_locked(TimePoint now) ETLC_REQUIRES(mu_);

  mutable Mutex mu_;
  CondVar cv_;  // signalled on a new request and on stop
  std::deque<Request> ready_ ETLC_GUARDED_BY(mu_);
  // (watch, key) of every request in ready_.
  std::set<std::pair<std::uint64_t, std::uint32_t>> queued_ ETLC_GUARDED_BY(mu_);
  std::multimap<TimePoint, Request> delayed_ ETLC_GUARDED_BY(mu_);
  bool stopping_ ETLC_GUARDED_BY(mu_) = false;
  // Started by the constructor; joined (or detached) by stop(), which the owner calls from one
  // thread (Core::close, the destructor).
  std::thread thread_;
};

}  // namespace etlc::nats_detail
