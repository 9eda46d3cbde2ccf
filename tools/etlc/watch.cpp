// etlc watch: the status view, refreshed until interrupted.
//
// On a terminal: clear and redraw (ANSI) every interval. Otherwise one summary line per refresh
// (with --json, one etlc.status.v1 document per line). A refresh that fails (store unreachable)
// prints the error and the next refresh tries again: NatsStore reconnects on its own. The
// interval is bounded below so a watch cannot hammer the store: every refresh lists the job.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <iostream>
#include <thread>

#include "cli.hpp"
#include "etlc/admin.hpp"
#include "output.hpp"

namespace etlc::cli {

namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_signal(int) {
  g_interrupted.store(true);
}

void install_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::string wall_time() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Sleeps up to `d` in short slices; returns early when interrupted.
void pause(std::chrono::milliseconds d) {
  constexpr auto kSlice = std::chrono::milliseconds(50);
  for (auto left = d; left.count() > 0 && !g_interrupted.load(); left -= kSlice) {
    std::this_thread::sleep_for(std::min(left, kSlice));
  }
}

}  // namespace

int run_watch(const ConnectOptions& c, const WatchArgs& args, bool json) {
  install_handlers();
  auto store = open_store(c);
  JobAdmin admin(*store);
  try {
    if (!admin.job_exists()) {
      throw CliError(kExitJobNotFound,
                     fmt::format("job '{}' not found: bucket '{}' holds no plan, leader or member",
                                 c.job, bucket_of(c)));
    }
  } catch (const StoreError& e) {
    throw CliError(kExitStoreUnreachable, fmt::format("store unreachable: {}", e.what()));
  }
  const bool tty = !json && isatty(STDOUT_FILENO) == 1;
  const auto interval = std::chrono::milliseconds(args.interval_ms);
  for (std::uint64_t n = 0; !g_interrupted.load() && (args.count == 0 || n < args.count); ++n) {
    if (n > 0) pause(interval);
    if (g_interrupted.load()) break;
    std::string error;
    JobStatus st;
    try {
      st = admin.status();
    } catch (const StoreError& e) {
      error = fmt::format("store unreachable: {}", e.what());
    }
    if (tty) {
      std::string screen = "\x1b[H\x1b[2J";
      screen += fmt::format("etlc watch  {}  every {}  (Ctrl-C to stop)\n\n", wall_time(),
                            format_duration(interval));
      screen += error.empty() ? status_text(c.job, bucket_of(c), st) : "etlc: " + error + "\n";
      std::cout << screen << std::flush;
    } else if (!error.empty()) {
      std::cerr << "etlc: " << wall_time() << " " << error << std::endl;
    } else if (json) {
      std::cout << status_json(c.job, st).dump(-1, ' ', false,
                                               nlohmann::ordered_json::error_handler_t::replace)
                << std::endl;
    } else {
      std::cout << wall_time() << " " << status_line(st) << std::endl;
    }
    if (!std::cout) return kExitOk;  // the reader went away (a closed pipe)
  }
  return kExitOk;
}

}  // namespace etlc::cli
