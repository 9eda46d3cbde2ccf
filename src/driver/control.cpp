// The Driver's control side: stop and abort requests, the member's events, stopping the lanes and
// finishing the run. Runs on the control thread (run()'s caller, or step()'s).
#include <fmt/format.h>
#include "log.hpp"

#include "driver/driver_impl.hpp"

namespace etlc {

namespace {
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;
}  // namespace

// One pass of the control side: stop/abort requests, one event, retries that came due.
std::optional<DriverResult> Driver::Impl::control(std::chrono::milliseconds wait) {
  if (phase_ == Phase::done) return result_;
  take_requests();
  force_lanes_if_due();
  if (phase_ == Phase::stopping) {
    if (auto r = finish_if_quiet()) return r;
  }
  const bool events_matter =
      pending_result_.exit != DriverExit::aborted || phase_ == Phase::running;
  if (events_matter) {
    take_events(wait);
  } else if (wait.count() > 0) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    MutexLock lk(mu_);
    while (live_count_ != 0 && std::chrono::steady_clock::now() < deadline) {
      work_cv_.wait_until(mu_, deadline);
    }
  }
  {
    MutexLock lk(mu_);
    promote_due_locked();
  }
  work_cv_.notify_all();
  if (phase_ == Phase::stopping) return finish_if_quiet();
  return std::nullopt;
}

// abort() and request_stop(), as the flags set them.
void Driver::Impl::take_requests() {
  const bool aborting = pending_result_.exit == DriverExit::aborted && phase_ == Phase::stopping;
  if (abort_requested_.load(std::memory_order_relaxed) && !aborting) {
    log().info("etlc: {}: driver aborted: lanes stop now, nothing is committed or released",
               instance_);
    try {
      member_->abandon();
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
}

// The shutdown deadline passed: every lane still open closes without a final commit.
void Driver::Impl::force_lanes_if_due() {
  if (phase_ != Phase::stopping || lanes_forced_ || clock_.now() < stop_deadline_) return;
  lanes_forced_ = true;
  {
    MutexLock lk(mu_);
    for (auto& [id, slots] : live_) {
      for (auto& s : slots) {
        driver::FlagsHeld flags(*s, held(mu_));
        s->forced = true;
        s->stop.request_stop();
        wake_locked(s);
      }
    }
  }
  work_cv_.notify_all();
}

// The first event may be waited for; the rest of a burst is taken without waiting.
void Driver::Impl::take_events(std::chrono::milliseconds wait) {
  constexpr int kEventsPerPass = 256;
  for (int i = 0; i < kEventsPerPass && phase_ != Phase::done; ++i) {
    std::optional<Event> e;
    try {
      e = member_->wait_event(i == 0 ? wait : std::chrono::milliseconds(0));
    } catch (const std::exception& ex) {
      log().error("etlc: {}: waiting for events failed: {}", instance_, ex.what());
    }
    if (!e) break;
    handle(std::move(*e));
  }
}

std::optional<DriverResult> Driver::Impl::finish_if_quiet() {
  {
    MutexLock lk(mu_);
    if (live_count_ > 0) return std::nullopt;
  }
  DriverResult r = pending_result_;
  if (r.exit != DriverExit::aborted) {
    try {
      member_->shutdown();  // releases whatever is still held, attempt-free
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

void Driver::Impl::begin_stopping(DriverExit exit, std::string message) {
  if (phase_ != Phase::running) return;  // the first reason wins (abort resets the phase)
  phase_ = Phase::stopping;
  pending_result_ = DriverResult{exit, std::move(message)};
  stop_deadline_ = clock_.now() + options_.shutdown_timeout;
  {
    MutexLock lk(mu_);
    for (auto& [id, slots] : live_) {
      for (auto& s : slots) {
        driver::FlagsHeld flags(*s, held(mu_));
        s->shutdown = true;
        wake_locked(s);
      }
    }
  }
  work_cv_.notify_all();
}

// abort_lanes: abort() (close as aborted); otherwise the member is gone (close as lost).
void Driver::Impl::stop_all_lanes(bool abort_lanes) {
  {
    MutexLock lk(mu_);
    for (auto& [id, slots] : live_) {
      for (auto& s : slots) {
        driver::FlagsHeld flags(*s, held(mu_));
        if (abort_lanes) {
          s->abort = true;
        } else {
          s->lost = true;
        }
        s->stop.request_stop();
        wake_locked(s);
      }
    }
  }
  work_cv_.notify_all();
}

// --- events -------------------------------------------------------------------------------------

void Driver::Impl::handle(Event event) {
  std::visit(Overloaded{
                 [&](SplitGranted& g) { on_granted(std::move(g)); },
                 [&](RevokeRequested& r) { on_revoke(r); },
                 [&](SplitLost& l) { on_lost(l); },
                 [&](SplitQuarantined& q) {
                   log().warn("etlc: {}: split '{}' quarantined after {} attempts", instance_,
                              q.split_id, q.attempts);
                   MutexLock lk(mu_);
                   ++stats_.quarantined;
                 },
                 [&](AllComplete& c) {
                   log().info("etlc: {}: all {} splits complete", instance_, c.completed);
                   begin_stopping(DriverExit::completed, {});
                 },
                 [&](Stalled& st) { on_stalled(st); },
                 [&](Fatal& f) { on_fatal(f); },
                 [&](SplitRequested& r) { on_split_requested(r); },
             },
             event);
}

void Driver::Impl::on_granted(SplitGranted grant) {
  if (phase_ != Phase::running) return;  // stopping: the member's shutdown releases it
  auto s = std::make_shared<Slot>(mu_);
  s->grant = std::move(grant);
  MutexLock lk(mu_);
  driver::FlagsHeld flags(*s, held(mu_));
  s->serial = ++next_serial_;
  ++stats_.granted;
  if (s->grant.progress.watermark > 0) ++stats_.resumed;
  auto& slots = live_[s->id()];
  // An older tenancy of the same split may still be closing (its loss or release reached us
  // before its worker finished the turn): the new lane waits, so one split never has two lanes.
  s->move_to(slots.empty() ? Slot::Where::ready : Slot::Where::waiting);
  slots.push_back(s);
  ++live_count_;
  if (s->where == Slot::Where::ready) {
    ready_.push_back(s);
    work_cv_.notify_one();
  }
}

void Driver::Impl::on_revoke(const RevokeRequested& r) {
  SlotPtr s = newest_live_slot(r.split_id);
  if (s && r.epoch != kAnyEpoch && s->grant.epoch != r.epoch) {
    return;  // revokes an earlier tenancy; this lane's is not revoked
  }
  if (s) {
    MutexLock lk(mu_);
    driver::FlagsHeld flags(*s, held(mu_));
    s->drain = true;
    wake_locked(s);
    return;
  }
  // No lane (it already ended): nothing is in flight, so release replay-free.
  try {
    member_->release_drained(r.split_id, r.epoch);
  } catch (const std::exception& e) {
    log().warn("etlc: {}: release of '{}' failed: {}", instance_, r.split_id, e.what());
  }
}

// The lane's next turn asks it to cut (lane_turn.cpp); a request for another tenancy, or for a
// split with no lane, is ignored (the leader drops it after split_request_timeout).
void Driver::Impl::on_split_requested(const SplitRequested& r) {
  SlotPtr s = newest_live_slot(r.split_id);
  if (!s || s->grant.epoch != r.epoch || phase_ != Phase::running) return;
  MutexLock lk(mu_);
  driver::FlagsHeld flags(*s, held(mu_));
  s->split_keep = r.keep;
  wake_locked(s);
}

void Driver::Impl::on_lost(const SplitLost& l) {
  SlotPtr s = newest_live_slot(l.split_id);
  if (!s) return;
  log().info("etlc: {}: split '{}' lost ({}): stopping its lane", instance_, l.split_id,
             to_string(l.reason));
  MutexLock lk(mu_);
  driver::FlagsHeld flags(*s, held(mu_));
  s->lost = true;
  s->stop.request_stop();
  wake_locked(s);
}

void Driver::Impl::on_stalled(const Stalled& st) {
  std::string msg =
      !st.message.empty()
          ? fmt::format("the job failed: {}", st.message)
          : fmt::format(
                "the job stalled: {} splits completed, {} quarantined (see the splits' last "
                "errors)",
                st.completed, st.quarantined);
  // A planner failure (message set) is never drained as a mere warning.
  if (options_.on_stall == StallPolicy::drain_with_warning && st.message.empty()) {
    log().warn("etlc: {}: {}; draining as configured", instance_, msg);
    begin_stopping(DriverExit::stalled_drained, std::move(msg));
  } else {
    log().error("etlc: {}: {}", instance_, msg);
    begin_stopping(DriverExit::stalled, std::move(msg));
  }
}

void Driver::Impl::on_fatal(const Fatal& f) {
  log().error("etlc: {}: fatal: {}", instance_, f.message);
  phase_ = Phase::running;  // a fatal end replaces any graceful stop in progress
  begin_stopping(DriverExit::fatal, f.message);
  stop_all_lanes(false);
}

}  // namespace etlc
