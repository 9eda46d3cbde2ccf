// A lane's turn: what one worker does with one slot before handing it back. A turn opens the lane
// if needed (lane_open.cpp), then works through the slot's work states, one function each:
//   run              commit durable progress when the interval is due, then one bounded step;
//                    asked to drain (revoked, or stopping): the lane's final progress
//   complete         the completion, with the final progress
//   fail             poison (or a sink's refusal): fail() consumes an attempt
//   drain_commit     the drained lane's final progress ...
//   drain_release    ... then release_drained()
//   shutdown_commit  stopping: the final progress, then close
// Each returns a Turn to end the turn, or nullopt when the slot moved to another state (the next
// hop takes it; a few hops per turn, then the slot yields).
//
// Every call that writes through the fence first checks, under mu_, that the split was not lost
// or aborted in the meantime, so once the control side has marked a slot lost nothing more is
// committed for it. (A commit already in flight when the loss arrives is the member's to fence.)
// Before every lane call and every fenced call the turn also checks that the session of the
// lane's grant is still provably live (lapsed()): a lane whose session may have lapsed stops as
// lost at once, without waiting for the control loop to notice.
#include <fmt/format.h>
#include "log.hpp"

#include "driver/driver_impl.hpp"
#include "etlc/errors.hpp"
#include "etlc/sink_fence.hpp"

#include <utility>

namespace etlc {

namespace {

// Work-state hops one turn takes at most before it hands the worker to the next slot.
constexpr int kHopsPerTurn = 8;

bool newer(const SplitProgress& p, const SplitProgress& than) {
  return p.watermark > than.watermark || (p.watermark == than.watermark && p.state != than.state);
}

}  // namespace

Driver::Impl::Turn Driver::Impl::turn(Slot& s) {
  TurnStart t;
  bool lost, aborted, forced;
  {
    MutexLock lk(mu_);
    driver::FlagsHeld flags(s, held(mu_));
    lost = s.lost;
    t.drain = s.drain;
    t.shutdown = s.shutdown;
    aborted = s.abort;
    forced = s.forced;
    t.split_keep = std::exchange(s.split_keep, std::nullopt);
  }
  if (aborted) return close_slot(s, LaneEnd::aborted);
  if (lost) return close_slot(s, LaneEnd::lost);
  if (forced) return close_slot(s, LaneEnd::shutdown);  // the shutdown deadline passed
  t.now = clock_.now();
  if (!s.opened) {
    if (auto r = open_lane(s, t)) return *r;
  }
  for (int hop = 0; hop < kHopsPerTurn; ++hop) {
    std::optional<Turn> r;
    switch (s.work) {
      case Slot::Work::run:
        r = run_lane(s, t);
        break;
      case Slot::Work::complete:
        r = complete_split(s, t);
        break;
      case Slot::Work::fail:
        r = fail_split(s, t);
        break;
      case Slot::Work::drain_commit:
      case Slot::Work::shutdown_commit:
        r = commit_final(s, t);
        break;
      case Slot::Work::drain_release:
        r = release_split(s, t);
        break;
    }
    if (r) return *r;
  }
  return Turn::again;
}

// --- run ----------------------------------------------------------------------------------------

std::optional<Driver::Impl::Turn> Driver::Impl::run_lane(Slot& s, const TurnStart& t) {
  // A cut not yet durable lands before anything else, a drain included: a drain that flushes
  // may write the lane's new end to its sink.
  if (!t.drain && !t.shutdown && t.split_keep && !s.pending_cut) {
    if (auto r = cut_lane(s, *t.split_keep)) return r;
  }
  if (s.pending_cut) {
    if (auto r = commit_due(s, t)) return r;
    if (s.work != Slot::Work::run) return std::nullopt;
    if (s.pending_cut) return retry_later(s, t.now);
  }
  if (t.drain || t.shutdown) return drain_lane(s, t);
  if (s.pending_cut || t.now >= s.next_commit_at) {
    if (auto r = commit_due(s, t)) return r;
    if (s.work != Slot::Work::run) return std::nullopt;  // the commit failed the lane
    // No step until the cut is durable: a step may write the lane's new end to its sink, and a
    // sink's progress is resumed from (lane_open.cpp).
    if (s.pending_cut) return retry_later(s, t.now);
  }
  return step_lane(s);
}

// Revoked or stopping: the lane's final progress, or its refusal (a revocation is then declined).
std::optional<Driver::Impl::Turn> Driver::Impl::drain_lane(Slot& s, const TurnStart& t) {
  if (lapsed(s)) return close_slot(s, LaneEnd::lost);
  std::optional<SplitProgress> fin;
  try {
    fin = s.lane->drain();
  } catch (const SinkFenced& e) {
    sink_refused_batch(s, e.what());
    return std::nullopt;
  } catch (const std::exception& e) {
    log().warn("etlc: {}: draining split '{}' threw (declining): {}", instance_, s.id(), e.what());
  }
  if (!fin) {
    if (t.shutdown && !t.drain) return close_slot(s, LaneEnd::shutdown);
    return decline(s);
  }
  s.final_progress = *fin;
  s.work = t.drain ? Slot::Work::drain_commit : Slot::Work::shutdown_commit;
  return std::nullopt;
}

// Asked to split: the lane cuts (or declines), and the cut is committed at once with the lane's
// progress, whose state now carries its new end. A cut that does not land now stays pending and
// rides on the next commit (commit_progress).
std::optional<Driver::Impl::Turn> Driver::Impl::cut_lane(Slot& s, double keep) {
  if (lapsed(s)) return close_slot(s, LaneEnd::lost);
  {
    MutexLock lk(mu_);
    ++stats_.split_asked;
  }
  try {
    s.pending_cut = s.lane->split(keep);
  } catch (const std::exception& e) {
    log().warn("etlc: {}: splitting '{}' threw (declining): {}", instance_, s.id(), e.what());
    return std::nullopt;
  }
  return std::nullopt;  // declined, or cut: run_lane commits the cut at once
}

// The commit interval came: the lane's durable progress, committed. nullopt goes on: to the step
// while the work is still run, else (the lane failed) to the next hop.
std::optional<Driver::Impl::Turn> Driver::Impl::commit_due(Slot& s, const TurnStart& t) {
  s.next_commit_at = t.now + options_.commit_interval;
  if (lapsed(s)) return close_slot(s, LaneEnd::lost);
  SplitProgress p;
  try {
    p = s.lane->durable_progress();
  } catch (const SinkFenced& e) {
    sink_refused_batch(s, e.what());
    return std::nullopt;
  } catch (const std::exception& e) {
    poison(s, fmt::format("durable_progress threw: {}", e.what()));
    return std::nullopt;
  }
  switch (commit_progress(s, p)) {
    case Outcome::done:
      break;
    case Outcome::lost:
      return close_slot(s, LaneEnd::lost);
    case Outcome::retry:
      s.next_commit_at = t.now + options_.retry_backoff;
      break;
    case Outcome::invalid:
      s.work = Slot::Work::fail;
      break;
  }
  return std::nullopt;
}

// One bounded step; at the end of the split, the lane's final progress for the completion.
std::optional<Driver::Impl::Turn> Driver::Impl::step_lane(Slot& s) {
  if (lapsed(s)) return close_slot(s, LaneEnd::lost);
  StepResult r;
  steps_.fetch_add(1, std::memory_order_relaxed);
  metrics_->stepped();
  try {
    r = s.lane->step();
  } catch (const SinkFenced& e) {
    r = StepResult::fenced(e.what());
  } catch (const std::exception& e) {
    r = StepResult::poisoned(fmt::format("the lane threw: {}", e.what()));
  }
  switch (r.status) {
    case StepResult::Status::more:
      return Turn::again;
    case StepResult::Status::poison:
      poison(s, std::move(r.reason));
      return std::nullopt;
    case StepResult::Status::fenced:
      sink_refused_batch(s, std::move(r.reason));
      return std::nullopt;
    case StepResult::Status::end_of_split:
      break;
  }
  if (lapsed(s)) return close_slot(s, LaneEnd::lost);
  try {
    s.final_progress = s.lane->durable_progress();
    s.work = Slot::Work::complete;
  } catch (const SinkFenced& e) {
    sink_refused_batch(s, e.what());
  } catch (const std::exception& e) {
    poison(s, fmt::format("durable_progress threw at the end of the split: {}", e.what()));
  }
  return std::nullopt;
}

// --- terminal work ------------------------------------------------------------------------------

std::optional<Driver::Impl::Turn> Driver::Impl::complete_split(Slot& s, const TurnStart& t) {
  if (s.final_progress.watermark < s.committed.watermark) {
    poison(s, fmt::format("the lane's final progress {} is below its committed progress {}",
                          s.final_progress.watermark, s.committed.watermark));
    return std::nullopt;
  }
  // The residual must be a split before the completion ends this one.
  if (s.pending_cut) {
    const Outcome cut = commit_progress(s, s.final_progress);
    if (cut != Outcome::done) return not_done(s, cut, t.now);
  }
  const Outcome o = fenced_call(
      s, "complete", [&] { return member_->complete(s.id(), s.final_progress, s.grant.epoch); });
  if (o != Outcome::done) return not_done(s, o, t.now);
  forget_durable(s.id());
  return close_slot(s, LaneEnd::completed);
}

// A completion's fenced call (the cut before it, or the completion) that did not land: lost
// closes the lane, retry waits for the backoff, invalid fails the split.
std::optional<Driver::Impl::Turn> Driver::Impl::not_done(Slot& s, Outcome o,
                                                         Clock::time_point now) {
  if (o == Outcome::lost) return close_slot(s, LaneEnd::lost);
  if (o == Outcome::retry) return retry_later(s, now);
  s.work = Slot::Work::fail;
  return std::nullopt;
}

std::optional<Driver::Impl::Turn> Driver::Impl::fail_split(Slot& s, const TurnStart& t) {
  if (s.sink_refused) {
    // Normally another member owns a newer epoch and the store answers fenced (the lane is
    // simply lost); only a sink ahead of every grant makes this consume an attempt.
    log().info("etlc: {}: {}; reporting the split failed", instance_, s.reason);
  } else {
    log().warn("etlc: {}: failing split '{}': {}", instance_, s.id(), s.reason);
  }
  switch (fenced_call(s, "fail", [&] { return member_->fail(s.id(), s.reason, s.grant.epoch); })) {
    case Outcome::done:
      if (s.sink_refused) {
        log().warn(
            "etlc: {}: split '{}' failed: the sink's fence is ahead of the coordination store "
            "({}): a fence row from a newer epoch than any grant?",
            instance_, s.id(), s.reason);
      }
      return close_slot(s, LaneEnd::failed);
    case Outcome::lost:
    case Outcome::invalid:
      return close_slot(s, LaneEnd::lost);
    case Outcome::retry:
      return retry_later(s, t.now);
  }
  return std::nullopt;
}

// drain_commit and shutdown_commit: the drained lane's final progress.
std::optional<Driver::Impl::Turn> Driver::Impl::commit_final(Slot& s, const TurnStart& t) {
  const bool revoking = s.work == Slot::Work::drain_commit;
  switch (commit_progress(s, s.final_progress)) {
    case Outcome::done:
      if (!revoking) return close_slot(s, LaneEnd::shutdown);
      s.work = Slot::Work::drain_release;
      return std::nullopt;
    case Outcome::lost:
      return close_slot(s, LaneEnd::lost);
    case Outcome::retry:
      return retry_later(s, t.now);
    case Outcome::invalid:
      log().warn("etlc: {}: final commit of split '{}' refused: {}", instance_, s.id(), s.reason);
      if (!revoking) return close_slot(s, LaneEnd::shutdown);
      return decline(s);
  }
  return std::nullopt;
}

std::optional<Driver::Impl::Turn> Driver::Impl::release_split(Slot& s, const TurnStart& t) {
  switch (
      fenced_call(s, "release", [&] { return member_->release_drained(s.id(), s.grant.epoch); })) {
    case Outcome::done:
    case Outcome::invalid:
      return close_slot(s, LaneEnd::drained);
    case Outcome::lost:
      return close_slot(s, LaneEnd::lost);
    case Outcome::retry:
      return retry_later(s, t.now);
  }
  return std::nullopt;
}

// --- the calls a turn makes ---------------------------------------------------------------------

// Every fenced call goes through here: the loss check, the session check, the exception policy,
// the statistics.
Driver::Impl::Outcome Driver::Impl::fenced_call(Slot& s, const char* what,
                                                const std::function<CommitResult()>& fn) {
  {
    MutexLock lk(mu_);
    driver::FlagsHeld flags(s, held(mu_));
    if (s.lost || s.abort) return Outcome::lost;
  }
  if (lapsed(s)) return Outcome::lost;
  CommitResult r;
  try {
    r = fn();
  } catch (const UsageError& e) {
    s.reason = fmt::format("{} refused: {}", what, e.what());
    return Outcome::invalid;
  } catch (const std::exception& e) {
    log().warn("etlc: {}: {} of split '{}' failed: {}", instance_, what, s.id(), e.what());
    r = CommitResult{CommitStatus::retryable, e.what()};
  }
  MutexLock lk(mu_);
  switch (r.status) {
    case CommitStatus::durable:
      return Outcome::done;
    case CommitStatus::fenced: {
      driver::FlagsHeld flags(s, held(mu_));
      s.ended = true;
      log().info("etlc: {}: {} of split '{}' fenced: {}", instance_, what, s.id(), r.detail);
      return Outcome::lost;
    }
    case CommitStatus::retryable:
      ++stats_.commit_retries;
      return Outcome::retry;
  }
  return Outcome::retry;
}

// A progress commit: nothing to do when nothing is new, invalid when the lane went back.
Driver::Impl::Outcome Driver::Impl::commit_progress(Slot& s, const SplitProgress& p) {
  if (p.watermark < s.committed.watermark) {
    s.reason = fmt::format("the lane's durable progress went back from {} to {}",
                           s.committed.watermark, p.watermark);
    return Outcome::invalid;
  }
  if (!newer(p, s.committed) && !s.pending_cut) return Outcome::done;  // nothing new
  const std::uint64_t epoch = s.grant.epoch;
  const Outcome o =
      s.pending_cut ? fenced_call(s, "split",
                                  [&] { return member_->split(s.id(), p, *s.pending_cut, epoch); })
                    : fenced_call(s, "commit", [&] { return member_->commit(s.id(), p, epoch); });
  if (o == Outcome::done) {
    s.committed = p;
    metrics_->committed();
    MutexLock lk(mu_);
    ++stats_.commits;
    if (std::exchange(s.pending_cut, std::nullopt)) ++stats_.split_cuts;
    auto [it, fresh] = last_durable_.try_emplace(s.id(), epoch, p);
    if (!fresh && (it->second.first < epoch ||
                   (it->second.first == epoch && it->second.second.watermark <= p.watermark))) {
      it->second = {epoch, p};
    }
  }
  return o;
}

// The lane refused a revocation (or its final commit was refused): the release is forced.
Driver::Impl::Turn Driver::Impl::decline(Slot& s) {
  {
    MutexLock lk(mu_);
    driver::FlagsHeld flags(s, held(mu_));
    s.ended = true;  // the forced release's SplitLost must not hit a newer lane
    ++stats_.declined;
  }
  metrics_->declined();
  try {
    member_->decline_revoke(s.id(), s.grant.epoch);
  } catch (const std::exception& e) {
    log().warn("etlc: {}: declining the revocation of '{}' failed: {}", instance_, s.id(),
               e.what());
  }
  return close_slot(s, LaneEnd::lost);
}

Driver::Impl::Turn Driver::Impl::retry_later(Slot& s, Clock::time_point now) {
  MutexLock lk(mu_);
  driver::FlagsHeld flags(s, held(mu_));
  s.not_before = now + options_.retry_backoff;
  return Turn::later;
}

void Driver::Impl::poison(Slot& s, std::string why) {
  s.reason = why.empty() ? std::string("the lane reported poison") : std::move(why);
  s.work = Slot::Work::fail;
}

// The sink refused a batch (its fence stands at a newer epoch): see open_sink_fence.
void Driver::Impl::sink_refused_batch(Slot& s, std::string why) {
  {
    MutexLock lk(mu_);
    ++stats_.sink_refused;
  }
  s.sink_refused = true;
  s.reason =
      fmt::format("the sink refused a batch of split '{}' (epoch {}): {}", s.id(), s.grant.epoch,
                  why.empty() ? std::string("its fence stands at a newer epoch") : why);
  s.work = Slot::Work::fail;
}

// True (and the slot marked ended) when the session of the slot's grant may have lapsed.
bool Driver::Impl::lapsed(Slot& s) {
  if (member_->session_live(s.grant.session)) return false;
  MutexLock lk(mu_);
  driver::FlagsHeld flags(s, held(mu_));
  if (!s.ended) {
    s.ended = true;  // a SplitLost that follows must not hit a newer lane of the split
    ++stats_.lapsed;
    log().info(
        "etlc: {}: split '{}' epoch {}: the member session may have lapsed; stopping the lane as "
        "lost",
        instance_, s.id(), s.grant.epoch);
  }
  return true;
}

}  // namespace etlc
