// Driver: the easy path. Give it a member (a Coordinator or any other MemberApi, or the config to
// build a Coordinator) and a SplitSource; it runs a lane per granted split on a bounded worker
// pool and answers every event the member reports, so user code only implements SplitSource/Lane
// (etlc/split_source.hpp) and a Planner (etlc/planner.hpp).
//
// What the Driver does with each event:
//   SplitGranted      opens a lane (on a worker) resuming from the granted progress
//   (commit interval) asks the lane for its durable progress and commits it through the fence
//   end of split      commits the final progress as the split's completion
//   poison            fail(): consumes a delivery attempt (quarantine at max_attempts)
//   RevokeRequested   asks the lane to drain; commits its final progress, then release_drained();
//                     a lane that declines is closed and decline_revoke() forces the release
//   SplitLost         stops the lane at once (stop token, then close(lost)); never commits for
//                     that tenancy again
//   fenced commit     the same as SplitLost
//   session lapsed    the same as SplitLost, without waiting for it: before every step(),
//                     durable_progress(), drain() and fenced call the Driver checks that the
//                     member session of the lane's grant is still provably live by the member's
//                     own clock (MemberApi::session_live)
//   sink fence        with DriverOptions::sink_fence: on a grant, open(split, epoch) before the
//                     lane opens; the lane resumes from the larger of the granted progress and
//                     the sink's. A refusal (at open, or a batch: StepResult::fenced, SinkFenced)
//                     reports the split failed with the sink's reason: `fenced` (a newer owner
//                     exists: the lane is lost) unless the sink is ahead of every grant
//                     (etlc/sink_fence.hpp)
//   AllComplete       drains what is still open, shuts the member down, run() returns completed
//   Stalled           fails (the default) or drains with a warning (DriverOptions::on_stall);
//                     a planner failure (Stalled::message set) always fails
//   Fatal             stops every lane at once, run() returns fatal
// request_stop() (for SIGINT/SIGTERM) is a graceful shutdown: lanes drain and commit (bounded by
// shutdown_timeout), then the member releases every split without consuming attempts.
//
// One split never has two lanes: a new tenancy of a split (lost, then granted again) opens its
// lane only after the old lane has closed, and resumes from the higher of the granted progress
// and this driver's own last durable commit of the split (a commit of the old lane may have
// landed after the grant was issued). Every call names its lane's epoch, so an old lane can
// never write into the new tenancy, and a revocation drains only the tenancy it names.
//
// Errors: bad options and null arguments throw ConfigError at construction; misuse (run() twice,
// run() after step(), step() during run()) throws UsageError. What goes wrong while running (a
// lane or sink fence that throws, a store that cannot be reached, a member whose start() throws)
// is handled as described above and reported in the DriverResult.
//
// Ownership: the Driver shares ownership of the member and the source; the clock must outlive
// it. Thread safety: request_stop(), abort(), stats() and instance_id() may be called from any
// thread; run() and step() from one thread.
//
// Threads: run() uses the calling thread for the member's events and `worker_threads` workers
// for the lanes (each lane gets one bounded step per turn, round robin, so a pool as large as
// max_in_flight never starves a lane). step() is a manual mode for tests: no threads, lanes run
// inline on the caller's thread, time from the Clock you pass.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "etlc/clock.hpp"
#include "etlc/config.hpp"
#include "etlc/coordinator.hpp"
#include "etlc/exit_codes.hpp"
#include "etlc/member_api.hpp"
#include "etlc/planner.hpp"
#include "etlc/sink_fence.hpp"
#include "etlc/split_source.hpp"
#include "etlc/store.hpp"

namespace etlc {

enum class StallPolicy : std::uint8_t {
  fail,                // a stalled job is an error: run() returns DriverExit::stalled
  drain_with_warning,  // log a warning, shut down gracefully, DriverExit::stalled_drained
};

struct DriverOptions {
  // How often each lane's durable progress is committed. Also bounds the replay after a crash
  // or a forced revocation (with a sink_fence nothing replays: lanes resume from the sink's own
  // progress). 1 ms .. 1 h.
  std::chrono::milliseconds commit_interval{1'000};
  // Worker threads for the lanes; 0 = the member's max_in_flight. At most kMaxLanes.
  std::uint32_t worker_threads = 0;
  StallPolicy on_stall = StallPolicy::fail;
  // Bound on the graceful part of a shutdown (lanes draining) before they are stopped; lanes
  // still open then are closed without a final commit (their tail replays).
  std::chrono::milliseconds shutdown_timeout{10'000};
  // How long run() waits for an event before it checks stop requests and retries. 1 ms .. 1 s.
  std::chrono::milliseconds poll_interval{50};
  // Pause before retrying a commit, completion, failure or release the store could not take
  // (and a sink fence that could not be reached).
  std::chrono::milliseconds retry_backoff{200};
  // The lanes' sink, fenced by the split's epoch (etlc/sink_fence.hpp): opened on every grant
  // before the lane, and the lane resumes from the larger of the granted and the sink's progress.
  // Null (the default): at-least-once delivery. Shared by the worker threads.
  std::shared_ptr<SinkFence> sink_fence;

  // Throws ConfigError naming the broken rule.
  void validate() const;
};

enum class DriverExit : std::uint8_t {
  completed,        // AllComplete: every split of the final plan completed
  stalled,          // Stalled under StallPolicy::fail, or the planner failed (always)
  stalled_drained,  // Stalled (quarantine) under StallPolicy::drain_with_warning
  stopped,          // request_stop(): a graceful stop, every split released
  fatal,            // the member reported Fatal, or start() threw anything but ConfigError
  aborted,          // abort()
  bad_config,       // start() threw ConfigError (e.g. the job was planned with another fingerprint)
};

std::string_view to_string(DriverExit exit) noexcept;

struct DriverResult {
  DriverExit exit = DriverExit::completed;
  std::string message;  // why, for the operator (empty for completed)
  // The run ended as the caller wanted: completed, stalled_drained, or stopped on request.
  bool ok() const noexcept {
    return exit == DriverExit::completed || exit == DriverExit::stalled_drained ||
           exit == DriverExit::stopped;
  }
  // The process exit code for a supervisor (etlc/exit_codes.hpp): ok for completed,
  // stalled_drained and stopped; stalled; fatal; bad_config; aborted. `return r.exit_code();`
  int exit_code() const noexcept;
};

// Counters of one Driver (monotonic except lanes_open).
struct DriverStats {
  std::uint64_t granted = 0;         // SplitGranted events acted on
  std::uint64_t resumed = 0;         // ... of which resumed from a non-zero watermark
  std::uint64_t completed = 0;       // splits this driver completed
  std::uint64_t drained = 0;         // revocations answered with a drain and release
  std::uint64_t declined = 0;        // revocations the lane declined
  std::uint64_t lost = 0;            // lanes stopped because the split was lost or fenced
  std::uint64_t failed = 0;          // splits failed as poison
  std::uint64_t quarantined = 0;     // SplitQuarantined events seen
  std::uint64_t commits = 0;         // durable progress commits (completions not included)
  std::uint64_t commit_retries = 0;  // commits, completions, failures or releases retried
  std::uint64_t lapsed = 0;          // lanes stopped because their session may have lapsed
  std::uint64_t sink_refused = 0;    // grants or batches the sink fence refused (a newer epoch)
  std::uint64_t sink_resumed = 0;    // grants resumed from the sink's progress (above the record)
  std::uint32_t lanes_open = 0;      // lanes currently open
  std::uint64_t lanes_opened = 0;    // lanes opened (the source returned a lane)
  std::uint64_t steps = 0;           // Lane::step calls
  std::uint64_t split_asked = 0;     // SplitRequested events passed to a lane (Lane::split)
  std::uint64_t split_cuts = 0;      // cuts committed: residuals handed to the job
};

class Driver {
 public:
  // Drives `member` with lanes from `source`. The clock drives the commit interval and retries.
  // Throws ConfigError for invalid options or null arguments. The counters of DriverStats that
  // docs/operations.md lists (etl_coordination_driver_*_total) go to `metrics`; when it is null,
  // to the member's registry if the member is a Coordinator, else to a private registry.
  Driver(std::shared_ptr<MemberApi> member, std::shared_ptr<SplitSource> source,
         DriverOptions options = {}, const Clock& clock = SystemClock::instance(),
         std::shared_ptr<MetricsRegistry> metrics = nullptr);
  // Builds the Coordinator (thread mode; it starts in run()). Throws what the Coordinator
  // constructor throws. `metrics` may be null: the Coordinator then uses a private registry
  // (Coordinator::metrics()), and the Driver's counters go there too.
  Driver(CoordinatorConfig config, std::shared_ptr<KvStore> store, std::shared_ptr<Planner> planner,
         std::shared_ptr<SplitSource> source, DriverOptions options = {},
         std::shared_ptr<MetricsRegistry> metrics = nullptr);
  // Joins the worker threads. Destroying a Driver while run() is still going on another thread
  // is a caller bug: request_stop() and wait for run() to return first.
  ~Driver();

  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Starts the member, runs until the job ends or a stop/abort, and returns why. Blocks. At most
  // once; not with step().
  DriverResult run();

  // Manual mode: handles every pending event, gives each runnable lane one turn (a due commit or
  // retry, then one step) on the caller's thread, and returns the result once the driver has
  // finished (then every later call returns it again). Does not start the member.
  std::optional<DriverResult> step();

  // Graceful shutdown (see the top of this file). Thread-safe; only sets a flag, so it may be
  // called from a signal handler.
  void request_stop() noexcept;
  // Crash (tests and demos): lanes stop at once with nothing committed, the member is abandoned
  // (nothing released), run() returns aborted. Thread-safe; only sets a flag.
  void abort() noexcept;

  // A snapshot of the counters. Thread-safe.
  DriverStats stats() const;
  // The member's instance id (MemberApi::instance_id, read once at construction).
  std::string instance_id() const;
  // The Coordinator this driver built (the constructor from a CoordinatorConfig), or null when
  // it was given its member. Owned by the driver: valid as long as the driver is.
  Coordinator* coordinator() const;

 private:
  struct Impl;  // src/driver/driver_impl.hpp
  std::unique_ptr<Impl> impl_;
};

}  // namespace etlc
