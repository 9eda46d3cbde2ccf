// BulkExecutor: runs a batch of independent store operations, possibly in parallel, and returns
// when all have finished. The leader seeds a plan through it: in thread mode a small pool
// pipelines the creates (a store round trip is ~60 µs on NATS; 2 x 10^5 of them one after the
// other would take 12 s), in manual mode they run in order on the caller's thread so a
// simulation stays deterministic.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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
  void run_all(std::vector<std::function<void()>>& tasks) override;

 private:
  void worker();

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::vector<std::function<void()>>* batch_ = nullptr;
  std::vector<std::exception_ptr> errors_;
  std::size_t next_ = 0;
  std::size_t finished_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace etlc::runtime
