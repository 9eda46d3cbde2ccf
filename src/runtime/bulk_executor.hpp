// BulkExecutor: runs a batch of independent store operations, possibly in parallel, and returns
// when all have finished. The leader seeds a plan through it: in thread mode a small pool
// pipelines the creates (a store round trip is ~60 µs on NATS; 2 x 10^5 of them one after the
// other would take 12 s), in manual mode they run in order on the caller's thread so a
// simulation stays deterministic.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "etlc/detail/mutex.hpp"

namespace etlc::runtime {

class BulkExecutor {
 public:
  virtual ~BulkExecutor() = default;
  // Runs every task; blocks until all finished. If tasks threw, rethrows the first exception (by
  // task order) after all have finished. Tasks must not touch shared state except their own
  // output slot.
  virtual void run_all(std::vector<std::function<void()>>& tasks) = 0;
};

class InlineBulkExecutor final : public BulkExecutor {
 public:
  void run_all(std::vector<std::function<void()>>& tasks) override;
};

// A fixed pool of `threads` workers (1..64). The destructor joins them.
class PooledBulkExecutor final : public BulkExecutor {
 public:
  explicit PooledBulkExecutor(std::size_t threads);
  ~PooledBulkExecutor() override;
  PooledBulkExecutor(const PooledBulkExecutor&) = delete;
  PooledBulkExecutor& operator=(const PooledBulkExecutor&) = delete;
  void run_all(std::vector<std::function<void()>>& tasks) override ETLC_EXCLUDES(mu_);

 private:
  void worker() ETLC_EXCLUDES(mu_);

  Mutex mu_;
  CondVar work_cv_;  // a batch arrived, or stop_
  CondVar done_cv_;  // the batch finished
  // The batch being run (run_all's caller owns it); a worker runs task i outside the lock.
  std::vector<std::function<void()>>* batch_ ETLC_GUARDED_BY(mu_) = nullptr;
  std::vector<std::exception_ptr> errors_ ETLC_GUARDED_BY(mu_);
  std::size_t next_ ETLC_GUARDED_BY(mu_) = 0;
  std::size_t finished_ ETLC_GUARDED_BY(mu_) = 0;
  bool stop_ ETLC_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // the constructor's and the destructor's only
};

}  // namespace etlc::runtime
