#include "signals.hpp"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <ctime>

namespace pgb {

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
  thread_ = std::jthread([this](std::stop_token stop) {
    const timespec slice{0, 20'000'000};  // wake up to notice the destructor
    bool seen = false;
    while (!stop.stop_requested()) {
      const int sig = sigtimedwait(&set_, nullptr, &slice);
      if (sig <= 0) continue;
      if (seen) std::_Exit(128 + sig);
      seen = true;
      on_signal_(sig);
    }
  });
}

SignalWatcher::~SignalWatcher() {
  thread_.request_stop();
  thread_.join();
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace pgb
