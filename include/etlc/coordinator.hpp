// Coordinator: one member of a coordinated job. Construct one per process (or several per
// process on a shared MemoryStore), give it a Planner and a KvStore, and either start() it (a
// control thread it owns) or drive it with step() (tests and the simulator: no thread, no sleep,
// time from the Clock you pass).
//
// A Coordinator is a MemberApi (etlc/member_api.hpp): hand it to a Driver, or call the split
// operations from your own lanes; their contract (tenancy epochs, outcomes, errors) is there.
//
// Ownership: the Coordinator shares ownership of the store and the planner; the clock must
// outlive it. Thread safety: every public method is thread-safe except step(), which must be
// called from one thread at a time and only when start() was not called.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/clock.hpp"
#include "etlc/config.hpp"
#include "etlc/events.hpp"
#include "etlc/member_api.hpp"
#include "etlc/planner.hpp"
#include "etlc/split.hpp"
#include "etlc/store.hpp"

namespace etlc {

class MetricsRegistry;
namespace runtime {
class Member;
struct CoordinatorAccess;  // src/runtime/coordinator_access.hpp: the library's own tests reach in
}  // namespace runtime

class Coordinator final : public MemberApi {
 public:
  // Validates the config (ConfigError naming the rule) and the planner's fingerprint. Does no
  // I/O. `metrics` may be null (a private registry is used).
  Coordinator(CoordinatorConfig config, std::shared_ptr<KvStore> store,
              std::shared_ptr<Planner> planner, const Clock& clock = SystemClock::instance(),
              std::shared_ptr<MetricsRegistry> metrics = nullptr);
  // Shuts down gracefully (bounded by op_timeout per operation) if still running.
  ~Coordinator() override;

  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Joins the job on the caller's thread (probe, session, fingerprint check), then runs the
  // control loop on an internal thread. Throws ConfigError if the job's fingerprint differs,
  // StoreError(incompatible) if the store does not enforce fencing, StoreError(unavailable) if
  // the store still cannot be reached after CoordinatorConfig::startup_wait (it retries with
  // capped backoff until then, one warning per attempt). At most once.
  void start() override;

  // Manual mode: runs one step of the control loop at clock.now() and returns when the next step
  // is due. Never blocks on anything but store calls. Not with start().
  Clock::time_point step();

  // The next event, if any. Never blocks.
  std::optional<Event> poll();
  // The next event, waiting up to `timeout` (thread mode; in manual mode it does not wait).
  std::optional<Event> wait_event(std::chrono::milliseconds timeout) override;

  // The split operations, as MemberApi documents them. Called on a Coordinator, `epoch` may be
  // left out (kAnyEpoch); a lane that can outlive its tenancy names its grant's epoch.
  CommitResult commit(std::string_view split_id, const SplitProgress& progress,
                      std::uint64_t epoch = kAnyEpoch) override;
  CommitResult complete(std::string_view split_id, const SplitProgress& final_progress,
                        std::uint64_t epoch = kAnyEpoch) override;
  CommitResult fail(std::string_view split_id, std::string_view reason,
                    std::uint64_t epoch = kAnyEpoch) override;
  CommitResult release_drained(std::string_view split_id, std::uint64_t epoch = kAnyEpoch) override;
  CommitResult split(std::string_view split_id, const SplitProgress& progress,
                     const SplitResidual& residual, std::uint64_t epoch = kAnyEpoch) override;
  void decline_revoke(std::string_view split_id, std::uint64_t epoch = kAnyEpoch) override;
  // Graceful releases (no attempt consumed). Unknown ids are ignored.
  void release(std::span<const std::string> split_ids);

  // Graceful exit: releases every split (no attempts consumed), steps down as leader, leaves.
  // Idempotent. Blocks until done (each store operation bounded by the store's own timeout).
  void shutdown() override;
  // Test and simulation hook: stops as if the process had crashed (nothing released, no store
  // writes), so peers must expire the session.
  void abandon() override;

  // Whether the member session `session` (SplitGranted::session) is still provably live by this
  // member's own monotonic clock: the send time of its last acknowledged renewal plus
  // lease_duration - op_timeout is still ahead (the rule by which the control loop stops its
  // lanes itself, before any peer may expire the session). Once false, false for good for that
  // session (a rejoin opens a new one). A lane checks it right before each write to its sink and
  // stops as lost when it is false, without waiting for SplitLost; the Driver does so before every
  // step(), durable_progress() and commit. Lock-free, thread-safe, one clock read.
  bool session_live(std::uint64_t session) const override;
  // Until when session `session` is provably live (Clock::time_point::min() if it is not), on the
  // clock this Coordinator was given: a sink can bound a transaction by it.
  Clock::time_point session_live_until(std::uint64_t session) const;

  std::string instance_id() const override;
  // CoordinatorConfig::max_in_flight.
  std::uint32_t max_in_flight() const override { return max_in_flight_; }
  bool is_leader() const;
  std::vector<std::string> held_splits() const;
  MetricsRegistry& metrics();

 private:
  friend struct runtime::CoordinatorAccess;
  struct Loop;
  std::shared_ptr<MetricsRegistry> metrics_;
  std::uint32_t max_in_flight_ = 0;
  // Declared before member_ so it is destroyed after it: the member's planner thread and watch
  // callbacks wake the loop until the member (which joins them) is gone.
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<runtime::Member> member_;
};

}  // namespace etlc
