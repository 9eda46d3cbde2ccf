// See connection_events.hpp.
#include "store/nats/connection_events.hpp"

#include <unordered_map>
#include <utility>

namespace etlc::nats_detail {

namespace {

struct Registry {
  Mutex mu;
  std::uintptr_t next_token ETLC_GUARDED_BY(mu) = 1;  // 0 would be a null closure
  std::unordered_map<std::uintptr_t, std::shared_ptr<ConnectionEvents>> live ETLC_GUARDED_BY(mu);
};

// Never destroyed: nats.c's callback thread may run a callback while the process exits, after
// static destructors have run.
Registry& registry() {
  static auto* const instance = new Registry();
  return *instance;
}

std::uintptr_t token_of(void* closure) {
  return reinterpret_cast<std::uintptr_t>(closure);
}

}  // namespace

void ConnectionEvents::mark_closed() {
  MutexLock lock(mu_);
  closed_ = true;
  closed_cv_.notify_all();
}

bool ConnectionEvents::wait_closed(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  while (!closed_ && std::chrono::steady_clock::now() < deadline) {
    closed_cv_.wait_until(mu_, deadline);
  }
  return closed_;
}

void* register_events(std::shared_ptr<ConnectionEvents> events) {
  Registry& r = registry();
  MutexLock lock(r.mu);
  const std::uintptr_t token = r.next_token++;
  r.live.emplace(token, std::move(events));
  return reinterpret_cast<void*>(token);
}

std::shared_ptr<ConnectionEvents> find_events(void* closure) {
  Registry& r = registry();
  MutexLock lock(r.mu);
  auto it = r.live.find(token_of(closure));
  return it == r.live.end() ? nullptr : it->second;
}

void unregister_events(void* closure) {
  if (closure == nullptr) return;
  Registry& r = registry();
  std::shared_ptr<ConnectionEvents> last;  // released after the lock
  MutexLock lock(r.mu);
  auto it = r.live.find(token_of(closure));
  if (it == r.live.end()) return;
  last = std::move(it->second);
  r.live.erase(it);
}

}  // namespace etlc::nats_detail
