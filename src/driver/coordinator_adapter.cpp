// CoordinatorAdapter, DriverOptions validation and the Driver's enum names.
#include <fmt/format.h>

#include "etlc/driver.hpp"
#include "etlc/errors.hpp"

namespace etlc {

CoordinatorAdapter::CoordinatorAdapter(std::shared_ptr<Coordinator> coordinator,
                                       std::uint32_t max_in_flight, bool start_coordinator)
    : coordinator_(std::move(coordinator)),
      max_in_flight_(max_in_flight),
      start_coordinator_(start_coordinator) {
  if (!coordinator_) throw ConfigError("CoordinatorAdapter: coordinator must not be null");
  if (max_in_flight_ == 0 || max_in_flight_ > kMaxLanes) {
    throw ConfigError(fmt::format("CoordinatorAdapter: max_in_flight must be 1..{}", kMaxLanes));
  }
}

void CoordinatorAdapter::start() {
  if (start_coordinator_) coordinator_->start();
}
std::optional<Event> CoordinatorAdapter::wait_event(std::chrono::milliseconds timeout) {
  return coordinator_->wait_event(timeout);
}
CommitResult CoordinatorAdapter::commit(std::string_view split_id, const SplitProgress& progress,
                                        std::uint64_t epoch) {
  return coordinator_->commit(split_id, progress, epoch);
}
CommitResult CoordinatorAdapter::complete(std::string_view split_id, const SplitProgress& progress,
                                          std::uint64_t epoch) {
  return coordinator_->complete(split_id, progress, epoch);
}
CommitResult CoordinatorAdapter::fail(std::string_view split_id, std::string_view reason,
                                      std::uint64_t epoch) {
  return coordinator_->fail(split_id, reason, epoch);
}
CommitResult CoordinatorAdapter::release_drained(std::string_view split_id, std::uint64_t epoch) {
  return coordinator_->release_drained(split_id, epoch);
}
void CoordinatorAdapter::decline_revoke(std::string_view split_id, std::uint64_t epoch) {
  coordinator_->decline_revoke(split_id, epoch);
}
void CoordinatorAdapter::shutdown() {
  coordinator_->shutdown();
}
void CoordinatorAdapter::abandon() {
  coordinator_->abandon();
}
std::string CoordinatorAdapter::instance_id() const {
  return coordinator_->instance_id();
}
bool CoordinatorAdapter::session_live(std::uint64_t session) const {
  return coordinator_->session_live(session);
}

void DriverOptions::validate() const {
  using std::chrono::milliseconds;
  if (commit_interval < milliseconds(1) || commit_interval > std::chrono::hours(1)) {
    throw ConfigError("invalid driver options: commit_interval must be 1 ms .. 1 h");
  }
  if (worker_threads > kMaxLanes) {
    throw ConfigError(
        fmt::format("invalid driver options: worker_threads must be 0..{}", kMaxLanes));
  }
  if (shutdown_timeout < milliseconds(0)) {
    throw ConfigError("invalid driver options: shutdown_timeout must not be negative");
  }
  if (poll_interval < milliseconds(1) || poll_interval > milliseconds(1000)) {
    throw ConfigError("invalid driver options: poll_interval must be 1 ms .. 1 s");
  }
  if (retry_backoff < milliseconds(1) || retry_backoff > std::chrono::minutes(10)) {
    throw ConfigError("invalid driver options: retry_backoff must be 1 ms .. 10 min");
  }
}

std::string_view to_string(DriverExit exit) noexcept {
  switch (exit) {
    case DriverExit::completed:
      return "completed";
    case DriverExit::stalled:
      return "stalled";
    case DriverExit::stalled_drained:
      return "stalled_drained";
    case DriverExit::stopped:
      return "stopped";
    case DriverExit::fatal:
      return "fatal";
    case DriverExit::aborted:
      return "aborted";
    case DriverExit::bad_config:
      return "bad_config";
  }
  return "unknown";
}

int DriverResult::exit_code() const noexcept {
  switch (exit) {
    case DriverExit::completed:
    case DriverExit::stalled_drained:
    case DriverExit::stopped:
      return exit_codes::ok;
    case DriverExit::stalled:
      return exit_codes::stalled;
    case DriverExit::fatal:
      return exit_codes::fatal;
    case DriverExit::aborted:
      return exit_codes::aborted;
    case DriverExit::bad_config:
      return exit_codes::bad_config;
  }
  return exit_codes::fatal;
}

std::string_view to_string(FenceStatus status) noexcept {
  switch (status) {
    case FenceStatus::open:
      return "open";
    case FenceStatus::refused:
      return "refused";
    case FenceStatus::retryable:
      return "retryable";
  }
  return "unknown";
}

std::string_view to_string(LaneEnd end) noexcept {
  switch (end) {
    case LaneEnd::completed:
      return "completed";
    case LaneEnd::drained:
      return "drained";
    case LaneEnd::lost:
      return "lost";
    case LaneEnd::failed:
      return "failed";
    case LaneEnd::shutdown:
      return "shutdown";
    case LaneEnd::aborted:
      return "aborted";
  }
  return "unknown";
}

}  // namespace etlc
