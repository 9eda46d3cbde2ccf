// Watches and listings over nats.c's kvWatcher (an ordered push consumer on the KV stream).
//
// WatchState runs one thread per watch: it blocks in kvWatcher_Next, keeps the snapshot aside
// until nats.c's "initial values done" marker (so the consumer sees exactly one put per live key,
// never a snapshot delete marker, then caught_up), then queues every live put/erase. The consumer
// polls the queue (NatsWatch). A watch breaks (poll throws watch_broken once drained) when nats.c
// reports a watcher error, the queue would exceed max_pending, or the store breaks it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etlc/store.hpp"
#include "store/nats/nats_core.hpp"

namespace etlc::nats_detail {

class WatchState {
 public:
  WatchState(std::shared_ptr<Core> core, std::string prefix, WatchOptions options);
  ~WatchState();
  WatchState(const WatchState&) = delete;
  WatchState& operator=(const WatchState&) = delete;

  // Creates the nats.c watcher and starts the thread. Throws unavailable/closed.
  void start();
  // Consumer side (see etlc::Watch::poll).
  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events);
  // Breaks the watch with `reason` (the first reason wins) and notifies the consumer. Safe from
  // any thread, any number of times.
  void fail(std::string reason);
  bool broken() const;
  // Stops the thread, waits for running notify callbacks, frees the watcher. After it returns the
  // notify callback never runs again. Idempotent.
  void shutdown();

 private:
  void run();
  void on_entry(kvEntry* entry);
  void on_caught_up();
  // Marks broken and stops the watcher; mu_ must be held. Returns false if already broken.
  bool break_locked(std::string reason);
  void notify_consumer();

  const std::shared_ptr<Core> core_;
  const std::string prefix_;
  const WatchOptions options_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  std::deque<WatchEvent> queue_;
  std::map<std::string, WatchEvent> snapshot_;  // until caught_up
  bool caught_up_ = false;
  bool broken_ = false;
  bool stopping_ = false;
  bool watcher_stopped_ = false;
  std::string reason_;
  int notifying_ = 0;
  kvWatcher* watcher_ = nullptr;  // owned; destroyed in shutdown() after the thread ended
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

// Point-in-time listing of the live keys under `prefix`, sorted by key, built from a watch that
// runs until the marker (each wait bounded by op_timeout_ms of inactivity).
std::vector<Entry> list_from_watch(Core& core, std::string_view prefix);

}  // namespace etlc::nats_detail
