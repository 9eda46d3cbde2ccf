// A slot's first turn: where to resume (the granted progress, this driver's own later commit of
// the split, the sink's progress: the largest), the sink fence, the lane.
#include <fmt/format.h>
#include "log.hpp"

#include <stdexcept>

#include "driver/driver_impl.hpp"
#include "etlc/sink_fence.hpp"

namespace etlc {

// A value ends the turn; nullopt goes on to the slot's work (run, or fail when the sink fence
// refused the tenancy or the lane could not be opened, or drain_release when revoked already).
std::optional<Driver::Impl::Turn> Driver::Impl::open_lane(Slot& s, const TurnStart& t) {
  SplitProgress resume = resume_point(s);
  s.committed = resume;
  s.next_commit_at = t.now + options_.commit_interval;
  if (t.drain) {
    s.opened = true;
    s.work = Slot::Work::drain_release;  // never opened: nothing to drain
    return std::nullopt;
  }
  if (t.shutdown) {
    s.opened = true;
    return close_slot(s, LaneEnd::shutdown);
  }
  if (lapsed(s)) {  // before the sink fence: opening it is a write
    s.opened = true;
    return close_slot(s, LaneEnd::lost);
  }
  if (options_.sink_fence) {
    if (auto later = open_sink_fence(s, resume, t.now)) return later;  // not opened: retried
  }
  s.opened = true;
  if (s.work == Slot::Work::fail) return std::nullopt;  // the sink fence refused or threw
  open_user_lane(s, resume);
  return std::nullopt;
}

// The granted progress, or this driver's own commit of the previous tenancy when it is ahead.
SplitProgress Driver::Impl::resume_point(const Slot& s) {
  SplitProgress resume = s.grant.progress;
  // A commit of an older tenancy of ours may have landed after this grant was issued (it raced
  // the loss): resume from it, so the lane never reports progress below the record.
  MutexLock lk(mu_);
  // Only for our own next tenancy (or an adopted one): a grant two or more epochs later follows
  // someone else's tenancy or an operator's `etlc seek` (which bumps the epoch), and its progress
  // is the truth even when it is lower than ours.
  if (auto it = last_durable_.find(s.id()); it != last_durable_.end() &&
                                            s.grant.epoch <= it->second.first + 1 &&
                                            it->second.second.watermark > resume.watermark) {
    resume = it->second.second;
  }
  return resume;
}

// Raises the split's fence in the sink to this tenancy's epoch; `resume` moves up to the sink's
// progress. Turn::later when the sink could not be reached; a refusal (or a throw) sets the
// slot's work to fail with the reason.
std::optional<Driver::Impl::Turn> Driver::Impl::open_sink_fence(Slot& s, SplitProgress& resume,
                                                                Clock::time_point now) {
  const std::string& id = s.id();
  FenceResult f;
  try {
    f = options_.sink_fence->open(id, s.grant.epoch);
  } catch (const std::exception& e) {
    s.reason = fmt::format("opening the sink fence failed: {}", e.what());
    s.work = Slot::Work::fail;
    return std::nullopt;
  }
  if (f.status == FenceStatus::retryable) {
    log().warn("etlc: {}: the sink fence of split '{}' could not be opened (retrying): {}",
               instance_, id, f.detail);
    MutexLock lk(mu_);
    driver::FlagsHeld flags(s, held(mu_));
    s.not_before = now + options_.retry_backoff;
    ++stats_.commit_retries;
    return Turn::later;
  }
  if (f.status == FenceStatus::refused) {
    {
      MutexLock lk(mu_);
      ++stats_.sink_refused;
    }
    s.sink_refused = true;
    s.reason = fmt::format(
        "the sink fence of split '{}' stands at epoch {}, above this tenancy's epoch {}{}{}", id,
        f.sink_epoch, s.grant.epoch, f.detail.empty() ? "" : ": ", f.detail);
    s.work = Slot::Work::fail;
    return std::nullopt;
  }
  if (f.progress.watermark > resume.watermark) {
    log().info("etlc: {}: split '{}' resumes at the sink's watermark {} (the record has {})",
               instance_, id, f.progress.watermark, resume.watermark);
    resume = f.progress;
    MutexLock lk(mu_);
    ++stats_.sink_resumed;
  }
  return std::nullopt;
}

// The user's lane, from the source; a throw (or no lane) sets the slot's work to fail.
void Driver::Impl::open_user_lane(Slot& s, const SplitProgress& resume) {
  LaneContext ctx{s.grant.spec, s.grant.epoch, resume, instance_, s.stop.get_token(), {}};
  ctx.live = [member = member_, session = s.grant.session] {
    return member->session_live(session);
  };
  try {
    s.lane = source_->open(ctx);
    if (!s.lane) throw std::runtime_error("the source returned no lane");
    metrics_->lane_opened();
    MutexLock lk(mu_);
    ++stats_.lanes_open;
    ++stats_.lanes_opened;
  } catch (const std::exception& e) {
    s.reason = fmt::format("opening a lane failed: {}", e.what());
    s.work = Slot::Work::fail;
  }
}

}  // namespace etlc
