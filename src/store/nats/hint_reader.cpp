// See hint_reader.hpp.
#include "store/nats/hint_reader.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace etlc::nats_detail {

LastMessage GapReader::at(std::uint64_t sequence) {
  return reader_.message_at(key_, sequence, what_);
}

LastMessage HintReader::message_at(const std::string& key, std::uint64_t sequence,
                                   const std::string& what) {
  auto it = cache_.find(sequence);
  if (it != cache_.end()) return it->second.key == key ? it->second.message : LastMessage{};
  LastMessage m = core_.read_sequence(key, sequence, what);
  core_.key_watch_counters().reads.fetch_add(1, std::memory_order_relaxed);
  if (m.exists) cache(key, m);
  return m;
}

void HintReader::cache(const std::string& key, const LastMessage& message) {
  const std::size_t bytes = key.size() + message.value.size() + sizeof(Cached);
  if (bytes > kMessageCacheBytes / 4 || cache_.contains(message.revision)) return;
  while (!cache_order_.empty() && cache_bytes_ + bytes > kMessageCacheBytes) {
    auto it = cache_.find(cache_order_.front());
    cache_bytes_ -= it->second.key.size() + it->second.message.value.size() + sizeof(Cached);
    cache_.erase(it);
    cache_order_.pop_front();
  }
  cache_.emplace(message.revision, Cached{key, message});
  cache_order_.push_back(message.revision);
  cache_bytes_ += bytes;
}

HintReader::HintReader(Core& core) : core_(core), thread_([this] { run(); }) {}

HintReader::~HintReader() {
  stop();
}

void HintReader::attach(const std::string& key, std::uint64_t watch_id,
                        const std::weak_ptr<HintTarget>& target, std::uint32_t index) {
  MutexLock lock(mu_);
  listeners_[key].push_back(Listener{watch_id, target, index});
}

void HintReader::detach(std::uint64_t watch_id, std::span<const std::string> keys) {
  MutexLock lock(mu_);
  for (const std::string& key : keys) {
    auto it = listeners_.find(key);
    if (it == listeners_.end()) continue;
    std::erase_if(it->second, [&](const Listener& l) { return l.watch_id == watch_id; });
    if (it->second.empty()) listeners_.erase(it);
  }
}

bool HintReader::request(const std::string& key) {
  bool queued = false;
  {
    MutexLock lock(mu_);
    if (stopping_) return false;
    if (queued_.contains(key)) return true;
    if (ready_.size() >= kMaxQueued) return false;
    queued = enqueue_locked(key);
  }
  if (queued) cv_.notify_one();
  return true;
}

bool HintReader::request_at(const std::string& key, TimePoint due) {
  {
    MutexLock lock(mu_);
    if (stopping_ || delayed_.size() >= kMaxDelayed) return false;
    const bool earliest = delayed_.empty() || due < delayed_.begin()->first;
    delayed_.emplace(due, key);
    if (!earliest) return true;
  }
  cv_.notify_one();  // the thread may be waiting for a later deadline
  return true;
}

bool HintReader::enqueue_locked(std::string key) {
  if (!queued_.insert(key).second) return false;
  ready_.push_back(std::move(key));
  return true;
}

void HintReader::promote_due_locked(TimePoint now) {
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    enqueue_locked(std::move(delayed_.begin()->second));
    delayed_.erase(delayed_.begin());
  }
}

void HintReader::run() {
  for (;;) {
    std::string key;
    std::vector<Listener> listeners;
    {
      MutexLock lock(mu_);
      for (;;) {
        if (stopping_) return;
        promote_due_locked(std::chrono::steady_clock::now());
        if (!ready_.empty()) break;
        if (delayed_.empty()) {
          cv_.wait(mu_);
        } else {
          cv_.wait_until(mu_, delayed_.begin()->first);
        }
      }
      key = std::move(ready_.front());
      ready_.pop_front();
      // From here a new request for this key queues one more read, after this one.
      queued_.erase(key);
      auto it = listeners_.find(key);
      if (it != listeners_.end()) listeners = it->second;
    }
    if (!listeners.empty()) read_and_dispatch(key, listeners);
  }
}

void HintReader::read_and_dispatch(const std::string& key, const std::vector<Listener>& listeners) {
  const std::string what = fmt::format("key watch read of '{}'", key);
  LastMessage last;
  try {
    last = core_.read_last(key, what);
    core_.key_watch_counters().reads.fetch_add(1, std::memory_order_relaxed);
  } catch (const StoreError& e) {
    for (const Listener& l : listeners) {
      if (auto target = l.target.lock()) target->on_read_failure(l.index, e);
    }
    return;
  }
  if (last.exists) cache(key, last);
  GapReader gaps(*this, key, what);
  for (const Listener& l : listeners) {
    if (auto target = l.target.lock()) target->on_read(l.index, last, gaps);
  }
}

void HintReader::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    ready_.clear();
    queued_.clear();
    delayed_.clear();
    listeners_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

}  // namespace etlc::nats_detail
