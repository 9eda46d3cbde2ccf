// Coordinator: the public face of a member (a MemberApi). In thread mode it owns the control
// thread that runs Member::step() whenever a watch event, an API call or a timer wants it; in
// manual mode the caller steps it.
#include "etlc/coordinator.hpp"

#include <fmt/format.h>
#include "log.hpp"

#include <random>
#include <thread>

#include "core/keys.hpp"
#include "etlc/detail/mutex.hpp"
#include "etlc/metrics.hpp"
#include "runtime/member.hpp"
#include "runtime/startup_wait.hpp"

namespace etlc {

CommitResult MemberApi::split(std::string_view split_id, const SplitProgress& progress,
                              const SplitResidual& residual, std::uint64_t epoch) {
  (void)progress, (void)residual, (void)epoch;
  throw UsageError(fmt::format("split of '{}': this member does not split splits", split_id));
}

std::string_view to_string(CommitStatus s) noexcept {
  switch (s) {
    case CommitStatus::durable:
      return "durable";
    case CommitStatus::fenced:
      return "fenced";
    case CommitStatus::retryable:
      return "retryable";
  }
  return "unknown";
}

std::string_view to_string(LossReason reason) noexcept {
  switch (reason) {
    case LossReason::fenced:
      return "fenced";
    case LossReason::revoked:
      return "revoked";
    case LossReason::starved:
      return "starved";
    case LossReason::session_expired:
      return "session_expired";
    case LossReason::twin:
      return "twin";
    case LossReason::shutdown:
      return "shutdown";
  }
  return "unknown";
}

// The control thread and its wake-up.
struct Coordinator::Loop {
  Mutex mu;
  CondVar cv;  // wake or stop
  bool wake ETLC_GUARDED_BY(mu) = false;
  bool stop ETLC_GUARDED_BY(mu) = false;
  bool started ETLC_GUARDED_BY(mu) = false;
  bool threaded ETLC_GUARDED_BY(mu) = false;  // the control thread runs (or is being joined)
  std::thread thread;  // start()'s and stop_and_join()'s only (the owner's calls, not concurrent)
  std::chrono::milliseconds startup_wait{0};  // CoordinatorConfig::startup_wait, set once

  void notify() ETLC_EXCLUDES(mu) {
    {
      MutexLock lk(mu);
      wake = true;
    }
    cv.notify_one();
  }

  bool is_threaded() ETLC_EXCLUDES(mu) {
    MutexLock lk(mu);
    return threaded;
  }

  // The control thread: steps the member, then sleeps until its next wake time, a wake or stop.
  void run(runtime::Member& member) ETLC_EXCLUDES(mu) {
    for (;;) {
      {
        MutexLock lk(mu);
        if (stop) return;
        wake = false;
      }
      Clock::time_point next;
      try {
        next = member.step();
      } catch (const std::exception& e) {
        log().error("etlc: {}: control loop error: {}", member.instance_id(), e.what());
        next = {};
      }
      const auto wait = next - member.clock_now();
      if (wait <= Clock::duration::zero()) continue;
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(wait);
      MutexLock lk(mu);
      while (!wake && !stop && std::chrono::steady_clock::now() < deadline) {
        cv.wait_until(mu, deadline);
      }
    }
  }

  void stop_and_join() ETLC_EXCLUDES(mu) {
    {
      MutexLock lk(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
    MutexLock lk(mu);
    threaded = false;
  }
};

namespace {
std::string random_instance_id() {
  std::random_device rd;
  return fmt::format("member-{:08x}{:08x}", rd(), rd());
}
}  // namespace

Coordinator::Coordinator(CoordinatorConfig config, std::shared_ptr<KvStore> store,
                         std::shared_ptr<Planner> planner, const Clock& clock,
                         std::shared_ptr<MetricsRegistry> metrics)
    : metrics_(metrics ? std::move(metrics) : std::make_shared<MetricsRegistry>()),
      loop_(std::make_unique<Loop>()) {
  if (config.instance_id.empty()) config.instance_id = random_instance_id();
  config.validate();
  loop_->startup_wait = config.startup_wait;
  max_in_flight_ = config.max_in_flight;
  if (!store) throw ConfigError("invalid config: store must not be null");
  if (!planner) throw ConfigError("invalid config: planner must not be null");
  if (planner->fingerprint().empty())
    throw ConfigError("invalid config: planner fingerprint is empty");
  runtime::Member::Options options;
  Loop* loop = loop_.get();
  options.wake = [loop] { loop->notify(); };
  member_ =
      std::make_unique<runtime::Member>(std::move(config), std::move(store), std::move(planner),
                                        clock, *metrics_, std::move(options));
}

Coordinator::~Coordinator() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    log().warn("etlc: shutdown in destructor failed: {}", e.what());
  }
}

void Coordinator::start() {
  {
    MutexLock lk(loop_->mu);
    if (loop_->started) throw UsageError("Coordinator::start called twice");
    loop_->started = true;
  }
  // In thread mode the planner runs on its own thread, never on the control loop.
  Loop* loop = loop_.get();
  member_->set_plan_runner(std::make_unique<runtime::ThreadPlanRunner>([loop] { loop->notify(); }));
  runtime::join_with_startup_wait(*member_, loop_->startup_wait);  // member_->join_now(), retried
  {
    MutexLock lk(loop_->mu);
    loop_->threaded = true;
  }
  loop_->thread = std::thread([loop, member = member_.get()] { loop->run(*member); });
}

Clock::time_point Coordinator::step() {
  if (loop_->is_threaded()) throw UsageError("Coordinator::step is for manual mode only");
  return member_->step();
}

std::optional<Event> Coordinator::poll() {
  return member_->splits().poll_event();
}

std::optional<Event> Coordinator::wait_event(std::chrono::milliseconds timeout) {
  return loop_->is_threaded() ? member_->splits().wait_event(timeout)
                              : member_->splits().poll_event();
}

CommitResult Coordinator::commit(std::string_view split_id, const SplitProgress& progress,
                                 std::uint64_t epoch) {
  return member_->splits().commit(split_id, progress, epoch);
}

CommitResult Coordinator::complete(std::string_view split_id, const SplitProgress& progress,
                                   std::uint64_t epoch) {
  return member_->splits().complete(split_id, progress, epoch);
}

CommitResult Coordinator::fail(std::string_view split_id, std::string_view reason,
                               std::uint64_t epoch) {
  return member_->splits().fail(split_id, reason, epoch);
}

void Coordinator::release(std::span<const std::string> split_ids) {
  member_->splits().release(split_ids);
}

CommitResult Coordinator::release_drained(std::string_view split_id, std::uint64_t epoch) {
  return member_->splits().release_drained(split_id, epoch);
}

CommitResult Coordinator::split(std::string_view split_id, const SplitProgress& progress,
                                const SplitResidual& residual, std::uint64_t epoch) {
  return member_->splits().split(split_id, progress, residual, epoch);
}

void Coordinator::decline_revoke(std::string_view split_id, std::uint64_t epoch) {
  member_->splits().decline_revoke(split_id, epoch);
}

void Coordinator::shutdown() {
  loop_->stop_and_join();
  member_->shutdown();
}

void Coordinator::abandon() {
  loop_->stop_and_join();
  member_->abandon();
}

bool Coordinator::session_live(std::uint64_t session) const {
  return member_->session_live(session);
}
Clock::time_point Coordinator::session_live_until(std::uint64_t session) const {
  return member_->session_live_until(session);
}

std::string Coordinator::instance_id() const {
  return member_->instance_id();
}
bool Coordinator::is_leader() const {
  return member_->is_leader();
}
std::vector<std::string> Coordinator::held_splits() const {
  return member_->held_ids();
}
MetricsRegistry& Coordinator::metrics() {
  return *metrics_;
}

}  // namespace etlc
