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
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "driver/slot.hpp"
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
    Clock::time_point now{};
  };

  Impl(std::shared_ptr<MemberApi> member, std::shared_ptr<SplitSource> source,
       DriverOptions options, const Clock& clock);
  ~Impl();

  // driver.cpp
  DriverResult run();
  std::optional<DriverResult> step();
  void worker_loop();
  void stop_workers();

  // control.cpp
  std::optional<DriverResult> control(std::chrono::milliseconds wait);
  void take_requests();
  void force_lanes_if_due();
  void take_events(std::chrono::milliseconds wait);
  void handle(Event event);
  void on_granted(SplitGranted grant);
  void on_revoke(const RevokeRequested& revoke);
  void on_lost(const SplitLost& loss);
  void on_stalled(const Stalled& stall);
  void on_fatal(const Fatal& fatal);
  void begin_stopping(DriverExit exit, std::string message);
  void stop_all_lanes(bool abort_lanes);
  std::optional<DriverResult> finish_if_quiet();

  // slot_table.cpp
  SlotPtr newest_live_slot(const std::string& id);
  void wake_locked(const SlotPtr& slot);
  void promote_due_locked();
  void after_turn(const SlotPtr& slot, Turn t);
  Turn close_slot(Slot& slot, LaneEnd end);  // always Turn::closed
  void forget_durable(const std::string& id);

  // lane_open.cpp
  std::optional<Turn> open_lane(Slot& slot, const TurnStart& t);
  SplitProgress resume_point(const Slot& slot);
  std::optional<Turn> open_sink_fence(Slot& slot, SplitProgress& resume, Clock::time_point now);
  void open_user_lane(Slot& slot, const SplitProgress& resume);

  // lane_turn.cpp
  Turn turn(Slot& slot);
  std::optional<Turn> run_lane(Slot& slot, const TurnStart& t);
  std::optional<Turn> drain_lane(Slot& slot, const TurnStart& t);
  std::optional<Turn> commit_due(Slot& slot, const TurnStart& t);
  std::optional<Turn> step_lane(Slot& slot);
  std::optional<Turn> complete_split(Slot& slot, const TurnStart& t);
  std::optional<Turn> fail_split(Slot& slot, const TurnStart& t);
  std::optional<Turn> commit_final(Slot& slot, const TurnStart& t);
  std::optional<Turn> release_split(Slot& slot, const TurnStart& t);
  Outcome fenced_call(Slot& slot, const char* what, const std::function<CommitResult()>& fn);
  Outcome commit_progress(Slot& slot, const SplitProgress& progress);
  Turn decline(Slot& slot);
  Turn retry_later(Slot& slot, Clock::time_point now);
  void poison(Slot& slot, std::string why);
  void sink_refused_batch(Slot& slot, std::string why);
  bool lapsed(Slot& slot);

  const std::shared_ptr<MemberApi> member_;
  const std::shared_ptr<SplitSource> source_;
  const DriverOptions options_;
  const Clock& clock_;
  std::string instance_;          // member_->instance_id(), set once by the constructor
  Coordinator* built_ = nullptr;  // the Coordinator the config constructor built (member_)

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

  mutable std::mutex mu_;  // guards everything below and every Slot's control flags
  std::condition_variable work_cv_;
  std::deque<SlotPtr> ready_;
  std::vector<SlotPtr> delayed_;
  std::map<std::string, std::vector<SlotPtr>> live_;  // id -> open slots, oldest first
  // id -> (epoch, last durable progress we wrote in it)
  std::map<std::string, std::pair<std::uint64_t, SplitProgress>> last_durable_;
  std::size_t live_count_ = 0;
  bool workers_stop_ = false;
  DriverStats stats_;
  std::uint64_t next_serial_ = 0;
};

}  // namespace etlc
