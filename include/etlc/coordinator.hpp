// Coordinator: one member of a coordinated job. Construct one per process (or several per
// process on a shared MemoryStore), give it a Planner and a KvStore, and either start() it (a
// control thread it owns) or drive it with step() (tests and the simulator: no thread, no sleep,
// time from the Clock you pass).
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
#include "etlc/planner.hpp"
#include "etlc/split.hpp"
#include "etlc/store.hpp"

namespace etlc {

class MetricsRegistry;
namespace runtime {
class Member;
}

enum class CommitStatus : std::uint8_t {
  durable,    // written; the store holds it
  fenced,     // nothing was written: another member owns the split now. Stop its lane.
  retryable,  // the store could not be reached; nothing is known to be written. Retry later.
};

struct CommitResult {
  CommitStatus status = CommitStatus::retryable;
  std::string detail;  // why, for logs
  bool durable() const noexcept { return status == CommitStatus::durable; }
};

std::string_view to_string(CommitStatus s) noexcept;

// Passed as the `epoch` of commit(), complete(), fail() or release_drained(): act on whatever
// tenancy this member holds the split in now, without checking it is the caller's.
inline constexpr std::uint64_t kAnyEpoch = 0;

class Coordinator {
 public:
  // Validates the config (ConfigError naming the rule) and the planner's fingerprint. Does no
  // I/O. `metrics` may be null (a private registry is used).
  Coordinator(CoordinatorConfig config, std::shared_ptr<KvStore> store,
              std::shared_ptr<Planner> planner, const Clock& clock = SystemClock::instance(),
              std::shared_ptr<MetricsRegistry> metrics = nullptr);
  // Shuts down gracefully (bounded by op_timeout per operation) if still running.
  ~Coordinator();

  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Joins the job on the caller's thread (probe, session, fingerprint check), then runs the
  // control loop on an internal thread. Throws ConfigError if the job's fingerprint differs,
  // StoreError(incompatible) if the store does not enforce fencing, StoreError(unavailable) if
  // the store still cannot be reached after CoordinatorConfig::startup_wait (it retries with
  // capped backoff until then, one warning per attempt). At most once.
  void start();

  // Manual mode: runs one step of the control loop at clock.now() and returns when the next step
  // is due. Never blocks on anything but store calls. Not with start().
  Clock::time_point step();

  // The next event, if any. Never blocks.
  std::optional<Event> poll();
  // The next event, waiting up to `timeout` (thread mode; in manual mode it does not wait).
  std::optional<Event> wait_event(std::chrono::milliseconds timeout);

  // The four writes below name the tenancy they act for with `epoch`: the SplitGranted::epoch of
  // the grant the caller's lane was opened for. If this member no longer holds the split in that
  // epoch (it lost the split and was granted it again in a newer one), the call returns fenced
  // and writes nothing, so a lane that outlived its tenancy cannot write into the next one.
  // kAnyEpoch skips that check (then the caller must make sure no lane of an ended tenancy
  // calls again: one ends on SplitLost and on the caller's own complete, fail, release or
  // release_drained). Each returns fenced as well when the split is not held at all.

  // Fenced progress commit of a split this member holds. Progress watermarks never go back:
  // a lower watermark than the last durable one throws UsageError. Commits of one split must not
  // run concurrently with each other (different splits may).
  CommitResult commit(std::string_view split_id, const SplitProgress& progress,
                      std::uint64_t epoch = kAnyEpoch);
  // Terminal commit: the split is completed with `final_progress` and released.
  CommitResult complete(std::string_view split_id, const SplitProgress& final_progress,
                        std::uint64_t epoch = kAnyEpoch);
  // Poison evidence: the split cannot be processed. Consumes a delivery attempt, releases the
  // split; at max_attempts it is quarantined.
  CommitResult fail(std::string_view split_id, std::string_view reason,
                    std::uint64_t epoch = kAnyEpoch);
  // Graceful releases (no attempt consumed). Unknown ids are ignored.
  void release(std::span<const std::string> split_ids);
  // Ends a cooperative drain after its final commit: releases the split, replay-free.
  CommitResult release_drained(std::string_view split_id, std::uint64_t epoch = kAnyEpoch);
  // Refuses a revocation: the release is forced now (SplitLost{revoked} follows). Ignored when
  // the split is not held, not being revoked, or (epoch != kAnyEpoch) held in another epoch than
  // RevokeRequested::epoch named, so a late answer cannot force a newer tenancy out.
  void decline_revoke(std::string_view split_id, std::uint64_t epoch = kAnyEpoch);

  // Graceful exit: releases every split (no attempts consumed), steps down as leader, leaves.
  // Idempotent. Blocks until done (each store operation bounded by the store's own timeout).
  void shutdown();
  // Test and simulation hook: stops as if the process had crashed (nothing released, no store
  // writes), so peers must expire the session.
  void abandon();

  // Whether the member session `session` (SplitGranted::session) is still provably live by this
  // member's own monotonic clock: the send time of its last acknowledged renewal plus
  // lease_duration - op_timeout is still ahead (the rule by which the control loop stops its
  // lanes itself, before any peer may expire the session). Once false, false for good for that
  // session (a rejoin opens a new one). A lane checks it right before each write to its sink and
  // stops as lost when it is false, without waiting for SplitLost; the Driver does so before every
  // step(), durable_progress() and commit. Lock-free, thread-safe, one clock read.
  bool session_live(std::uint64_t session) const;
  // Until when session `session` is provably live (Clock::time_point::min() if it is not), on the
  // clock this Coordinator was given: a sink can bound a transaction by it.
  Clock::time_point session_live_until(std::uint64_t session) const;

  std::string instance_id() const;
  bool is_leader() const;
  std::vector<std::string> held_splits() const;
  MetricsRegistry& metrics();

  // For tests and the simulator.
  runtime::Member& member();

 private:
  struct Loop;
  std::shared_ptr<MetricsRegistry> metrics_;
  // Declared before member_ so it is destroyed after it: the member's planner thread and watch
  // callbacks wake the loop until the member (which joins them) is gone.
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<runtime::Member> member_;
};

}  // namespace etlc
