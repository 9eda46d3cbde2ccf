// The Driver's control side: events from the member, the slot table, stopping, the worker pool.
// What a lane does on its turn is in lane_turn.cpp.
#include <fmt/format.h>
#include "log.hpp"

#include <algorithm>

#include "driver/slot.hpp"
#include "etlc/errors.hpp"

namespace etlc {

namespace {
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;
}  // namespace

Driver::Driver(std::shared_ptr<CoordinatorApi> member, std::shared_ptr<SplitSource> source,
               DriverOptions options, const Clock& clock)
    : api_(std::move(member)), source_(std::move(source)), options_(options), clock_(clock) {
  options_.validate();
  if (!api_) throw ConfigError("Driver: member must not be null");
  if (!source_) throw ConfigError("Driver: source must not be null");
  instance_ = api_->instance_id();
  if (auto* adapter = dynamic_cast<CoordinatorAdapter*>(api_.get())) {
    coordinator_ = &adapter->coordinator();
  }
}

namespace {
std::shared_ptr<CoordinatorApi> build_member(CoordinatorConfig config,
                                             std::shared_ptr<KvStore> store,
                                             std::shared_ptr<Planner> planner,
                                             std::shared_ptr<MetricsRegistry> metrics) {
  const std::uint32_t lanes = config.max_in_flight;
  auto coordinator =
      std::make_shared<Coordinator>(std::move(config), std::move(store), std::move(planner),
                                    SystemClock::instance(), std::move(metrics));
  return std::make_shared<CoordinatorAdapter>(std::move(coordinator), lanes, true);
}
}  // namespace

Driver::Driver(CoordinatorConfig config, std::shared_ptr<KvStore> store,
               std::shared_ptr<Planner> planner, std::shared_ptr<SplitSource> source,
               DriverOptions options, std::shared_ptr<MetricsRegistry> metrics)
    : Driver(
          build_member(std::move(config), std::move(store), std::move(planner), std::move(metrics)),
          std::move(source), options, SystemClock::instance()) {}

Driver::~Driver() {
  stop_workers();
}

void Driver::request_stop() noexcept {
  stop_requested_.store(true, std::memory_order_relaxed);
}

void Driver::abort() noexcept {
  abort_requested_.store(true, std::memory_order_relaxed);
}

std::string Driver::instance_id() const {
  return instance_;
}

DriverStats Driver::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

// --- running ------------------------------------------------------------------------------------

DriverResult Driver::run() {
  if (started_) throw UsageError("Driver::run: the driver already ran (or is stepped manually)");
  started_ = true;
  try {
    api_->start();
  } catch (const ConfigError& e) {  // issue 19: bad configuration has its own exit code
    result_ = DriverResult{DriverExit::bad_config, e.what()};
    phase_ = Phase::done;
    return *result_;
  } catch (const std::exception& e) {
    result_ = DriverResult{DriverExit::fatal, e.what()};
    phase_ = Phase::done;
    return *result_;
  }
  const std::uint32_t n =
      options_.worker_threads != 0 ? options_.worker_threads : api_->max_in_flight();
  for (std::uint32_t i = 0; i < std::max<std::uint32_t>(n, 1); ++i) {
    workers_.emplace_back([this] { worker_loop(); });
  }
  std::optional<DriverResult> r;
  while (!r) r = control(options_.poll_interval);
  stop_workers();
  return *r;
}

std::optional<DriverResult> Driver::step() {
  if (result_) return result_;
  if (!workers_.empty()) throw UsageError("Driver::step is for manual mode only");
  started_ = true;
  if (auto r = control(std::chrono::milliseconds(0))) return r;
  std::deque<std::shared_ptr<Slot>> batch;
  {
    std::lock_guard lk(mu_);
    batch.swap(ready_);
    for (auto& s : batch) s->where = Slot::Where::running;
  }
  for (auto& s : batch) after_turn(s, turn(*s));
  if (phase_ == Phase::stopping) return finish_if_quiet();
  return std::nullopt;
}

void Driver::worker_loop() {
  for (;;) {
    std::shared_ptr<Slot> s;
    {
      std::unique_lock lk(mu_);
      while (!workers_stop_ && ready_.empty()) work_cv_.wait_for(lk, options_.poll_interval);
      if (ready_.empty()) return;  // workers_stop_
      s = ready_.front();
      ready_.pop_front();
      s->where = Slot::Where::running;
    }
    after_turn(s, turn(*s));
  }
}

void Driver::stop_workers() {
  {
    std::lock_guard lk(mu_);
    workers_stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

// One pass of the control side: stop/abort requests, one event, retries that came due.
std::optional<DriverResult> Driver::control(std::chrono::milliseconds wait) {
  if (phase_ == Phase::done) return result_;
  const bool aborting = pending_result_.exit == DriverExit::aborted && phase_ == Phase::stopping;
  if (abort_requested_.load(std::memory_order_relaxed) && !aborting) {
    log().info("etlc: {}: driver aborted: lanes stop now, nothing is committed or released",
               instance_);
    try {
      api_->abandon();
    } catch (const std::exception& e) {
      log().warn("etlc: {}: abandon failed: {}", instance_, e.what());
    }
    phase_ = Phase::running;  // let the abort replace any graceful stop in progress
    begin_stopping(DriverExit::aborted, "aborted");
    stop_all_lanes(true);
  } else if (stop_requested_.load(std::memory_order_relaxed) && phase_ == Phase::running) {
    log().info("etlc: {}: stop requested: draining lanes", instance_);
    begin_stopping(DriverExit::stopped, "stopped on request");
  }
  if (phase_ == Phase::stopping && !lanes_forced_ && clock_.now() >= stop_deadline_) {
    lanes_forced_ = true;
    std::lock_guard lk(mu_);
    for (auto& [id, slots] : live_) {
      for (auto& s : slots) {
        s->forced = true;
        s->stop.request_stop();
        wake_locked(s);
      }
    }
    work_cv_.notify_all();
  }
  if (phase_ == Phase::stopping) {
    if (auto r = finish_if_quiet()) return r;
  }

  const bool events_matter =
      pending_result_.exit != DriverExit::aborted || phase_ == Phase::running;
  if (events_matter) {
    // The first event may be waited for; the rest of a burst is taken without waiting.
    constexpr int kEventsPerPass = 256;
    for (int i = 0; i < kEventsPerPass && phase_ != Phase::done; ++i) {
      std::optional<Event> e;
      try {
        e = api_->wait_event(i == 0 ? wait : std::chrono::milliseconds(0));
      } catch (const std::exception& ex) {
        log().error("etlc: {}: waiting for events failed: {}", instance_, ex.what());
      }
      if (!e) break;
      handle(std::move(*e));
    }
  } else if (wait.count() > 0) {
    std::unique_lock lk(mu_);
    work_cv_.wait_for(lk, wait, [&] { return live_count_ == 0; });
  }
  {
    std::lock_guard lk(mu_);
    promote_due_locked();
  }
  work_cv_.notify_all();
  if (phase_ == Phase::stopping) return finish_if_quiet();
  return std::nullopt;
}

std::optional<DriverResult> Driver::finish_if_quiet() {
  {
    std::lock_guard lk(mu_);
    if (live_count_ > 0) return std::nullopt;
  }
  DriverResult r = pending_result_;
  if (r.exit != DriverExit::aborted) {
    try {
      api_->shutdown();  // releases whatever is still held, attempt-free
    } catch (const std::exception& e) {
      log().warn("etlc: {}: member shutdown failed: {}", instance_, e.what());
      if (r.message.empty()) r.message = fmt::format("member shutdown failed: {}", e.what());
    }
  }
  phase_ = Phase::done;
  result_ = r;
  log().info("etlc: {}: driver finished: {}{}{}", instance_, to_string(r.exit),
             r.message.empty() ? "" : ": ", r.message);
  return result_;
}

void Driver::begin_stopping(DriverExit exit, std::string message) {
  if (phase_ != Phase::running) return;  // the first reason wins (abort resets the phase)
  phase_ = Phase::stopping;
  pending_result_ = DriverResult{exit, std::move(message)};
  stop_deadline_ = clock_.now() + options_.shutdown_timeout;
  std::lock_guard lk(mu_);
  for (auto& [id, slots] : live_) {
    for (auto& s : slots) {
      s->shutdown = true;
      wake_locked(s);
    }
  }
  work_cv_.notify_all();
}

// abort_lanes: abort() (close as aborted); otherwise the member is gone (close as lost).
void Driver::stop_all_lanes(bool abort_lanes) {
  std::lock_guard lk(mu_);
  for (auto& [id, slots] : live_) {
    for (auto& s : slots) {
      if (abort_lanes) {
        s->abort = true;
      } else {
        s->lost = true;
      }
      s->stop.request_stop();
      wake_locked(s);
    }
  }
  work_cv_.notify_all();
}

// --- events -------------------------------------------------------------------------------------

void Driver::handle(Event event) {
  std::visit(Overloaded{
                 [&](SplitGranted& g) { on_granted(std::move(g)); },
                 [&](RevokeRequested& r) {
                   std::shared_ptr<Slot> s = newest_live_slot(r.split_id);
                   if (s && r.epoch != kAnyEpoch && s->grant.epoch != r.epoch) {
                     return;  // revokes an earlier tenancy; this lane's is not revoked
                   }
                   if (s) {
                     std::lock_guard lk(mu_);
                     s->drain = true;
                     wake_locked(s);
                     return;
                   }
                   // No lane (it already ended): nothing is in flight, so release replay-free.
                   try {
                     api_->release_drained(r.split_id, r.epoch);
                   } catch (const std::exception& e) {
                     log().warn("etlc: {}: release of '{}' failed: {}", instance_, r.split_id,
                                e.what());
                   }
                 },
                 [&](SplitLost& l) {
                   std::shared_ptr<Slot> s = newest_live_slot(l.split_id);
                   if (!s) return;
                   log().info("etlc: {}: split '{}' lost ({}): stopping its lane", instance_,
                              l.split_id, to_string(l.reason));
                   std::lock_guard lk(mu_);
                   s->lost = true;
                   s->stop.request_stop();
                   wake_locked(s);
                 },
                 [&](SplitQuarantined& q) {
                   log().warn("etlc: {}: split '{}' quarantined after {} attempts", instance_,
                              q.split_id, q.attempts);
                   std::lock_guard lk(mu_);
                   ++stats_.quarantined;
                 },
                 [&](AllComplete& c) {
                   log().info("etlc: {}: all {} splits complete", instance_, c.completed);
                   begin_stopping(DriverExit::completed, {});
                 },
                 [&](Stalled& st) {
                   std::string msg =
                       !st.message.empty()
                           ? fmt::format("the job failed: {}", st.message)
                           : fmt::format(
                                 "the job stalled: {} splits completed, {} quarantined (see the "
                                 "splits' last errors)",
                                 st.completed, st.quarantined);
                   // A planner failure (message set) is never drained as a mere warning.
                   if (options_.on_stall == StallPolicy::drain_with_warning && st.message.empty()) {
                     log().warn("etlc: {}: {}; draining as configured", instance_, msg);
                     begin_stopping(DriverExit::stalled_drained, std::move(msg));
                   } else {
                     log().error("etlc: {}: {}", instance_, msg);
                     begin_stopping(DriverExit::stalled, std::move(msg));
                   }
                 },
                 [&](Fatal& f) {
                   log().error("etlc: {}: fatal: {}", instance_, f.message);
                   phase_ = Phase::running;  // a fatal end replaces any graceful stop in progress
                   begin_stopping(DriverExit::fatal, f.message);
                   stop_all_lanes(false);
                 },
             },
             event);
}

void Driver::on_granted(SplitGranted grant) {
  if (phase_ != Phase::running) return;  // stopping: the member's shutdown releases it
  auto s = std::make_shared<Slot>();
  s->grant = std::move(grant);
  std::lock_guard lk(mu_);
  s->serial = ++next_serial_;
  ++stats_.granted;
  if (s->grant.progress.watermark > 0) ++stats_.resumed;
  auto& slots = live_[s->id()];
  // An older tenancy of the same split may still be closing (its loss or release reached us
  // before its worker finished the turn): the new lane waits, so one split never has two lanes.
  s->where = slots.empty() ? Slot::Where::ready : Slot::Where::waiting;
  slots.push_back(s);
  ++live_count_;
  if (s->where == Slot::Where::ready) {
    ready_.push_back(s);
    work_cv_.notify_one();
  }
}

std::shared_ptr<Driver::Slot> Driver::newest_live_slot(const std::string& id) {
  std::lock_guard lk(mu_);
  auto it = live_.find(id);
  if (it == live_.end()) return nullptr;
  for (auto s = it->second.rbegin(); s != it->second.rend(); ++s) {
    if (!(*s)->ended && !(*s)->lost && !(*s)->abort) return *s;
  }
  return nullptr;
}

// --- the slot table -----------------------------------------------------------------------------

// A request arrived for `slot`: a delayed slot must not wait for its retry time. mu_ held.
void Driver::wake_locked(const std::shared_ptr<Slot>& slot) {
  if (slot->where == Slot::Where::delayed) {
    delayed_.erase(std::remove(delayed_.begin(), delayed_.end(), slot), delayed_.end());
    slot->where = Slot::Where::ready;
    ready_.push_back(slot);
  } else if (slot->where == Slot::Where::waiting && (slot->lost || slot->abort)) {
    // Never opened and never will be: close it without waiting for its predecessor.
    slot->where = Slot::Where::ready;
    ready_.push_back(slot);
  }
}

void Driver::promote_due_locked() {
  const auto now = clock_.now();
  for (auto it = delayed_.begin(); it != delayed_.end();) {
    if ((*it)->not_before <= now) {
      (*it)->where = Slot::Where::ready;
      ready_.push_back(*it);
      it = delayed_.erase(it);
    } else {
      ++it;
    }
  }
}

void Driver::forget_durable(const std::string& id) {
  std::lock_guard lk(mu_);
  last_durable_.erase(id);
}

void Driver::after_turn(const std::shared_ptr<Slot>& slot, Turn t) {
  {
    std::lock_guard lk(mu_);
    if (t == Turn::closed || slot->where != Slot::Where::running) return;
    const bool urgent = slot->lost || slot->abort || slot->forced;
    if (t == Turn::again || urgent) {
      slot->where = Slot::Where::ready;
      ready_.push_back(slot);
    } else {
      slot->where = Slot::Where::delayed;
      delayed_.push_back(slot);
    }
  }
  work_cv_.notify_one();
}

void Driver::close_slot(Slot& slot, LaneEnd end) {
  const bool had_lane = slot.lane != nullptr;
  if (slot.lane) {
    try {
      slot.lane->close(end);
    } catch (const std::exception& e) {
      log().warn("etlc: {}: closing the lane of '{}' threw: {}", instance_, slot.id(), e.what());
    }
    slot.lane.reset();
  }
  {
    std::lock_guard lk(mu_);
    if (had_lane && stats_.lanes_open > 0) --stats_.lanes_open;
    switch (end) {
      case LaneEnd::completed:
        ++stats_.completed;
        break;
      case LaneEnd::drained:
        ++stats_.drained;
        break;
      case LaneEnd::lost:
        ++stats_.lost;
        break;
      case LaneEnd::failed:
        ++stats_.failed;
        break;
      case LaneEnd::shutdown:
      case LaneEnd::aborted:
        break;
    }
    slot.ended = true;
    slot.where = Slot::Where::closed;
    auto it = live_.find(slot.id());
    if (it != live_.end()) {
      auto& v = it->second;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& p) { return p.get() == &slot; }),
              v.end());
      if (v.empty()) {
        live_.erase(it);
      } else if (v.front()->where == Slot::Where::waiting) {
        v.front()->where = Slot::Where::ready;
        ready_.push_back(v.front());
      }
    }
    --live_count_;
  }
  work_cv_.notify_all();
}

}  // namespace etlc
