// Mutex, SharedMutex and their scoped locks: std::mutex and std::shared_mutex that clang's
// thread-safety analysis understands (detail/thread_annotations.hpp), a condition variable that
// waits with a Mutex, and held(), which names a lock the caller must already hold.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

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

// Returns `mu`; the analysis checks that the caller holds it. For passing the proof that a lock
// is held to a scoped capability that stands for the same lock under another name (see
// driver::FlagsHeld).
inline const Mutex& held(const Mutex& mu) ETLC_REQUIRES(mu) {
  return mu;
}

// Readers share it (ReaderLock), a writer holds it alone (WriterLock).
class ETLC_CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;
  void lock() ETLC_ACQUIRE() { mu_.lock(); }
  void unlock() ETLC_RELEASE() { mu_.unlock(); }
  void lock_shared() ETLC_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() ETLC_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` exclusively for its scope.
class ETLC_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ETLC_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() ETLC_RELEASE() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds `mu` shared for its scope.
class ETLC_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ETLC_ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() ETLC_RELEASE() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

// A condition variable over Mutex. Every wait is entered and returns with `mu` held and may wake
// spuriously, so callers loop on their condition themselves (evaluated where the analysis sees
// the lock held):
//   while (!ready() && std::chrono::steady_clock::now() < deadline) cv.wait_until(mu, deadline);
class CondVar {
 public:
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }
  // Until notified (or spuriously woken).
  void wait(Mutex& mu) ETLC_REQUIRES(mu) {
    std::unique_lock<std::mutex> lk(mu.mu_, std::adopt_lock);
    cv_.wait(lk);
    lk.release();  // still held: the caller's scope owns it
  }
  // ... or until `deadline`.
  void wait_until(Mutex& mu, std::chrono::steady_clock::time_point deadline) ETLC_REQUIRES(mu) {
    std::unique_lock<std::mutex> lk(mu.mu_, std::adopt_lock);
    cv_.wait_until(lk, deadline);
    lk.release();
  }
  // ... or for `timeout` (real time).
  template <class Rep, class Period>
  void wait_for(Mutex& mu, std::chrono::duration<Rep, Period> timeout) ETLC_REQUIRES(mu) {
    wait_until(mu, std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout));
  }

 private:
  std::condition_variable cv_;
};

}  // namespace etlc
