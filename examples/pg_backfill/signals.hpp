// SIGINT and SIGTERM delivered to a callback on a thread of their own. Construct it in main()
// before any other thread starts (threads inherit the blocked mask, so only the watcher receives
// them). A second signal exits at once.
#pragma once

#include <csignal>
#include <functional>
#include <thread>

namespace pgb {

class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(int)> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  std::function<void(int)> on_signal_;
  sigset_t set_{};
  sigset_t old_{};
  std::jthread thread_;
};

}  // namespace pgb
