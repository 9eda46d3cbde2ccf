#include "signals.hpp"

#include <pthread.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>

namespace fb {

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
  thread_ = std::thread([this] {
    const timespec slice{0, 20'000'000};  // wake up to notice the destructor (exit latency)
    while (!stop_.load()) {
      const int sig = sigtimedwait(&set_, nullptr, &slice);
      if (sig <= 0) continue;
      int expected = 0;
      if (!received_.compare_exchange_strong(expected, sig)) std::_Exit(128 + sig);
      on_signal_(sig);
    }
  });
}

SignalWatcher::~SignalWatcher() {
  stop_.store(true);
  thread_.join();
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace fb
