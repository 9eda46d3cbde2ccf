// SIGINT and SIGTERM as a callback on a thread of their own (no async-signal-safety concerns in
// the callback). Construct it in main() before starting any other thread: threads inherit the
// blocked signal mask, so only the watcher ever receives them. A second signal exits at once.
#pragma once

#include <atomic>
#include <csignal>
#include <functional>
#include <thread>

namespace fb {

class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(int)> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // The first signal received, or 0.
  int received() const { return received_.load(); }

 private:
  std::function<void(int)> on_signal_;
  sigset_t set_{};
  sigset_t old_{};
  std::atomic<bool> stop_{false};
  std::atomic<int> received_{0};
  std::thread thread_;
};

}  // namespace fb
