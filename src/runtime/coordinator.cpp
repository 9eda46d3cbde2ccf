// Coordinator: the public face of a member. In thread mode it owns the control thread that runs
// Member::step() whenever a watch event, an API call or a timer wants it; in manual mode the
// caller steps it.
#include "etlc/coordinator.hpp"

#include <fmt/format.h>
#include "log.hpp"

#include <condition_variable>
#include <random>
#include <thread>

#include "core/keys.hpp"
#include "etlc/metrics.hpp"
#include "runtime/member.hpp"
#include "runtime/startup_wait.hpp"

namespace etlc {

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
  std::mutex mu;
  std::condition_variable cv;
  bool wake = false;
  bool stop = false;
  bool started = false;
  std::thread thread;
  std::chrono::milliseconds startup_wait{0};  // CoordinatorConfig::startup_wait

  void notify() {
    {
      std::lock_guard lk(mu);
      wake = true;
    }
    cv.notify_one();
  }
};

namespace {
// Concurrent store writes while seeding a plan (a pipelining depth, not a CPU count).
constexpr std::size_t kSeedThreads = 8;

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
    std::lock_guard lk(loop_->mu);
    if (loop_->started) throw UsageError("Coordinator::start called twice");
    loop_->started = true;
  }
  // In thread mode the planner runs on its own thread, never on the control loop.
  Loop* loop = loop_.get();
  member_->set_plan_runner(std::make_unique<runtime::ThreadPlanRunner>([loop] { loop->notify(); }));
  member_->set_bulk_executor(std::make_unique<runtime::PooledBulkExecutor>(kSeedThreads));
  runtime::join_with_startup_wait(*member_, loop_->startup_wait);  // member_->join_now(), retried
  loop_->thread = std::thread([this] {
    std::unique_lock lk(loop_->mu);
    while (!loop_->stop) {
      loop_->wake = false;
      lk.unlock();
      Clock::time_point next;
      try {
        next = member_->step();
      } catch (const std::exception& e) {
        log().error("etlc: {}: control loop error: {}", member_->instance_id(), e.what());
        next = {};
      }
      const auto wait = next - member_->clock_now();
      lk.lock();
      if (loop_->stop) break;
      if (wait > Clock::duration::zero()) {
        loop_->cv.wait_for(lk, wait, [&] { return loop_->wake || loop_->stop; });
      }
    }
  });
}

Clock::time_point Coordinator::step() {
  {
    std::lock_guard lk(loop_->mu);
    if (loop_->thread.joinable()) throw UsageError("Coordinator::step is for manual mode only");
  }
  return member_->step();
}

std::optional<Event> Coordinator::poll() {
  return member_->poll_event();
}

std::optional<Event> Coordinator::wait_event(std::chrono::milliseconds timeout) {
  bool threaded;
  {
    std::lock_guard lk(loop_->mu);
    threaded = loop_->thread.joinable();
  }
  return threaded ? member_->wait_event(timeout) : member_->poll_event();
}

CommitResult Coordinator::commit(std::string_view split_id, const SplitProgress& progress,
                                 std::uint64_t epoch) {
  return member_->commit(split_id, progress, epoch);
}

CommitResult Coordinator::complete(std::string_view split_id, const SplitProgress& progress,
                                   std::uint64_t epoch) {
  return member_->complete(split_id, progress, epoch);
}

CommitResult Coordinator::fail(std::string_view split_id, std::string_view reason,
                               std::uint64_t epoch) {
  return member_->fail(split_id, reason, epoch);
}

void Coordinator::release(std::span<const std::string> split_ids) {
  member_->release(split_ids);
}

CommitResult Coordinator::release_drained(std::string_view split_id, std::uint64_t epoch) {
  return member_->release_drained(split_id, epoch);
}

void Coordinator::decline_revoke(std::string_view split_id, std::uint64_t epoch) {
  member_->decline_revoke(split_id, epoch);
}

namespace {
void stop_thread(std::mutex& mu, std::condition_variable& cv, bool& stop, std::thread& t) {
  {
    std::lock_guard lk(mu);
    stop = true;
  }
  cv.notify_all();
  if (t.joinable()) t.join();
}
}  // namespace

void Coordinator::shutdown() {
  stop_thread(loop_->mu, loop_->cv, loop_->stop, loop_->thread);
  member_->shutdown();
}

void Coordinator::abandon() {
  stop_thread(loop_->mu, loop_->cv, loop_->stop, loop_->thread);
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
runtime::Member& Coordinator::member() {
  return *member_;
}

}  // namespace etlc
