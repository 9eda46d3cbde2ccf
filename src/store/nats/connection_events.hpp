// ConnectionEvents: what nats.c's connection callbacks report for one Core, and the registry
// through which a callback finds them.
//
// nats.c passes every callback of a connection the closure set in its options, and the closed
// callback is not always the last one: threads that closing the connection does not join (the
// re-creation of an ordered consumer, a heartbeat timer already firing) post asynchronous errors
// whenever they finish, which can be after it (nats.c 3.4.1, js.c `_recreateOrderedCons`,
// `_hbTimerFired`). A closure pointing at memory freed on close is then read after free. So the
// closure is a token naming the events in a process-wide registry: Core::close() removes the
// entry, and a callback whose token names nothing any more does nothing. Tokens are never
// reused; the registry holds one entry per open connection. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "etlc/detail/mutex.hpp"

namespace etlc::nats_detail {

class Core;

class ConnectionEvents {
 public:
  std::weak_ptr<Core> core;
  std::atomic<std::uint64_t> disconnects{0};
  std::atomic<std::uint64_t> reconnects{0};
  std::atomic<std::uint64_t> async_errors{0};

  // From the closed callback: wakes wait_closed.
  void mark_closed() ETLC_EXCLUDES(mu_);
  // Returns once mark_closed() was called (true) or `timeout` passed (false).
  bool wait_closed(std::chrono::milliseconds timeout) ETLC_EXCLUDES(mu_);

 private:
  Mutex mu_;
  CondVar closed_cv_;                         // signalled when closed_ is set
  bool closed_ ETLC_GUARDED_BY(mu_) = false;  // nats.c delivered the closed callback
};

// Registers `events` (not null); returns the closure to hand nats.c for its callbacks.
void* register_events(std::shared_ptr<ConnectionEvents> events);
// The events `closure` names, or null once unregistered (or if it never named any).
std::shared_ptr<ConnectionEvents> find_events(void* closure);
// Forgets `closure`: callbacks that come with it later do nothing. Null and unknown closures are
// ignored.
void unregister_events(void* closure);

}  // namespace etlc::nats_detail
