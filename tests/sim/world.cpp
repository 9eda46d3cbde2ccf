#include "world.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "core/keys.hpp"
#include "core/protocol_assert.hpp"
#include "core/repair_rules.hpp"
#include "etlc/fault_injecting_store.hpp"
#include "etlc/memory_store.hpp"
#include "etlc/metrics.hpp"
#include "log.hpp"
#include "recording_store.hpp"
#include "rng.hpp"
#include "runtime/member.hpp"
#include "sim_planner.hpp"
#include "sim_sink.hpp"
#include "sim_store.hpp"

namespace etlc::sim {

namespace {

constexpr VirtualNs kNever = std::numeric_limits<VirtualNs>::max();
constexpr VirtualNs kProbeEvery = 50 * kNsPerMs;
constexpr std::uint64_t kMaxEventsPerRun = 20'000'000;
constexpr int kMaxIdleSpins = 1000;

enum class Phase : std::uint8_t { faults, converge, complete, done };
const char* phase_name(Phase p) {
  switch (p) {
    case Phase::faults:
      return "faults";
    case Phase::converge:
      return "converge (faults off, source frozen)";
    case Phase::complete:
      return "complete (source running)";
    case Phase::done:
      return "done";
  }
  return "?";
}

enum class CallKind : std::int64_t {
  commit,
  complete,
  fail,
  release_drained,
  decline_revoke,
  split
};

enum FaultKind : std::size_t {
  kCrash,
  kPause,
  kLeaderCrash,
  kPartition,
  kWatchDrop,
  kWatchDelay,
  kStale,
  kOperator,
  kFaultKinds
};

// A lane reads records [lo, lo + count) of planned split `index`; next, durable and count are
// relative to lo (its watermark counts records done).
struct Lane {
  std::string id;
  std::size_t index = 0;
  std::uint64_t epoch = 0;
  std::uint64_t lo = 0;
  std::uint64_t count = 0;
  std::uint64_t next = 0;            // the next record to emit
  std::uint64_t durable = 0;         // the last watermark the store acknowledged
  std::string state;                 // its progress state: its end (absolute), once it has been cut
  std::optional<SplitResidual> cut;  // a cut not durable yet: landed before anything else
  bool fail_cut = false;             // split() threw UsageError: the split must be failed
  bool poison = false;
  std::uint64_t poison_at = 0;
  enum class Mode : std::uint8_t { run, drain, wedged } mode = Mode::run;
  bool declined = false;
  bool resume_first = false;  // resumed from a pause: commit before the control loop runs
  VirtualNs next_at = kNever;
  int since_commit = 0;
  SinkLane sink;  // its side of the fenced sink (sim_sink.hpp)
};

struct Incarnation {
  std::int32_t id = 0;
  std::size_t slot = 0;
  std::string instance;
  std::unique_ptr<SimClock> clock;
  std::shared_ptr<RecordingStore> rec;
  std::shared_ptr<FaultInjectingStore> fis;
  std::shared_ptr<SimStore> store;
  std::unique_ptr<MetricsRegistry> metrics;
  std::unique_ptr<runtime::Member> member;
  std::map<std::string, Lane> lanes;
  double p_coop = 0.7, p_decline = 0.15;  // revocations: cooperate, decline, else wedge
  bool checks_session = false;  // lanes stop when their session may have lapsed (as the Driver)
  int commit_every = 2;
  std::uint32_t pace_pct = 100;
  VirtualNs next_step_at = 0;
  VirtualNs last_step_at = -1;
  bool wake = false;
  VirtualNs paused_until = 0;
  VirtualNs last_pause_end = -1;
  bool alive = true;
  bool saw_complete = false;
  bool saw_stalled = false;
  std::uint64_t nonces = 0;
  int idle_spins = 0;          // consecutive steps that did nothing and asked to run again at once
  bool crash_mid_cut = false;  // its crash point was armed by a cut (World::lane_action)
};

struct Slot {
  std::string base;     // the slot's original id
  std::string current;  // the id of its latest process
  std::uint32_t max_in_flight = 1;
  std::uint32_t pace_pct = 100;  // its lanes' pause between actions, % of the scenario's
  std::int32_t inc = -1;
  VirtualNs restart_at = kNever;
  bool same_id = true;
  int restarts = 0;
};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += ',';
    out += s;
  }
  return out;
}

class World final : public FleetView {
 public:
  World(const RunParams& params, const RunOptions& options)
      : p_(params),
        trace_(options.tail, options.keep_full_trace),
        history_(p_, time_, trace_, *this),
        sched_(Rng::stream(p_.seed, 1)),
        faults_(Rng::stream(p_.seed, 2)),
        source_(Rng::stream(p_.seed, 3)),
        proc_(Rng::stream(p_.seed, 4)),
        planner_(std::make_shared<SimPlanner>(p_, faults_, faults_on_, trace_, time_)) {
    planner_->assert_on_first_call = options.assert_in_planner;
    env_.time = &time_;
    env_.rng = &faults_;
    env_.trace = &trace_;
    env_.history = &history_;
    env_.current_call = &call_;
    env_.schedule_late = [this](LateWrite lw) {
      lw.seq = late_seq_++;
      late_.push_back(std::move(lw));
      std::sort(late_.begin(), late_.end(), [](const LateWrite& a, const LateWrite& b) {
        return a.at != b.at ? a.at < b.at : a.seq < b.seq;
      });
    };
  }

  ~World() override {
    // Members first: they hold watches and stores that point into the World.
    for (auto& inc : incs_) inc->member.reset();
  }

  RunResult run();
  History& history() { return history_; }

  // FleetView
  const SimClock* clock_of(std::int32_t inc) const override {
    return inc >= 0 && static_cast<std::size_t>(inc) < incs_.size() ? incs_[inc]->clock.get()
                                                                    : nullptr;
  }
  bool running_since(std::int32_t inc, VirtualNs t) const override {
    if (inc < 0 || static_cast<std::size_t>(inc) >= incs_.size()) return false;
    const Incarnation& i = *incs_[inc];
    return i.alive && time_.now() >= i.paused_until && i.last_pause_end <= t;
  }
  std::size_t held_count(std::int32_t inc) const override {
    if (inc < 0 || static_cast<std::size_t>(inc) >= incs_.size()) return 0;
    const Incarnation& i = *incs_[inc];
    return i.alive && i.member ? i.member->held_ids().size() : 0;
  }

 private:
  // --- fleet ---
  Incarnation& spawn(std::size_t slot, const std::string& instance, VirtualNs first_step);
  void crash(Incarnation& inc, const std::string& why);
  void restart(std::size_t slot);
  void pause(Incarnation& inc, VirtualNs d);
  void resume(Incarnation& inc);
  Incarnation* pick_alive(bool unpaused_only);
  Incarnation* leader();

  // --- actions ---
  void begin_call() { ++call_; }
  void after_call(Incarnation& inc);
  void step(Incarnation& inc);
  void lane_action(Incarnation& inc, const std::string& id);
  CommitResult user_call(Incarnation& inc, CallKind kind, Lane& lane, std::uint64_t watermark);
  // Dynamic splitting: the lane's answer to SplitRequested, and a durable cut's check.
  void cut_lane(Incarnation& inc, Lane& lane, double keep);
  void check_cut_durable(const Lane& lane);
  // A granted split's range, from its descriptor and resume state; false (a finding) if wrong.
  bool open_range(Incarnation& inc, const SplitGranted& g, Lane& lane);
  // The lane resumed at the sink's watermark, with the state stored beside it (its end).
  void adopt_sink_state(Incarnation& inc, Lane& lane, const std::string& state);
  // A lane of a process that checks its session: it may send only while that session is live in
  // the store (invariant 8). False (and the lane dropped) when the session may have lapsed.
  bool lane_may_write(Incarnation& inc, const std::string& id);
  void handle_event(Incarnation& inc, const Event& e);
  void pump_all();
  void late_write();
  void fault(std::size_t kind);
  void operator_damage();
  VirtualNs jitter();
  VirtualNs lane_pause(const Incarnation& inc) {
    return source_.range(p_.lane_min_pause, p_.lane_max_pause) * inc.pace_pct / 100;
  }
  // The job's records made durable (completed splits whole), over all records, in parts per 10^6.
  std::uint64_t done_ppm() const;

  // --- phases and liveness ---
  void end_faults();
  void start_completion();
  void probe();
  bool converged(std::string& why);
  bool completed(std::string& why);
  bool one_leader(std::string& why, Incarnation*& out);
  std::string dump() const;

  const RunParams& p_;
  VirtualTime time_;
  Trace trace_;
  History history_;
  SimSink sink_{p_, time_, trace_, history_};  // the sink database, fenced by the epoch
  Rng sched_, faults_, source_, proc_;
  Rng split_rng_{Rng::stream(p_.seed, 7)};  // the lanes' cuts (drawn only when splitting is on)
  bool faults_on_ = true;
  std::shared_ptr<MemoryStore> mem_ = std::make_shared<MemoryStore>();
  // The simulated operator writes straight into the shared store, reported as kOperatorInc.
  std::shared_ptr<RecordingStore> operator_store_ =
      std::make_shared<RecordingStore>(mem_, history_);
  std::shared_ptr<SimPlanner> planner_;
  SimEnv env_;
  std::uint64_t call_ = 0;

  std::vector<std::unique_ptr<Incarnation>> incs_;
  std::vector<Slot> slots_;
  std::vector<std::string> names_;
  std::vector<LateWrite> late_;
  std::uint64_t late_seq_ = 0;
  VirtualNs next_fault_[kFaultKinds] = {};

  Phase phase_ = Phase::faults;
  VirtualNs phase_deadline_ = kNever;
  VirtualNs next_probe_ = kNever;
  VirtualNs stable_since_ = -1;
  std::uint64_t stable_assign_writes_ = 0;
  bool frozen_ = false;
  std::string last_why_;
  RunStats stats_;
  // Splits revoked late (revokes_late), with the pace of the member they were revoked from: their
  // next grant tells whether the move went to a faster member.
  std::map<std::string, std::uint32_t> late_revoked_from_pace_;
};

Incarnation& World::spawn(std::size_t slot, const std::string& instance, VirtualNs first_step) {
  auto owned = std::make_unique<Incarnation>();
  Incarnation* inc = owned.get();
  inc->id = static_cast<std::int32_t>(incs_.size());
  inc->slot = slot;
  inc->instance = instance;
  const VirtualNs now = time_.now();
  const std::int64_t origin = proc_.range(3600, 7200) * kNsPerS;
  const std::int64_t ppm = proc_.range(-p_.faults.skew_ppm, p_.faults.skew_ppm);
  inc->clock = std::make_unique<SimClock>(time_, now, origin, ppm);
  inc->rec = std::make_shared<RecordingStore>(mem_, history_);
  inc->fis = std::make_shared<FaultInjectingStore>(inc->rec, 0);
  inc->store = std::make_shared<SimStore>(
      env_, inc->id, instance, [inc] { return inc->member ? inc->member->nonce() : std::string(); },
      inc->fis, inc->rec);
  if (faults_on_) {
    inc->store->faults.op_fail = p_.faults.op_fail;
    inc->store->faults.op_unknown = p_.faults.op_unknown;
  }
  inc->metrics = std::make_unique<MetricsRegistry>();
  const double u = proc_.unit();
  inc->p_coop = 0.5 + 0.45 * u;
  inc->p_decline = (1 - inc->p_coop) / 2;
  inc->commit_every = static_cast<int>(proc_.range(1, 4));
  inc->pace_pct = slots_[slot].pace_pct;
  inc->checks_session = sink_.rng().chance(0.5);

  CoordinatorConfig c;
  c.instance_id = instance;
  c.lease_duration = std::chrono::milliseconds(p_.lease_ms);
  c.op_timeout = std::chrono::milliseconds(p_.op_timeout_ms);
  c.max_in_flight = slots_[slot].max_in_flight;
  c.dynamic_splitting = true;  // asked always; p_.split decides whether lanes cut
  c.rebalance_delay = std::chrono::milliseconds(p_.rebalance_delay_ms);
  c.drain_deadline = std::chrono::milliseconds(p_.drain_deadline_ms);
  c.max_attempts = p_.max_attempts;
  c.max_planner_failures = 1000;  // the scenario's planner_fail rate must not end the job
  c.replan_interval = std::chrono::milliseconds(p_.replan_interval_ms);
  c.assignment_interval = std::chrono::milliseconds(p_.assignment_interval_ms);
  c.bulk_ops_per_step = p_.bulk_ops_per_step;
  c.balance_on_remaining_work = p_.faults.remaining_work;
  if (p_.faults.damping_ppm >= 0)
    c.damping_ppm_of_mean = static_cast<std::uint32_t>(p_.faults.damping_ppm);
  if (p_.faults.cooldown_ms >= 0) {
    c.rebalance_cooldown = std::chrono::milliseconds(p_.faults.cooldown_ms);
  }
  if (p_.faults.pin_ppm >= 0) c.pin_remaining_ppm = static_cast<std::uint32_t>(p_.faults.pin_ppm);
  c.balance_by_pace = p_.faults.pace;
  if (p_.faults.pace_gain_ppm >= 0) {
    c.pace_gain_ppm = static_cast<std::uint32_t>(p_.faults.pace_gain_ppm);
  }
  c.validate();

  runtime::Member::Options o;
  o.wake = [inc] { inc->wake = true; };
  o.nonce_source = [inc] { return fmt::format("n{}-{}", inc->id, ++inc->nonces); };
  o.unsafe.commit_without_fence = p_.faults.unsafe_commit_without_fence;
  inc->member = std::make_unique<runtime::Member>(c, inc->store, planner_, *inc->clock,
                                                  *inc->metrics, std::move(o));
  inc->next_step_at = first_step;
  names_.push_back(fmt::format("{}#{}", instance, inc->id));
  trace_.add(now, TraceKind::note, inc->id,
             fmt::format("process started as '{}' (clock {:+} ppm, lanes at {} % pause)", instance,
                         ppm, inc->pace_pct));
  slots_[slot].inc = inc->id;
  slots_[slot].current = instance;
  slots_[slot].restart_at = kNever;
  incs_.push_back(std::move(owned));
  return *inc;
}

void World::crash(Incarnation& inc, const std::string& why) {
  const VirtualNs now = time_.now();
  trace_.add(now, TraceKind::fault, inc.id, "crash: " + why);
  ++stats_.crashes;
  inc.member->abandon();
  inc.alive = false;
  inc.store->faults.dead = true;
  inc.lanes.clear();
  inc.member.reset();
  Slot& s = slots_[inc.slot];
  s.inc = -1;
  s.same_id = faults_.chance(p_.faults.restart_same_id);
  s.restart_at = phase_ == Phase::faults
                     ? now + faults_.range(100 * kNsPerMs, 2 * p_.lease_ms * kNsPerMs)
                     : now + faults_.range(kNsPerMs, 100 * kNsPerMs);
}

void World::restart(std::size_t slot) {
  Slot& s = slots_[slot];
  std::string id = s.current;
  if (s.same_id) {
    ++stats_.restarts_same_id;
  } else {
    ++stats_.restarts_new_id;
    id = fmt::format("{}-r{}", s.base, ++s.restarts);
  }
  spawn(slot, id, time_.now() + jitter());
}

void World::pause(Incarnation& inc, VirtualNs d) {
  inc.paused_until = time_.now() + d;
  ++stats_.pauses;
  trace_.add(time_.now(), TraceKind::fault, inc.id, "pause", d / kNsPerMs);
}

void World::resume(Incarnation& inc) {
  const VirtualNs now = time_.now();
  inc.paused_until = now;
  inc.last_pause_end = now;
  trace_.add(now, TraceKind::fault, inc.id, "resume");
  // A zombie's lanes act before its control loop notices anything: they try to commit.
  for (auto& [id, lane] : inc.lanes) {
    if (lane.mode == Lane::Mode::wedged) continue;
    lane.resume_first = true;
    lane.next_at = now;
  }
  inc.next_step_at = now + sched_.range(1'000, 2 * kNsPerMs);
}

Incarnation* World::pick_alive(bool unpaused_only) {
  std::vector<Incarnation*> c;
  for (auto& inc : incs_) {
    if (inc->alive && (!unpaused_only || time_.now() >= inc->paused_until)) c.push_back(inc.get());
  }
  if (c.empty()) return nullptr;
  return c[faults_.below(c.size())];
}

Incarnation* World::leader() {
  for (auto& inc : incs_) {
    if (inc->alive && inc->member->is_leader()) return inc.get();
  }
  return nullptr;
}

VirtualNs World::jitter() {
  VirtualNs j = sched_.range(1'000, kNsPerMs);  // 1 us .. 1 ms of scheduling latency
  if (sched_.chance(0.02)) j += sched_.range(kNsPerMs, 30 * kNsPerMs);  // an occasional hiccup
  return j;
}

void World::pump_all() {
  for (auto& inc : incs_) {
    if (!inc->alive) continue;
    inc->store->pump();
    inc->next_step_at =
        std::min(inc->next_step_at, inc->store->next_delivery_after(inc->last_step_at));
  }
}

void World::after_call(Incarnation& inc) {
  const std::uint64_t call = call_;
  if (inc.alive && inc.store->faults.crash_hit && inc.crash_mid_cut) {
    ++stats_.cut_crashes;
    crash(inc, "crash point reached mid-cut");
  } else if (inc.alive && inc.store->faults.crash_hit) {
    const auto keys = history_.keys_in_call(call);
    bool plan = false, publish = false;
    for (const auto& k : keys) {
      plan |= k.rfind(core::kSpecPrefix, 0) == 0 || k.rfind(core::kSplitPrefix, 0) == 0 ||
              k == core::kPlanKey;
      publish |= k.rfind(core::kAssignPrefix, 0) == 0;
    }
    ++stats_.leader_crashes;
    stats_.mid_plan += plan ? 1 : 0;
    stats_.mid_publish += publish ? 1 : 0;
    crash(inc, fmt::format("crash point reached{}{}", plan ? " mid-plan" : "",
                           publish ? " mid-publish" : ""));
  }
  history_.end_call(call);
  if (inc.alive) {
    while (inc.alive) {
      auto e = inc.member->splits().poll_event();
      if (!e) break;
      ++stats_.events;
      handle_event(inc, *e);
    }
    if (inc.alive && inc.member->stopped()) crash(inc, "the member stopped (Fatal)");
  }
  if (inc.alive && inc.wake) {
    inc.wake = false;
    inc.next_step_at = std::min(inc.next_step_at, time_.now() + jitter());
  }
  pump_all();
}

void World::step(Incarnation& inc) {
  begin_call();
  const VirtualNs now = time_.now();
  const std::uint64_t activity = inc.store->activity();
  const Clock::time_point next = inc.member->step();
  ++stats_.steps;
  const VirtualNs due = std::max(inc.clock->virtual_at(next), now);
  // A member that keeps asking to run again at once without sleeping in between, in steps that
  // do nothing (no store operation, no watch event), is in a busy loop: in production its
  // control thread would spin. Steps that do work may ask to run at once (more pending).
  if (due > now + 1000) {
    inc.idle_spins = 0;
  } else if (inc.store->activity() == activity && ++inc.idle_spins == kMaxIdleSpins) {
    history_.fail(5, fmt::format("{}'s control loop spins: {} steps did no work and asked to "
                                 "run again at once, without sleeping in between",
                                 names_[inc.id], kMaxIdleSpins));
  }
  inc.last_step_at = now;
  inc.next_step_at = due + jitter();
  inc.wake = false;
  trace_.add(now, TraceKind::step, inc.id, {}, inc.next_step_at);
  after_call(inc);
}

CommitResult World::user_call(Incarnation& inc, CallKind kind, Lane& lane,
                              std::uint64_t watermark) {
  begin_call();
  ++stats_.calls;
  if (inc.checks_session && kind != CallKind::decline_revoke &&
      !history_.session_not_ended(inc.instance, lane.sink.nonce)) {
    history_.fail(8, fmt::format("{} sent a call for split {} after its session {} ended in the "
                                 "store (a lane must stop once its session may have lapsed)",
                                 names_[inc.id], lane.id, lane.sink.nonce));
  }
  const std::string id = lane.id;
  const std::uint64_t epoch = lane.epoch;
  CommitResult r;
  const char* what = "?";
  // The lane's watermark counts records, as the split's weight does: it is also how much is done.
  const SplitProgress progress{watermark, lane.state,
                               p_.faults.report_done ? std::optional(watermark) : std::nullopt};
  try {
    switch (kind) {
      case CallKind::commit:
        what = "commit";
        r = inc.member->splits().commit(id, progress, epoch);
        break;
      case CallKind::complete:
        what = "complete";
        r = inc.member->splits().complete(id, progress, epoch);
        break;
      case CallKind::fail:
        what = "fail";
        r = inc.member->splits().fail(id, "poison record (simulated)", epoch);
        break;
      case CallKind::release_drained:
        what = "release_drained";
        r = inc.member->splits().release_drained(id, epoch);
        break;
      case CallKind::decline_revoke:
        what = "decline_revoke";
        inc.member->splits().decline_revoke(id, epoch);
        r = CommitResult{CommitStatus::durable, {}};
        break;
      case CallKind::split:
        what = "split";
        r = inc.member->splits().split(id, progress, *lane.cut, epoch);
        break;
    }
  } catch (const UsageError& e) {
    // The lane's watermark is what the runtime granted it. A runtime that reads stale records
    // (a store-contract violation the stale scenario injects on purpose) may grant below what it
    // later believes is durable; anywhere else this is a runtime bug.
    // A residual the operator overwrote is "another residual" to a retried cut: the contract
    // says fail the split then, as after any UsageError of split().
    const bool damaged = kind == CallKind::split && history_.stats().operator_writes > 0;
    if (inc.store->stale_served() > 0 || damaged) {
      // The lane keeps going (its later commits are higher) rather than abandoning a split the
      // runtime still holds; a cut that threw fails the split next.
      lane.fail_cut = kind == CallKind::split;
      ++stats_.stale_anomalies;
      trace_.add(
          time_.now(), TraceKind::note, inc.id,
          fmt::format("after stale reads, {} of {} threw UsageError: {}", what, id, e.what()));
      r = CommitResult{CommitStatus::retryable, e.what()};
    } else {
      history_.fail(2, fmt::format("{} of split {} by {} threw UsageError: {}", what, id,
                                   names_[inc.id], e.what()));
      r = CommitResult{CommitStatus::fenced, e.what()};
    }
  }
  trace_.add(time_.now(), TraceKind::call, inc.id, id, static_cast<std::int64_t>(kind),
             kind == CallKind::decline_revoke ? -1 : static_cast<std::int64_t>(r.status));
  if (kind != CallKind::decline_revoke) {
    if (r.status == CommitStatus::fenced) {
      ++stats_.fenced;
      history_.on_fenced(call_, id);
    } else if (r.durable()) {
      std::optional<std::pair<std::string, std::string>> owner;
      if (kind == CallKind::commit || kind == CallKind::split) {
        owner = std::make_pair(inc.instance, inc.member->nonce());
      }
      history_.on_durable(call_, id, epoch, watermark, what, owner, inc.store->stale_served() == 0);
      if (kind == CallKind::split && inc.store->stale_served() == 0) check_cut_durable(lane);
    }
  }
  return r;
}

bool World::lane_may_write(Incarnation& inc, const std::string& id) {
  Lane& lane = inc.lanes.at(id);
  if (!inc.checks_session || lane.mode == Lane::Mode::wedged) return true;
  if (p_.faults.unsafe_ignore_lapse) return true;  // test-only: invariant 8 must catch it
  if (inc.member->session_live(lane.sink.session)) return true;
  trace_.add(time_.now(), TraceKind::note, inc.id,
             fmt::format("lane of {} stops: its session may have lapsed", id));
  sink_.count_lapsed_lane();
  inc.lanes.erase(id);
  return false;
}

void World::lane_action(Incarnation& inc, const std::string& id) {
  if (!lane_may_write(inc, id)) return;
  Lane& lane = inc.lanes.at(id);
  const VirtualNs now = time_.now();
  auto finish = [&](CommitResult r, bool terminal_on_durable) {
    // Called with the call's outcome, before after_call (which may drop the lane).
    auto it = inc.lanes.find(id);
    if (it != inc.lanes.end()) {
      if (r.status == CommitStatus::fenced || (terminal_on_durable && r.durable())) {
        inc.lanes.erase(it);
      } else {
        it->second.next_at = now + lane_pause(inc);
      }
    }
    after_call(inc);
  };
  // A cut that threw is failed, and a cut not yet durable lands before any other commit (the
  // MemberApi::split contract): a commit carrying the new end without the residual loses rows.
  if (lane.mode != Lane::Mode::wedged && lane.fail_cut) {
    finish(user_call(inc, CallKind::fail, lane, lane.durable), true);
    return;
  }
  if (lane.mode != Lane::Mode::wedged && lane.cut) {
    // Sometimes the process dies a few store operations into the cut: before the residual's
    // record, before the parent's CAS, or with the CAS landed.
    if (faults_on_ && p_.faults.crash_per_s > 0 && inc.store->faults.crash_after == 0 &&
        split_rng_.chance(0.1)) {
      inc.store->faults.crash_after = split_rng_.range(1, 3);
      inc.crash_mid_cut = true;
    }
    const std::uint64_t wm = lane.next;
    CommitResult r = user_call(inc, CallKind::split, lane, wm);
    if (r.durable()) {
      lane.durable = wm;
      lane.cut.reset();
    }
    finish(r, false);
    return;
  }
  switch (lane.mode) {
    case Lane::Mode::wedged:
      lane.next_at = kNever;
      return;
    case Lane::Mode::drain: {
      if (lane.next > lane.durable) {
        const std::uint64_t wm = lane.next;
        CommitResult r = user_call(inc, CallKind::commit, lane, wm);
        if (r.durable()) lane.durable = wm;
        finish(r, false);
        return;
      }
      CommitResult r = user_call(inc, CallKind::release_drained, lane, lane.durable);
      finish(r, true);
      return;
    }
    case Lane::Mode::run:
      break;
  }
  if (lane.resume_first) {
    lane.resume_first = false;
    // A zombie's first act: commit what it had (the store fences it), or, half of the time, flush
    // a batch to the sink (the sink's fence refuses it once the new owner opened the split).
    if (lane.next > lane.durable && !sink_.rng().chance(0.5)) {
      ++stats_.zombie_commits;
      const std::uint64_t wm = lane.next;
      CommitResult r = user_call(inc, CallKind::commit, lane, wm);
      if (r.durable()) lane.durable = wm;
      finish(r, false);
      return;
    }
  }
  // The sink's fence stands at a newer epoch: report the split failed at once, as the Driver
  // does. The coordination store must answer fenced (a newer owner exists).
  auto report_refusal = [&] {
    const std::string split = lane.id;
    const std::uint64_t epoch = lane.epoch;
    const CommitResult r = user_call(inc, CallKind::fail, lane, lane.durable);
    sink_.on_refusal_answer(split, epoch, r.durable());
    finish(r, true);
  };
  if (lane.sink.refused) {
    report_refusal();
    return;
  }
  if (frozen_) {
    lane.next_at = kNever;  // the source is frozen: hold the split, emit nothing
    return;
  }
  if (lane.poison && lane.next >= lane.poison_at) {
    finish(user_call(inc, CallKind::fail, lane, lane.durable), true);
    return;
  }
  if (lane.next < lane.count || !lane.sink.opened) {
    // Records reach the sink in one fenced transaction per batch (sim_sink.hpp); the lane
    // advances only past what the sink made durable.
    const std::uint64_t k =
        lane.next < lane.count
            ? std::min<std::uint64_t>(
                  static_cast<std::uint64_t>(source_.range(1, p_.lane_max_batch)),
                  lane.count - lane.next)
            : 0;
    if (inc.checks_session && !history_.session_not_ended(inc.instance, lane.sink.nonce)) {
      history_.fail(8, fmt::format("{} wrote split {} to the sink after its session {} ended in "
                                   "the store",
                                   names_[inc.id], lane.id, lane.sink.nonce));
    }
    lane.sink.state = lane.state;
    lane.next = sink_.emit(inc.id, lane.epoch, lane.sink, lane.next, k);
    if (auto state = std::exchange(lane.sink.resumed_state, std::nullopt)) {
      adopt_sink_state(inc, lane, *state);
    }
    if (lane.sink.refused) {
      report_refusal();
      return;
    }
    if (!lane.sink.opened) {
      lane.next_at = now + lane_pause(inc);
      return;
    }
  }
  if (lane.next >= lane.count && !lane.poison) {
    finish(user_call(inc, CallKind::complete, lane, lane.count), true);
    return;
  }
  if (++lane.since_commit >= inc.commit_every) {
    lane.since_commit = 0;
    const std::uint64_t wm = lane.next;
    CommitResult r = user_call(inc, CallKind::commit, lane, wm);
    if (r.durable()) lane.durable = wm;
    finish(r, false);
    return;
  }
  lane.next_at = now + lane_pause(inc);
}

// The lane's records: a planned split's descriptor is its record count, a residual's its range
// (History::residual_descriptor); a resume state names the end a cut gave it.
bool World::open_range(Incarnation& inc, const SplitGranted& g, Lane& lane) {
  std::uint64_t hi = 0;
  if (auto r = History::parse_residual(g.spec.descriptor)) {
    lane.lo = r->lo;
    hi = r->hi;
  } else {
    hi = std::stoull(g.spec.descriptor);
  }
  std::uint64_t end = hi;
  if (!g.progress.state.empty()) end = std::stoull(g.progress.state);
  if (end < lane.lo + g.progress.watermark || end > hi) {
    history_.fail(3,
                  fmt::format("{} was granted split {} at watermark {} with end {} outside its "
                              "range {}..{}",
                              names_[inc.id], g.spec.id, g.progress.watermark, end, lane.lo, hi));
    return false;
  }
  lane.count = end - lane.lo;
  lane.state = g.progress.state;
  return true;
}

void World::adopt_sink_state(Incarnation& inc, Lane& lane, const std::string& state) {
  if (state.empty() || state == lane.state) return;
  const std::uint64_t end = std::stoull(state);
  if (end < lane.lo + lane.next || end > lane.lo + lane.count) {
    history_.fail(
        7, fmt::format("{} resumed split {} at the sink's watermark {} with end {} "
                       "outside its range {}..{}",
                       names_[inc.id], lane.id, lane.next, end, lane.lo, lane.lo + lane.count));
    return;
  }
  lane.state = state;
  lane.count = end - lane.lo;
  lane.poison_at = std::min(lane.poison_at, lane.count);
}

// Asked to split: refuse at random (or when the lane cannot: not running, a cut under way, the
// sink not opened yet, a batch in doubt), else cut at a random record at or after `keep` of what
// is left, and end there. The cut lands at the lane's next action. A batch in doubt (an unknown
// outcome not settled, a write that may still land) would land with the old end in the sink's
// progress, and a lane resumed from it would read past the cut (sim chaos 7511): the Lane::split
// contract has the lane settle it first, as the PostgreSQL example does, or decline.
void World::cut_lane(Incarnation& inc, Lane& lane, double keep) {
  const std::uint64_t left = lane.count - std::min(lane.count, lane.next);
  const auto kept = static_cast<std::uint64_t>(std::ceil(keep * static_cast<double>(left)));
  const std::uint64_t from = lane.next + std::max<std::uint64_t>(kept, 1);
  const bool in_doubt = sink_.reach(lane.sink) > lane.next;
  const bool can = lane.mode == Lane::Mode::run && !lane.cut && !lane.fail_cut &&
                   lane.sink.opened && !lane.sink.refused && !in_doubt && from < lane.count;
  if (!can || split_rng_.chance(p_.faults.split_refuse)) {
    ++stats_.cuts_refused;
    return;
  }
  // Test-only (unsafe_cut): give away the last record emitted; invariant 3 must catch it.
  const bool unsafe = p_.faults.unsafe_cut_below_emitted && lane.next > 0;
  const auto at =
      unsafe ? lane.next - 1
             : static_cast<std::uint64_t>(split_rng_.range(
                   static_cast<std::int64_t>(from), static_cast<std::int64_t>(lane.count - 1)));
  lane.cut =
      SplitResidual{History::residual_descriptor({lane.index, lane.lo + at, lane.lo + lane.count}),
                    lane.count - at};
  lane.count = at;
  lane.state = std::to_string(lane.lo + at);
  lane.poison_at = std::min(lane.poison_at, at);  // a poison lane still fails before its end
  lane.next_at = std::min(lane.next_at, time_.now() + split_rng_.range(0, 50 * kNsPerMs));
  ++stats_.cuts_made;
  trace_.add(time_.now(), TraceKind::note, inc.id,
             fmt::format("lane of {} cuts at {} (next {}): residual '{}'", lane.id, lane.lo + at,
                         lane.lo + lane.next, lane.cut->descriptor));
}

// `durable` for a cut: the parent's record names a residual that starts at the lane's new end.
void World::check_cut_durable(const Lane& lane) {
  const SplitTruth& t = history_.splits().at(lane.id);
  const auto c = t.rec.children.empty() ? history_.splits().end()
                                        : history_.splits().find(t.rec.children.back());
  if (c == history_.splits().end() || c->second.lo != lane.lo + lane.count) {
    history_.fail(2,
                  fmt::format("split() of {} returned 'durable' but its record names no residual "
                              "from {}",
                              lane.id, lane.lo + lane.count));
  }
}

void World::handle_event(Incarnation& inc, const Event& e) {
  const VirtualNs now = time_.now();
  if (const auto* g = std::get_if<SplitGranted>(&e)) {
    trace_.add(now, TraceKind::event, inc.id, g->spec.id, 0, static_cast<std::int64_t>(g->epoch));
    if (auto late = late_revoked_from_pace_.find(g->spec.id);
        late != late_revoked_from_pace_.end()) {
      if (inc.pace_pct < late->second) ++stats_.revokes_late_to_faster;
      late_revoked_from_pace_.erase(late);
    }
    const std::size_t idx = history_.split_index(g->spec.id);
    if (idx == std::string::npos) {
      history_.fail(2,
                    fmt::format("{} was granted unknown split '{}'", names_[inc.id], g->spec.id));
      return;
    }
    if (inc.lanes.count(g->spec.id)) {
      history_.fail(2, fmt::format("{} was granted split {} while its lane was still open (no "
                                   "loss or release in between)",
                                   names_[inc.id], g->spec.id));
    }
    const SplitTruth& t = history_.splits().at(g->spec.id);
    const std::string descriptor = t.parent.empty()
                                       ? std::to_string(p_.records[idx])
                                       : History::residual_descriptor({idx, t.lo, t.hi});
    if (g->spec.weight != t.hi - t.lo || g->spec.descriptor != descriptor) {
      history_.fail(
          1, fmt::format("{} was granted split {} with a wrong spec", names_[inc.id], g->spec.id));
    }
    // A grant resumes from durable progress: never beyond it (records in between would be lost),
    // and exactly from it unless the claim read a stale record (then commits will be fenced).
    if (g->epoch > t.rec.epoch || g->progress.watermark > t.rec.progress.watermark) {
      history_.fail(1, fmt::format("{} was granted split {} at epoch {} watermark {}, beyond the "
                                   "store's epoch {} watermark {}",
                                   names_[inc.id], g->spec.id, g->epoch, g->progress.watermark,
                                   t.rec.epoch, t.rec.progress.watermark));
    } else if (g->epoch != t.rec.epoch || g->progress != t.rec.progress ||
               t.rec.owner != inc.instance) {
      ++stats_.stale_grants;
      trace_.add(
          now, TraceKind::note, inc.id,
          fmt::format("stale grant of {}: store holds epoch {} watermark {} owner {}", g->spec.id,
                      t.rec.epoch, t.rec.progress.watermark, t.rec.owner.value_or("nobody")));
    }
    Lane lane;
    lane.id = g->spec.id;
    lane.index = idx;
    lane.epoch = g->epoch;
    if (!open_range(inc, *g, lane)) return;
    lane.next = lane.durable = g->progress.watermark;
    lane.sink.session = g->session;
    lane.sink.nonce = inc.member->nonce();
    lane.sink.split = lane.id;
    lane.sink.base = idx;
    lane.sink.lo = lane.lo;
    lane.poison = p_.poison.count(idx) > 0;
    lane.poison_at = lane.count == 0 ? 0 : source_.below(lane.count);
    lane.next_at = now + lane_pause(inc);
    inc.lanes[lane.id] = std::move(lane);
  } else if (const auto* r = std::get_if<RevokeRequested>(&e)) {
    trace_.add(now, TraceKind::event, inc.id, r->split_id, 1);
    ++stats_.revokes;
    auto it = inc.lanes.find(r->split_id);
    if (it == inc.lanes.end()) return;
    Lane& lane = it->second;
    // The tail of the job (issue 16): revocations once 80 % of its records are durable, and of
    // splits 90 % done by their own durable progress.
    if (phase_ == Phase::complete && done_ppm() >= 800'000) {
      ++stats_.revokes_late;
      late_revoked_from_pace_[r->split_id] = inc.pace_pct;
    }
    if (lane.count > 0 && lane.durable * 10 >= lane.count * 9) ++stats_.revokes_nearly_done;
    const double u = source_.unit();
    if (u < inc.p_coop) {
      lane.mode = Lane::Mode::drain;
      // Sometimes the drain outruns the deadline and the release is forced.
      lane.next_at = now + source_.range(0, p_.drain_deadline_ms * kNsPerMs * 13 / 10);
    } else if (u < inc.p_coop + inc.p_decline) {
      lane.declined = true;  // keeps running until the forced release takes it
      user_call(inc, CallKind::decline_revoke, lane, lane.durable);
      history_.end_call(call_);
    } else {
      lane.mode = Lane::Mode::wedged;
      lane.next_at = kNever;
    }
  } else if (const auto* l = std::get_if<SplitLost>(&e)) {
    trace_.add(now, TraceKind::event, inc.id, l->split_id, 2, static_cast<std::int64_t>(l->reason));
    inc.lanes.erase(l->split_id);
  } else if (const auto* q = std::get_if<SplitQuarantined>(&e)) {
    trace_.add(now, TraceKind::event, inc.id, q->split_id, 3);
    ++stats_.quarantined_events;
    inc.lanes.erase(q->split_id);
  } else if (std::holds_alternative<AllComplete>(e)) {
    trace_.add(now, TraceKind::event, inc.id, {}, 4);
    inc.saw_complete = true;
    history_.on_verdict_event(inc.id, true);
  } else if (std::holds_alternative<Stalled>(e)) {
    trace_.add(now, TraceKind::event, inc.id, {}, 5);
    inc.saw_stalled = true;
    history_.on_verdict_event(inc.id, false);
  } else if (const auto* ask = std::get_if<SplitRequested>(&e)) {
    if (!p_.split) return;  // the lanes ignore requests (ignoring is always safe)
    trace_.add(now, TraceKind::event, inc.id, ask->split_id, 7,
               static_cast<std::int64_t>(ask->epoch));
    ++stats_.split_requests;
    auto it = inc.lanes.find(ask->split_id);
    if (it != inc.lanes.end() && it->second.epoch == ask->epoch) {
      cut_lane(inc, it->second, ask->keep);
    }
  } else if (const auto* f = std::get_if<Fatal>(&e)) {
    trace_.add(now, TraceKind::event, inc.id, f->message, 6);
    ++stats_.fatal;
    if (phase_ != Phase::faults) {
      history_.fail(5, fmt::format("{} stopped with Fatal after the faults stopped: {}",
                                   names_[inc.id], f->message));
    }
  }
}

std::uint64_t World::done_ppm() const {
  std::uint64_t total = 0, done = 0;
  for (std::uint64_t n : p_.records) total += n;
  for (const auto& [id, t] : history_.splits()) {
    if (!t.parent.empty() && (!t.exists || !history_.job_split(t))) continue;
    const std::uint64_t count = history_.length(t);
    done += t.rec.status == core::SplitStatus::completed
                ? count
                : std::min(count, t.rec.progress.watermark);
  }
  return total == 0 ? 1'000'000 : done * 1'000'000 / total;
}

void World::late_write() {
  LateWrite lw = std::move(late_.front());
  late_.erase(late_.begin());
  ++stats_.late_writes;
  lw.store->context = lw.writer;
  try {
    switch (lw.kind) {
      case OpKind::create:
        lw.store->create(lw.key, lw.value);
        break;
      case OpKind::update:
        lw.store->update(lw.key, lw.value, lw.expected);
        break;
      default:
        lw.store->erase(lw.key, lw.expected);
        break;
    }
  } catch (const StoreError&) {
  }
  pump_all();
}

void World::fault(std::size_t kind) {
  const VirtualNs now = time_.now();
  const VirtualNs lease = p_.lease_ms * kNsPerMs;
  switch (kind) {
    case kCrash:
      if (auto* inc = pick_alive(false)) crash(*inc, "process killed");
      break;
    case kPause:
      if (auto* inc = pick_alive(true)) {
        pause(*inc, faults_.range(lease / 2, 3 * lease + p_.rebalance_delay_ms * kNsPerMs));
      }
      break;
    case kLeaderCrash:
      if (auto* inc = leader(); inc != nullptr && inc->store->faults.crash_after == 0) {
        inc->store->faults.crash_after = faults_.range(1, 12);
        ++stats_.leader_crashes_armed;
        trace_.add(now, TraceKind::fault, inc->id, "leader dies after k store ops",
                   inc->store->faults.crash_after);
      }
      break;
    case kPartition:
      if (auto* inc = pick_alive(false)) {
        inc->store->faults.partition_until = now + faults_.range(lease / 4, 2 * lease);
        ++stats_.partitions;
        trace_.add(now, TraceKind::fault, inc->id, "partition",
                   (inc->store->faults.partition_until - now) / kNsPerMs);
      }
      break;
    case kWatchDrop:
      if (auto* inc = pick_alive(false)) {
        inc->store->break_watches();
        inc->next_step_at = std::min(inc->next_step_at, now + jitter());
        ++stats_.watch_drops;
        trace_.add(now, TraceKind::fault, inc->id, "watches dropped");
      }
      break;
    case kWatchDelay:
      if (auto* inc = pick_alive(false)) {
        inc->store->faults.slow_watch_until = now + faults_.range(kNsPerS, 5 * kNsPerS);
        inc->store->faults.slow_watch_max = faults_.range(50 * kNsPerMs, 1500 * kNsPerMs);
        ++stats_.slow_watches;
        trace_.add(now, TraceKind::fault, inc->id, "slow watch",
                   inc->store->faults.slow_watch_max / kNsPerMs);
      }
      break;
    case kStale:
      if (auto* inc = pick_alive(false)) {
        inc->store->faults.stale_until = now + faults_.range(kNsPerS, 5 * kNsPerS);
        inc->store->faults.stale_p = 0.2 + 0.8 * faults_.unit();
        ++stats_.stale_episodes;
        trace_.add(now, TraceKind::fault, inc->id, "stale reads");
      }
      break;
    case kOperator:
      operator_damage();
      break;
    default:
      break;
  }
}

// An outsider damages one record of the job: garbage, a foreign version, a record of another
// kind, a large unreadable value, or a delete (a purge is a delete to the memory store).
void World::operator_damage() {
  const VirtualNs now = time_.now();
  std::vector<Entry> keys;
  for (Entry& e : mem_->list("")) {
    if (e.key.rfind("etlc-probe.", 0) != 0) keys.push_back(std::move(e));
  }
  if (keys.empty()) return;
  const Entry& victim = keys[faults_.below(keys.size())];
  static const char* const kActions[] = {"garbage", "foreign version", "wrong kind", "large",
                                         "delete"};
  const std::uint64_t roll = faults_.below(20);
  const std::size_t action = roll < 5 ? 0 : roll < 8 ? 1 : roll < 11 ? 2 : roll < 13 ? 3 : 4;
  operator_store_->context = Writer{kOperatorInc, "operator", "", 0};
  WriteResult r;
  switch (action) {
    case 0:
      r = operator_store_->update(victim.key, "{not json", victim.revision);
      break;
    case 1:
      r = operator_store_->update(victim.key, R"({"v":2,"from":"a newer library"})",
                                  victim.revision);
      break;
    case 2:
      r = operator_store_->update(
          victim.key, core::encode(core::CordonRecord{"x", "misplaced record"}), victim.revision);
      break;
    case 3:
      r = operator_store_->update(victim.key, std::string(64 * 1024, 'x'), victim.revision);
      break;
    default:
      r = operator_store_->erase(victim.key, victim.revision);
      break;
  }
  trace_.add(now, TraceKind::fault, -1,
             fmt::format("operator: {} over {}{}", kActions[action], victim.key,
                         r.ok ? "" : " (lost a race)"));
  pump_all();
}

void World::end_faults() {
  const VirtualNs now = time_.now();
  faults_on_ = false;
  sink_.set_faults(false);
  phase_ = Phase::converge;
  trace_.add(now, TraceKind::phase, -1, phase_name(phase_));
  for (auto& inc : incs_) {
    if (!inc->alive) continue;
    StoreFaults& f = inc->store->faults;
    f.op_fail = f.op_unknown = 0;
    f.partition_until = f.stale_until = f.slow_watch_until = 0;
    f.crash_after = 0;
    if (now < inc->paused_until) resume(*inc);
  }
  for (std::size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].inc < 0) slots_[s].restart_at = now;
  }
  frozen_ = true;
  phase_deadline_ = now + p_.converge_bound;
  next_probe_ = now + kProbeEvery;
  stable_since_ = -1;
}

void World::start_completion() {
  const VirtualNs now = time_.now();
  stats_.converged_after = now - p_.fault_phase;
  phase_ = Phase::complete;
  trace_.add(now, TraceKind::phase, -1, phase_name(phase_));
  frozen_ = false;
  for (auto& inc : incs_) {
    if (!inc->alive) continue;
    for (auto& [id, lane] : inc->lanes) {
      if (lane.mode == Lane::Mode::run) lane.next_at = now + lane_pause(*inc);
    }
  }
  phase_deadline_ = now + p_.complete_bound;
  stable_since_ = -1;
}

bool World::one_leader(std::string& why, Incarnation*& out) {
  out = nullptr;
  int n = 0;
  for (auto& inc : incs_) {
    if (inc->alive && inc->member->is_leader()) {
      ++n;
      out = inc.get();
    }
  }
  if (n != 1) {
    why = fmt::format("{} live members believe they lead", n);
    return false;
  }
  const auto& rec = history_.leader();
  if (!rec || rec->owner != out->instance || rec->nonce != out->member->nonce()) {
    why = fmt::format("{} believes it leads but the leader record names {}", names_[out->id],
                      rec ? rec->owner : "nobody");
    return false;
  }
  return true;
}

bool World::converged(std::string& why) {
  Incarnation* lead = nullptr;
  if (!one_leader(why, lead)) return false;
  const auto& plan = history_.plan();
  if (!plan || !plan->planned) {
    why = "no plan has been published";
    return false;
  }
  const auto published = lead->member->published_assignment();
  std::set<std::string> assigned;
  std::uint64_t lanes = 0;
  for (auto& inc : incs_) {
    if (!inc->alive) continue;
    lanes += slots_[inc->slot].max_in_flight;
    auto rec = history_.assigns().find(inc->instance);
    if (rec == history_.assigns().end()) {
      why = fmt::format("{} has no assignment record", names_[inc->id]);
      return false;
    }
    const std::vector<std::string>& splits = rec->second.splits;
    if (splits.size() > slots_[inc->slot].max_in_flight) {
      why = fmt::format("{} is assigned {} splits, above its lane budget of {}", names_[inc->id],
                        splits.size(), slots_[inc->slot].max_in_flight);
      return false;
    }
    if (rec->second.term != plan->term) {
      why = fmt::format("{}'s assignment record is of term {}, the plan's is {}", names_[inc->id],
                        rec->second.term, plan->term);
      return false;
    }
    const auto mine = inc->member->assignment();
    if (!mine || *mine != splits) {
      why = fmt::format("{} follows [{}], its record says [{}]", names_[inc->id],
                        mine ? join(*mine) : "none", join(splits));
      return false;
    }
    auto pub = published.find(inc->instance);
    if (pub == published.end() || pub->second != splits) {
      why =
          fmt::format("the leader's published view of {} differs from its record", names_[inc->id]);
      return false;
    }
    const auto held = inc->member->held_ids();
    if (held != splits) {
      why = fmt::format("{} holds [{}] but is assigned [{}]", names_[inc->id], join(held),
                        join(splits));
      return false;
    }
    for (const auto& s : splits) {
      if (!assigned.insert(s).second) {
        why = fmt::format("split {} is assigned twice", s);
        return false;
      }
    }
  }
  std::uint64_t runnable = 0;
  for (const auto& [id, t] : history_.splits()) {
    if (t.exists && t.rec.status == core::SplitStatus::runnable) ++runnable;
  }
  if (assigned.size() != std::min<std::uint64_t>(runnable, lanes)) {
    why = fmt::format("{} splits assigned, {} runnable, {} lanes: the assignment is not total",
                      assigned.size(), runnable, lanes);
    return false;
  }
  return true;
}

bool World::completed(std::string& why) {
  bool any_quarantined = false;
  for (std::size_t i = 0; i < p_.records.size(); ++i) {
    const SplitTruth& t = history_.splits().at(History::split_id(i));
    if (!t.exists || t.rec.status == core::SplitStatus::runnable) {
      why = fmt::format("split {} is {}", History::split_id(i),
                        t.exists ? "still runnable" : "not seeded");
      return false;
    }
    if (p_.poison.count(i) && t.rec.status != core::SplitStatus::quarantined) {
      why = fmt::format("poison split {} completed", History::split_id(i));
      return false;
    }
    // The planner lists every split, so a repair re-plan can always rewrite a damaged spec.
    if (core::parked_for_spec(t.rec) || t.damaged) {
      why = fmt::format("split {} is {}", History::split_id(i),
                        t.damaged ? "damaged and not rebuilt" : "parked for its spec");
      return false;
    }
    any_quarantined |= t.rec.status == core::SplitStatus::quarantined;
  }
  // Residuals their parents name are splits of the job like the planned ones. The planner does
  // not list them, so a damaged spec of one cannot be rewritten: parked, it stalls the job.
  for (const auto& [id, t] : history_.splits()) {
    if (t.parent.empty() || !history_.job_split(t)) continue;
    if (!t.exists || t.rec.status == core::SplitStatus::runnable ||
        t.rec.status == core::SplitStatus::pending) {
      why = fmt::format("residual {} is {}", id,
                        t.exists ? core::to_string(t.rec.status) : "named but has no record");
      return false;
    }
    if (p_.poison.count(t.index) && t.rec.status != core::SplitStatus::quarantined) {
      why = fmt::format("residual {} of a poison split completed", id);
      return false;
    }
    any_quarantined |= t.rec.status == core::SplitStatus::quarantined;
  }
  if (p_.shape != PlanShape::open_grows_forever) {
    const auto& plan = history_.plan();
    const core::Verdict want = any_quarantined ? core::Verdict::stalled : core::Verdict::complete;
    if (!plan || plan->verdict != want) {
      why = fmt::format("the plan's verdict is {}, expected {}",
                        plan ? core::to_string(plan->verdict) : "none", core::to_string(want));
      return false;
    }
    for (auto& inc : incs_) {
      if (inc->alive && !(any_quarantined ? inc->saw_stalled : inc->saw_complete)) {
        why = fmt::format("{} has not observed the verdict", names_[inc->id]);
        return false;
      }
    }
  }
  Incarnation* lead = nullptr;
  if (!one_leader(why, lead)) return false;
  for (auto& inc : incs_) {
    if (!inc->alive) continue;
    const auto held = inc->member->held_ids();
    const auto mine = inc->member->assignment();
    if (!held.empty() || !mine || !mine->empty()) {
      why = fmt::format("{} holds [{}] and follows [{}] after completion", names_[inc->id],
                        join(held), mine ? join(*mine) : "none");
      return false;
    }
  }
  return true;
}

void World::probe() {
  const VirtualNs now = time_.now();
  next_probe_ = now + kProbeEvery;
  std::string why;
  const bool ok = phase_ == Phase::converge ? converged(why) : completed(why);
  if (!ok) {
    stable_since_ = -1;
    last_why_ = why;
    return;
  }
  if (stable_since_ < 0 || history_.assign_writes() != stable_assign_writes_) {
    stable_since_ = now;
    stable_assign_writes_ = history_.assign_writes();
    last_why_ = "assignments were still being published";
    return;
  }
  if (now - stable_since_ < p_.fixpoint_window) return;
  if (phase_ == Phase::converge) {
    start_completion();
  } else {
    stats_.completed_after =
        now - (p_.fault_phase + std::max<VirtualNs>(stats_.converged_after, 0));
    phase_ = Phase::done;
    trace_.add(now, TraceKind::phase, -1, phase_name(phase_));
  }
}

std::string World::dump() const {
  std::string out;
  for (const auto& inc : incs_) {
    if (!inc->alive) continue;
    const auto mine = inc->member->assignment();
    out += fmt::format("  {}{}: holds [{}], follows [{}], lanes {}\n", names_[inc->id],
                       inc->member->is_leader() ? " (leader)" : "", join(inc->member->held_ids()),
                       mine ? join(*mine) : "no record", inc->lanes.size());
  }
  if (const auto& l = history_.leader()) {
    out += fmt::format("  job.leader: {} nonce {} term {}\n", l->owner, l->nonce, l->term);
  }
  if (const auto& pl = history_.plan()) {
    out +=
        fmt::format("  job.plan: term {} planned {} {} count {} completed {} quarantined {} {}\n",
                    pl->term, pl->planned, core::to_string(pl->finality), pl->split_count,
                    pl->completed, pl->quarantined, core::to_string(pl->verdict));
  }
  for (const auto& [id, m] : history_.members()) {
    out += fmt::format("  member.{}: nonce {}\n", id, m.rec.nonce);
  }
  for (const auto& [id, a] : history_.assigns()) {
    out += fmt::format("  assign.{}: term {} [{}]\n", id, a.term, join(a.splits));
  }
  std::vector<std::string> ids;
  for (const auto& [id, t] : history_.splits()) {
    if (t.exists && t.rec.status == core::SplitStatus::runnable) ids.push_back(id);
  }
  std::vector<std::string> residuals;
  for (const auto& [id, t] : history_.splits()) {
    if (!t.parent.empty()) {
      residuals.push_back(fmt::format("  residual {}: records {}..{} {} {}\n", id, t.lo, t.hi,
                                      t.exists ? core::to_string(t.rec.status) : "absent",
                                      history_.job_split(t) ? "named" : "unnamed"));
    }
  }
  std::sort(residuals.begin(), residuals.end());
  for (const auto& r : residuals) out += r;
  std::sort(ids.begin(), ids.end());
  for (const auto& id : ids) {
    const SplitTruth& t = history_.splits().at(id);
    auto l = history_.leases().find(id);
    out += fmt::format(
        "  split.{}: epoch {} owner {} attempts {} watermark {}/{} lease {}\n", id, t.rec.epoch,
        t.rec.owner.value_or("-"), t.rec.attempts, t.rec.progress.watermark, history_.length(t),
        l == history_.leases().end() ? "-" : l->second.owner + "/" + l->second.nonce);
  }
  return out;
}

RunResult World::run() {
  const auto real_start = std::chrono::steady_clock::now();
  for (int i = 0; i < p_.members; ++i) {
    Slot s;
    s.base = s.current = fmt::format("m{:02}", i);
    s.max_in_flight = p_.max_in_flight[static_cast<std::size_t>(i)];
    if (static_cast<std::size_t>(i) < p_.pace_pct.size()) {
      s.pace_pct = p_.pace_pct[static_cast<std::size_t>(i)];
    }
    slots_.push_back(s);
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    spawn(i, slots_[i].base, sched_.range(0, 200 * kNsPerMs));
  }
  const double rates[kFaultKinds] = {p_.faults.crash_per_s,        p_.faults.pause_per_s,
                                     p_.faults.leader_crash_per_s, p_.faults.partition_per_s,
                                     p_.faults.watch_drop_per_s,   p_.faults.watch_delay_per_s,
                                     p_.faults.stale_per_s,        p_.faults.operator_per_s};
  for (std::size_t k = 0; k < kFaultKinds; ++k) next_fault_[k] = faults_.exponential_ns(rates[k]);
  phase_deadline_ = p_.fault_phase;
  trace_.add(0, TraceKind::phase, -1, phase_name(phase_));

  std::uint64_t events = 0;
  while (phase_ != Phase::done && !history_.violation()) {
    if (++events > kMaxEventsPerRun) {
      history_.fail(5, fmt::format("the run exceeded {} events (livelock?)", kMaxEventsPerRun));
      break;
    }
    enum class What { phase, probe, late, restart, fault, resume, step, lane } what = What::phase;
    VirtualNs t = kNever;
    std::size_t which = 0;
    const std::string* lane_id = nullptr;
    auto consider = [&](VirtualNs at, What w, std::size_t idx) {
      if (at < t) {
        t = at;
        what = w;
        which = idx;
      }
    };
    consider(phase_deadline_, What::phase, 0);
    consider(next_probe_, What::probe, 0);
    if (!late_.empty()) consider(late_.front().at, What::late, 0);
    for (std::size_t s = 0; s < slots_.size(); ++s)
      consider(slots_[s].restart_at, What::restart, s);
    if (phase_ == Phase::faults) {
      for (std::size_t k = 0; k < kFaultKinds; ++k) consider(next_fault_[k], What::fault, k);
    }
    for (std::size_t i = 0; i < incs_.size(); ++i) {
      const Incarnation& inc = *incs_[i];
      if (!inc.alive) continue;
      if (time_.now() < inc.paused_until) {
        consider(inc.paused_until, What::resume, i);
        continue;
      }
      consider(inc.next_step_at, What::step, i);
      for (const auto& [id, lane] : inc.lanes) {
        if (lane.next_at < t) {
          consider(lane.next_at, What::lane, i);
          lane_id = &id;
        }
      }
    }
    if (t == kNever) break;
    time_.advance_to(t);
    switch (what) {
      case What::phase:
        if (phase_ == Phase::faults) {
          end_faults();
        } else {
          history_.fail(
              5, fmt::format("liveness: the fleet did not reach the end of phase '{}' "
                             "within {:.1f} s of virtual time: {}\n{}",
                             phase_name(phase_),
                             static_cast<double>(phase_ == Phase::converge ? p_.converge_bound
                                                                           : p_.complete_bound) /
                                 1e9,
                             last_why_, dump()));
        }
        break;
      case What::probe:
        probe();
        break;
      case What::late:
        late_write();
        break;
      case What::restart:
        slots_[which].restart_at = kNever;
        restart(which);
        break;
      case What::fault:
        fault(which);
        next_fault_[which] = time_.now() + faults_.exponential_ns(rates[which]);
        break;
      case What::resume:
        resume(*incs_[which]);
        break;
      case What::step:
        step(*incs_[which]);
        break;
      case What::lane:
        lane_action(*incs_[which], *lane_id);
        break;
    }
  }

  if (phase_ == Phase::done && !history_.violation()) {
    sink_.check_final(history_);
    history_.check_final();
  }
  RunResult r;
  r.params = p_;
  r.violation = history_.violation();
  r.violations = history_.violation_count();
  r.trace_hash = trace_.hash();
  r.trace_events = trace_.count();
  r.virtual_ns = time_.now();
  r.real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start).count();
  stats_.planner_calls = planner_->calls;
  stats_.planner_failures = planner_->failures;
  r.stats = stats_;
  r.history = history_.stats();
  r.sink = sink_.stats();
  r.tail = trace_.tail();
  r.full = trace_.all();
  r.actors = names_;
  if (r.violation) r.final_state = dump();
  return r;
}

}  // namespace

std::string RunResult::report(std::size_t last) const {
  std::string out;
  if (violation) {
    out +=
        fmt::format("VIOLATION of invariant {} (seed {}, scenario {}, at {:.6f} s virtual)\n  {}\n",
                    violation->invariant, params.seed, params.scenario,
                    static_cast<double>(violation->at) / 1e9, violation->message);
  } else {
    out += fmt::format("seed {} scenario {}: ok\n", params.seed, params.scenario);
  }
  out += fmt::format("replay: {}\n", replay_command(params));
  if (!violation) return out;
  out += fmt::format("fleet at the end:\n{}", final_state);
  const std::size_t skip = tail.size() > last ? tail.size() - last : 0;
  out += fmt::format("last {} trace events:\n", tail.size() - skip);
  for (std::size_t i = skip; i < tail.size(); ++i) out += Trace::format(tail[i], actors) + "\n";
  return out;
}

namespace {

// The run whose protocol assertions (ETLC_ASSERT) this thread reports: a failure is a finding of
// "invariant 0" with the seed and replay command, like any other. The runtime goes on after the
// handler returns, and the run ends at its next event (World::run checks for a violation).
thread_local History* g_asserting_run = nullptr;

void record_assertion(const core::AssertFailure& f) {
  const std::string what = fmt::format("protocol assertion failed at {}:{}: {} ({})", f.file,
                                       f.line, f.message, f.expression);
  if (g_asserting_run == nullptr) {
    std::fprintf(stderr, "%s (outside a simulated run)\n", what.c_str());
    std::abort();
  }
  g_asserting_run->fail(0, what);
}

// Installs the handler for the process (runs on other threads keep it too) and points this
// thread's reports at one run's history for the guard's scope.
class AssertionsToHistory {
 public:
  explicit AssertionsToHistory(History& h) : previous_run_(std::exchange(g_asserting_run, &h)) {
    core::set_assert_handler(record_assertion);
  }
  ~AssertionsToHistory() { g_asserting_run = previous_run_; }
  AssertionsToHistory(const AssertionsToHistory&) = delete;
  AssertionsToHistory& operator=(const AssertionsToHistory&) = delete;

 private:
  History* previous_run_;
};

}  // namespace

RunResult run_simulation(const RunParams& params, const RunOptions& options) {
  log().set_level(spdlog::level::off);
  World world(params, options);
  AssertionsToHistory assertions(world.history());
  return world.run();
}

}  // namespace etlc::sim
