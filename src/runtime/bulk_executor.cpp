#include "runtime/bulk_executor.hpp"

#include <algorithm>

namespace etlc::runtime {

void InlineBulkExecutor::run_all(std::vector<std::function<void()>>& tasks) {
  std::exception_ptr first;
  for (auto& t : tasks) {
    try {
      t();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

PooledBulkExecutor::PooledBulkExecutor(std::size_t threads) {
  threads = std::clamp<std::size_t>(threads, 1, 64);
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { worker(); });
}

PooledBulkExecutor::~PooledBulkExecutor() {
  {
    MutexLock lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void PooledBulkExecutor::run_all(std::vector<std::function<void()>>& tasks) {
  if (tasks.empty()) return;
  MutexLock lk(mu_);
  batch_ = &tasks;
  errors_.assign(tasks.size(), nullptr);
  next_ = 0;
  finished_ = 0;
  work_cv_.notify_all();
  while (finished_ != tasks.size()) done_cv_.wait(mu_);
  batch_ = nullptr;
  for (auto& e : errors_) {
    if (e) std::rethrow_exception(e);
  }
}

void PooledBulkExecutor::worker() {
  for (;;) {
    std::size_t i = 0;
    std::function<void()>* task = nullptr;
    {
      MutexLock lk(mu_);
      while (!stop_ && (batch_ == nullptr || next_ >= batch_->size())) work_cv_.wait(mu_);
      if (stop_) return;
      i = next_++;
      task = &(*batch_)[i];
    }
    std::exception_ptr err;
    try {
      (*task)();
    } catch (...) {
      err = std::current_exception();
    }
    MutexLock lk(mu_);
    errors_[i] = err;
    if (++finished_ == batch_->size()) done_cv_.notify_all();
  }
}

}  // namespace etlc::runtime
