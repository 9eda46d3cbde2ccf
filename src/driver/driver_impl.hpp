// Driver::Impl: the Driver's state (out of its installed header) and what acts on it, by file:
//   driver.cpp        the public Driver; run() and step(); the worker pool
//   control.cpp       the control side: stop and abort requests, the member's events, stopping
//   slot_table.cpp    the slot table: queues, waking a slot, handing it back, closing it
//   lane_open.cpp     a slot's first turn: where to resume, the sink fence, opening the lane
//   lane_turn.cpp     a lane's turn: one function per Slot::Work state, the fenced calls
//   driver_types.cpp  options validation, exit codes, enum names
//
// Threads: the control thread (run()'s caller, or step()'s) owns the control state and is the only
// one to take events from the member; a worker runs one slot's turn at a time (in manual mode the
// step() caller does). mu_ guards the slot table, the statistics and every Slot's control flags;
// no member or lane call is made with it held.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "driver/driver_metrics.hpp"
#include "driver/slot.hpp"
#include "etlc/detail/mutex.hpp"
#include "etlc/driver.hpp"

namespace etlc {

struct Driver::Impl {
  using Slot = driver::Slot;
  using SlotPtr = std::shared_ptr<Slot>;
  enum class Phase : std::uint8_t { running, stopping, done };
  // How a turn hands its slot back: run again soon, after not_before (a retry), or never.
  enum class Turn : std::uint8_t { again, later, closed };
  // The outcome of a fenced call (commit, complete, fail, release_drained).
  enum class Outcome : std::uint8_t { done, lost, retry, invalid };
  // What a turn saw when it began: the requests (read once, under mu_) and the time.
  struct TurnStart {
    bool drain = false;
    bool shutdown = false;
    std::optional<double> split_keep;  // SplitRequested, taken by this turn
    Clock::time_point now{};
  };

  Impl(std::shared_ptr<MemberApi> member, std::shared_ptr<SplitSource> source,
       DriverOptions options, const Clock& clock, std::shared_ptr<MetricsRegistry> metrics);
  ~Impl();

  // driver.cpp
  DriverResult run() ETLC_EXCLUDES(mu_);
  std::optional<DriverResult> step() ETLC_EXCLUDES(mu_);
  void worker_loop() ETLC_EXCLUDES(mu_);
  void stop_workers() ETLC_EXCLUDES(mu_);

  // control.cpp
  std::optional<DriverResult> control(std::chrono::milliseconds wait) ETLC_EXCLUDES(mu_);
  void take_requests() ETLC_EXCLUDES(mu_);
  void force_lanes_if_due() ETLC_EXCLUDES(mu_);
  void take_events(std::chrono::milliseconds wait) ETLC_EXCLUDES(mu_);
  void handle(Event event) ETLC_EXCLUDES(mu_);
  void on_granted(SplitGranted grant) ETLC_EXCLUDES(mu_);
  void on_revoke(const RevokeRequested& revoke) ETLC_EXCLUDES(mu_);
  void on_lost(const SplitLost& loss) ETLC_EXCLUDES(mu_);
  void on_split_requested(const SplitRequested& r) ETLC_EXCLUDES(mu_);
  void on_stalled(const Stalled& stall) ETLC_EXCLUDES(mu_);
  void on_fatal(const Fatal& fatal) ETLC_EXCLUDES(mu_);
  void begin_stopping(DriverExit exit, std::string message) ETLC_EXCLUDES(mu_);
  void stop_all_lanes(bool abort_lanes) ETLC_EXCLUDES(mu_);
  std::optional<DriverResult> finish_if_quiet() ETLC_EXCLUDES(mu_);

  // slot_table.cpp
  SlotPtr newest_live_slot(const std::string& id) ETLC_EXCLUDES(mu_);
  void wake_locked(const SlotPtr& slot) ETLC_REQUIRES(mu_);
  void promote_due_locked() ETLC_REQUIRES(mu_);
  void after_turn(const SlotPtr& slot, Turn t) ETLC_EXCLUDES(mu_);
  Turn close_slot(Slot& slot, LaneEnd end) ETLC_EXCLUDES(mu_);  // always Turn::closed
  void forget_durable(const std::string& id) ETLC_EXCLUDES(mu_);

  // lane_open.cpp
  std::optional<Turn> open_lane(Slot& slot, const TurnStart& t) ETLC_EXCLUDES(mu_);
  SplitProgress resume_point(const Slot& slot) ETLC_EXCLUDES(mu_);
  std::optional<Turn> open_sink_fence(Slot& slot, SplitProgress& resume, Clock::time_point now)
      ETLC_EXCLUDES(mu_);
  void open_user_lane(Slot& slot, const SplitProgress& resume) ETLC_EXCLUDES(mu_);

  // lane_turn.cpp
  Turn turn(Slot& slot) ETLC_EXCLUDES(mu_);
  std::optional<Turn> run_lane(Slot& slot, const TurnStart& t) ETLC_EXCLUDES(mu_);
  std::optional<Turn> drain_lane(Slot& slot, const TurnStart& t) ETLC_EXCLUDES(mu_);
  std::optional<Turn> cut_lane(Slot& slot, double keep) ETLC_EXCLUDES(mu_);
  std::optional<Turn> commit_due(Slot& slot, const TurnStart& t) ETLC_EXCLUDES(mu_);
  std::optional<Turn> step_lane(Slot& slot) ETLC_EXCLUDES(mu_);
  std::optional<Turn> complete_split(Slot& slot, const TurnStart& t) ETLC_EXCLUDES(mu_);
  std::optional<Turn> not_done(Slot& slot, Outcome o, Clock::time_point now) ETLC_EXCLUDES(mu_);
  std::optional<Turn> fail_split(Slot& slot, const TurnStart& t) ETLC_EXCLUDES(mu_);
  std::optional<Turn> commit_final(Slot& slot, const TurnStart& t) ETLC_EXCLUDES(mu_);
  std::optional<Turn> release_split(Slot& slot, const TurnStart& t) ETLC_EXCLUDES(mu_);
  Outcome fenced_call(Slot& slot, const char* what, const std::function<CommitResult()>& fn)
      ETLC_EXCLUDES(mu_);
  Outcome commit_progress(Slot& slot, const SplitProgress& progress) ETLC_EXCLUDES(mu_);
  Turn decline(Slot& slot) ETLC_EXCLUDES(mu_);
  Turn retry_later(Slot& slot, Clock::time_point now) ETLC_EXCLUDES(mu_);
  void poison(Slot& slot, std::string why) ETLC_EXCLUDES(mu_);
  void sink_refused_batch(Slot& slot, std::string why) ETLC_EXCLUDES(mu_);
  bool lapsed(Slot& slot) ETLC_EXCLUDES(mu_);

  const std::shared_ptr<MemberApi> member_;
  const std::shared_ptr<SplitSource> source_;
  const DriverOptions options_;
  const Clock& clock_;
  std::string instance_;          // member_->instance_id(), set once by the constructor
  Coordinator* built_ = nullptr;  // the Coordinator the config constructor built (member_)

  // Where the counters are exported: the given registry or a private one (kept alive here), or
  // the Coordinator member's own (alive as long as member_).
  std::shared_ptr<MetricsRegistry> registry_;
  std::optional<driver::DriverMetrics> metrics_;  // set by the constructor; lock-free counters
  std::atomic<std::uint64_t> steps_{0};           // DriverStats::steps, off mu_ (one per step)

  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> abort_requested_{false};

  // Control state (the control thread, or the step() caller).
  Phase phase_ = Phase::running;
  bool started_ = false;
  std::optional<DriverResult> result_;
  DriverResult pending_result_;
  Clock::time_point stop_deadline_{};
  bool lanes_forced_ = false;
  std::vector<std::thread> workers_;

  // Guards everything below and every Slot's control flags (Slot::mu names it; FlagsHeld).
  mutable Mutex mu_;
  CondVar work_cv_;
  std::deque<SlotPtr> ready_ ETLC_GUARDED_BY(mu_);
  std::vector<SlotPtr> delayed_ ETLC_GUARDED_BY(mu_);
  // id -> open slots, oldest first
  std::map<std::string, std::vector<SlotPtr>> live_ ETLC_GUARDED_BY(mu_);
  // id -> (epoch, last durable progress we wrote in it)
  std::map<std::string, std::pair<std::uint64_t, SplitProgress>> last_durable_ ETLC_GUARDED_BY(mu_);
  std::size_t live_count_ ETLC_GUARDED_BY(mu_) = 0;
  bool workers_stop_ ETLC_GUARDED_BY(mu_) = false;
  DriverStats stats_ ETLC_GUARDED_BY(mu_);
  std::uint64_t next_serial_ ETLC_GUARDED_BY(mu_) = 0;
};

}  // namespace etlc
