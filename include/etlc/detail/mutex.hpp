// Mutex and MutexLock: std::mutex and a scoped lock that clang's thread-safety analysis
// understands (util/thread_annotations.hpp), and a condition variable that waits with them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "etlc/detail/thread_annotations.hpp"

namespace etlc {

class ETLC_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void lock() ETLC_ACQUIRE() { mu_.lock(); }
  void unlock() ETLC_RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ETLC_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ETLC_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ETLC_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A condition variable over Mutex. Callers loop on their condition themselves (evaluated where
// the analysis sees the lock held):
//   while (!ready() && std::chrono::steady_clock::now() < deadline) cv.wait_until(mu, deadline);
class CondVar {
 public:
  void notify_all() { cv_.notify_all(); }
  // Waits (with `mu` held on entry and on return) until notified, spuriously woken or `deadline`.
  void wait_until(Mutex& mu, std::chrono::steady_clock::time_point deadline) ETLC_REQUIRES(mu) {
    std::unique_lock<std::mutex> lk(mu.mu_, std::adopt_lock);
    cv_.wait_until(lk, deadline);
    lk.release();  // still held: the caller's scope owns it
  }

 private:
  std::condition_variable cv_;
};

}  // namespace etlc
