// See hint_reader.hpp.
#include "store/nats/hint_reader.hpp"

namespace etlc::nats_detail {

HintReader::HintReader() : thread_([this] { run(); }) {}

HintReader::~HintReader() {
  stop();
}

bool HintReader::request(std::uint64_t watch_id, const std::weak_ptr<HintTarget>& target,
                         std::uint32_t key) {
  bool queued = false;
  {
    MutexLock lock(mu_);
    if (stopping_) return false;
    if (queued_.contains({watch_id, key})) return true;
    if (ready_.size() >= kMaxQueued) return false;
    queued = enqueue_locked(Request{watch_id, target, key});
  }
  if (queued) cv_.notify_one();
  return true;
}

bool HintReader::request_at(std::uint64_t watch_id, const std::weak_ptr<HintTarget>& target,
                            std::uint32_t key, TimePoint due) {
  {
    MutexLock lock(mu_);
    if (stopping_ || delayed_.size() >= kMaxDelayed) return false;
    const bool earliest = delayed_.empty() || due < delayed_.begin()->first;
    delayed_.emplace(due, Request{watch_id, target, key});
    if (!earliest) return true;
  }
  cv_.notify_one();  // the thread may be waiting for a later deadline
  return true;
}

bool HintReader::enqueue_locked(Request request) {
  if (!queued_.emplace(request.watch_id, request.key).second) return false;
  ready_.push_back(std::move(request));
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
    Request next;
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
      next = std::move(ready_.front());
      ready_.pop_front();
      // From here a new request for this key queues one more read, after this one.
      queued_.erase({next.watch_id, next.key});
    }
    if (auto target = next.target.lock()) target->read_key(next.key);
  }
}

void HintReader::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    ready_.clear();
    queued_.clear();
    delayed_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::size_t HintReader::backlog() const {
  MutexLock lock(mu_);
  return ready_.size() + delayed_.size();
}

}  // namespace etlc::nats_detail
