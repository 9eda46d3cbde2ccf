// A lane's turn: what one worker does with one slot before handing it back. A turn opens the lane
// if needed, commits durable progress when the interval is due, then runs one bounded step; or it
// carries out the terminal work (complete, fail, drain and release) with retries.
//
// Every call that writes through the fence first checks, under mu_, that the split was not lost
// or aborted in the meantime, so once the control side has marked a slot lost nothing more is
// committed for it. (A commit already in flight when the loss arrives is the member's to fence.)
// Before every lane call and every fenced call the turn also checks that the session of the
// lane's grant is still provably live (lapsed()): a lane whose session may have lapsed stops as
// lost at once, without waiting for the control loop to notice.
#include <fmt/format.h>
#include "log.hpp"

#include <functional>

#include "driver/slot.hpp"
#include "etlc/errors.hpp"
#include "etlc/sink_fence.hpp"

namespace etlc {

namespace {

enum class Outcome : std::uint8_t { done, lost, retry, invalid };

bool newer(const SplitProgress& p, const SplitProgress& than) {
  return p.watermark > than.watermark || (p.watermark == than.watermark && p.state != than.state);
}

}  // namespace

// True (and the slot marked ended) when the session of the slot's grant may have lapsed.
bool Driver::lapsed(Slot& s) {
  if (api_->session_live(s.grant.session)) return false;
  std::lock_guard lk(mu_);
  if (!s.ended) {
    s.ended = true;  // a SplitLost that follows must not hit a newer lane of the split
    ++stats_.lapsed;
    log().info(
        "etlc: {}: split '{}' epoch {}: the member session may have lapsed; stopping the "
        "lane as lost",
        instance_, s.id(), s.grant.epoch);
  }
  return true;
}

// The first turn of a slot: where to resume (the granted progress, this driver's own later commit
// of the split, the sink's progress: the largest), the sink fence, the lane. A value ends the
// turn; nullopt goes on to the lane's work.
std::optional<Driver::Turn> Driver::open_lane(Slot& s, bool drain, bool shutdown,
                                              Clock::time_point now) {
  const std::string& id = s.id();
  SplitProgress resume = s.grant.progress;
  {
    // A commit of an older tenancy of ours may have landed after this grant was issued (it
    // raced the loss): resume from it, so the lane never reports progress below the record.
    std::lock_guard lk(mu_);
    // Only for our own next tenancy (or an adopted one): a grant two or more epochs later
    // follows someone else's tenancy or an operator's `etlc seek` (which bumps the epoch), and
    // its progress is the truth even when it is lower than ours.
    if (auto it = last_durable_.find(id); it != last_durable_.end() &&
                                          s.grant.epoch <= it->second.first + 1 &&
                                          it->second.second.watermark > resume.watermark) {
      resume = it->second.second;
    }
  }
  s.committed = resume;
  s.next_commit_at = now + options_.commit_interval;
  if (drain) {
    s.opened = true;
    s.work = Slot::Work::drain_release;  // never opened: nothing to drain
    return std::nullopt;
  }
  if (shutdown) {
    s.opened = true;
    close_slot(s, LaneEnd::shutdown);
    return Turn::closed;
  }
  if (lapsed(s)) {  // before the sink fence: opening it is a write
    s.opened = true;
    close_slot(s, LaneEnd::lost);
    return Turn::closed;
  }
  if (options_.sink_fence) {
    FenceResult f;
    try {
      f = options_.sink_fence->open(id, s.grant.epoch);
    } catch (const std::exception& e) {
      s.opened = true;
      s.reason = fmt::format("opening the sink fence failed: {}", e.what());
      s.work = Slot::Work::fail;
      return std::nullopt;
    }
    if (f.status == FenceStatus::retryable) {
      log().warn("etlc: {}: the sink fence of split '{}' could not be opened (retrying): {}",
                 instance_, id, f.detail);
      std::lock_guard lk(mu_);
      s.not_before = now + options_.retry_backoff;
      ++stats_.commit_retries;
      return Turn::later;  // not opened: the next turn tries again
    }
    s.opened = true;
    if (f.status == FenceStatus::refused) {
      {
        std::lock_guard lk(mu_);
        ++stats_.sink_refused;
      }
      s.sink_refused = true;
      s.reason = fmt::format(
          "the sink fence of split '{}' stands at epoch {}, above this "
          "tenancy's epoch {}{}{}",
          id, f.sink_epoch, s.grant.epoch, f.detail.empty() ? "" : ": ", f.detail);
      s.work = Slot::Work::fail;
      return std::nullopt;
    }
    if (f.progress.watermark > resume.watermark) {
      log().info("etlc: {}: split '{}' resumes at the sink's watermark {} (the record has {})",
                 instance_, id, f.progress.watermark, resume.watermark);
      resume = f.progress;
      std::lock_guard lk(mu_);
      ++stats_.sink_resumed;
    }
  }
  s.opened = true;
  LaneContext ctx{s.grant.spec, s.grant.epoch, resume, instance_, s.stop.get_token(), {}};
  ctx.live = [api = api_, session = s.grant.session] { return api->session_live(session); };
  try {
    s.lane = source_->open(ctx);
    if (!s.lane) throw std::runtime_error("the source returned no lane");
    std::lock_guard lk(mu_);
    ++stats_.lanes_open;
  } catch (const std::exception& e) {
    s.reason = fmt::format("opening a lane failed: {}", e.what());
    s.work = Slot::Work::fail;
  }
  return std::nullopt;
}

Driver::Turn Driver::turn(Slot& s) {
  bool lost, drain, shutdown, aborted, forced;
  {
    std::lock_guard lk(mu_);
    lost = s.lost;
    drain = s.drain;
    shutdown = s.shutdown;
    aborted = s.abort;
    forced = s.forced;
  }
  if (aborted) {
    close_slot(s, LaneEnd::aborted);
    return Turn::closed;
  }
  if (lost) {
    close_slot(s, LaneEnd::lost);
    return Turn::closed;
  }
  if (forced) {  // the shutdown deadline passed: no final commit
    close_slot(s, LaneEnd::shutdown);
    return Turn::closed;
  }
  const auto now = clock_.now();
  const std::string& id = s.id();
  const std::uint64_t epoch = s.grant.epoch;

  // Every fenced call goes through here: the loss check, the exception policy, the statistics.
  auto call = [&](const char* what, const std::function<CommitResult()>& fn) -> Outcome {
    {
      std::lock_guard lk(mu_);
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
      log().warn("etlc: {}: {} of split '{}' failed: {}", instance_, what, id, e.what());
      r = CommitResult{CommitStatus::retryable, e.what()};
    }
    std::lock_guard lk(mu_);
    switch (r.status) {
      case CommitStatus::durable:
        return Outcome::done;
      case CommitStatus::fenced:
        s.ended = true;
        log().info("etlc: {}: {} of split '{}' fenced: {}", instance_, what, id, r.detail);
        return Outcome::lost;
      case CommitStatus::retryable:
        ++stats_.commit_retries;
        return Outcome::retry;
    }
    return Outcome::retry;
  };
  auto commit = [&](const SplitProgress& p) -> Outcome {
    if (!newer(p, s.committed)) {
      if (p.watermark < s.committed.watermark) {
        s.reason = fmt::format("the lane's durable progress went back from {} to {}",
                               s.committed.watermark, p.watermark);
        return Outcome::invalid;
      }
      return Outcome::done;  // nothing new
    }
    Outcome o = call("commit", [&] { return api_->commit(id, p, epoch); });
    if (o == Outcome::done) {
      s.committed = p;
      std::lock_guard lk(mu_);
      ++stats_.commits;
      auto [it, fresh] = last_durable_.try_emplace(id, epoch, p);
      if (!fresh && (it->second.first < epoch ||
                     (it->second.first == epoch && it->second.second.watermark <= p.watermark))) {
        it->second = {epoch, p};
      }
    }
    return o;
  };
  auto later = [&] {
    std::lock_guard lk(mu_);
    s.not_before = now + options_.retry_backoff;
    return Turn::later;
  };
  auto closed = [&](LaneEnd end) {
    close_slot(s, end);
    return Turn::closed;
  };
  auto poison = [&](std::string why) {
    s.reason = why.empty() ? std::string("the lane reported poison") : std::move(why);
    s.work = Slot::Work::fail;
  };
  auto refused = [&](std::string why) {  // the sink refused a batch: see open_lane
    {
      std::lock_guard lk(mu_);
      ++stats_.sink_refused;
    }
    s.sink_refused = true;
    s.reason = fmt::format("the sink refused a batch of split '{}' (epoch {}): {}", id, epoch,
                           why.empty() ? std::string("its fence stands at a newer epoch") : why);
    s.work = Slot::Work::fail;
  };
  auto lane_lapsed = [&] { return lapsed(s); };

  if (!s.opened) {
    if (auto t = open_lane(s, drain, shutdown, now)) return *t;
  }

  // A few hops through the work states (run -> complete -> ...) per turn, then yield.
  for (int hop = 0; hop < 8; ++hop) {
    switch (s.work) {
      case Slot::Work::run: {
        if (drain || shutdown) {
          if (lane_lapsed()) return closed(LaneEnd::lost);
          std::optional<SplitProgress> fin;
          try {
            fin = s.lane->drain();
          } catch (const SinkFenced& e) {
            refused(e.what());
            continue;
          } catch (const std::exception& e) {
            log().warn("etlc: {}: draining split '{}' threw (declining): {}", instance_, id,
                       e.what());
          }
          if (!fin) {
            if (shutdown && !drain) return closed(LaneEnd::shutdown);
            {
              std::lock_guard lk(mu_);
              s.ended = true;  // the forced release's SplitLost must not hit a newer lane
              ++stats_.declined;
            }
            try {
              api_->decline_revoke(id, epoch);
            } catch (const std::exception& e) {
              log().warn("etlc: {}: declining the revocation of '{}' failed: {}", instance_, id,
                         e.what());
            }
            return closed(LaneEnd::lost);
          }
          s.final_progress = *fin;
          s.work = drain ? Slot::Work::drain_commit : Slot::Work::shutdown_commit;
          continue;
        }
        if (now >= s.next_commit_at) {
          s.next_commit_at = now + options_.commit_interval;
          if (lane_lapsed()) return closed(LaneEnd::lost);
          SplitProgress p;
          try {
            p = s.lane->durable_progress();
          } catch (const SinkFenced& e) {
            refused(e.what());
            continue;
          } catch (const std::exception& e) {
            poison(fmt::format("durable_progress threw: {}", e.what()));
            continue;
          }
          switch (commit(p)) {
            case Outcome::done:
              break;
            case Outcome::lost:
              return closed(LaneEnd::lost);
            case Outcome::retry:
              s.next_commit_at = now + options_.retry_backoff;
              break;
            case Outcome::invalid:
              s.work = Slot::Work::fail;
              continue;
          }
        }
        if (lane_lapsed()) return closed(LaneEnd::lost);
        StepResult r;
        try {
          r = s.lane->step();
        } catch (const SinkFenced& e) {
          r = StepResult::fenced(e.what());
        } catch (const std::exception& e) {
          r = StepResult::poisoned(fmt::format("the lane threw: {}", e.what()));
        }
        if (r.status == StepResult::Status::more) return Turn::again;
        if (r.status == StepResult::Status::poison) {
          poison(std::move(r.reason));
          continue;
        }
        if (r.status == StepResult::Status::fenced) {
          refused(std::move(r.reason));
          continue;
        }
        if (lane_lapsed()) return closed(LaneEnd::lost);
        try {
          s.final_progress = s.lane->durable_progress();
          s.work = Slot::Work::complete;
        } catch (const SinkFenced& e) {
          refused(e.what());
        } catch (const std::exception& e) {
          poison(fmt::format("durable_progress threw at the end of the split: {}", e.what()));
        }
        continue;
      }

      case Slot::Work::complete: {
        if (s.final_progress.watermark < s.committed.watermark) {
          poison(fmt::format("the lane's final progress {} is below its committed progress {}",
                             s.final_progress.watermark, s.committed.watermark));
          continue;
        }
        switch (call("complete", [&] { return api_->complete(id, s.final_progress, epoch); })) {
          case Outcome::done:
            forget_durable(id);
            return closed(LaneEnd::completed);
          case Outcome::lost:
            return closed(LaneEnd::lost);
          case Outcome::retry:
            return later();
          case Outcome::invalid:
            s.work = Slot::Work::fail;
            continue;
        }
        continue;
      }

      case Slot::Work::fail: {
        if (s.sink_refused) {
          // Normally another member owns a newer epoch and the store answers fenced (the lane is
          // simply lost); only a sink ahead of every grant makes this consume an attempt.
          log().info("etlc: {}: {}; reporting the split failed", instance_, s.reason);
        } else {
          log().warn("etlc: {}: failing split '{}': {}", instance_, id, s.reason);
        }
        switch (call("fail", [&] { return api_->fail(id, s.reason, epoch); })) {
          case Outcome::done:
            if (s.sink_refused) {
              log().warn(
                  "etlc: {}: split '{}' failed: the sink's fence is ahead of the "
                  "coordination store ({}): a fence row from a newer epoch than any grant?",
                  instance_, id, s.reason);
            }
            return closed(LaneEnd::failed);
          case Outcome::lost:
          case Outcome::invalid:
            return closed(LaneEnd::lost);
          case Outcome::retry:
            return later();
        }
        continue;
      }

      case Slot::Work::drain_commit:
      case Slot::Work::shutdown_commit: {
        const bool revoking = s.work == Slot::Work::drain_commit;
        switch (commit(s.final_progress)) {
          case Outcome::done:
            if (!revoking) return closed(LaneEnd::shutdown);
            s.work = Slot::Work::drain_release;
            continue;
          case Outcome::lost:
            return closed(LaneEnd::lost);
          case Outcome::retry:
            return later();
          case Outcome::invalid:
            log().warn("etlc: {}: final commit of split '{}' refused: {}", instance_, id, s.reason);
            if (!revoking) return closed(LaneEnd::shutdown);
            {
              std::lock_guard lk(mu_);
              s.ended = true;
              ++stats_.declined;
            }
            api_->decline_revoke(id, epoch);
            return closed(LaneEnd::lost);
        }
        continue;
      }

      case Slot::Work::drain_release: {
        switch (call("release", [&] { return api_->release_drained(id, epoch); })) {
          case Outcome::done:
          case Outcome::invalid:
            return closed(LaneEnd::drained);
          case Outcome::lost:
            return closed(LaneEnd::lost);
          case Outcome::retry:
            return later();
        }
        continue;
      }
    }
  }
  return Turn::again;
}

}  // namespace etlc
