// The leader's report of the job's progress: the weight planned, done and remaining over every
// split record (LeaderViews::weights), the recent rate, as metrics and in job.progress for
// `etlc status`. Sampled once per progress_interval; the record is written only when it changed.
// No member reads job.progress, so a lost write or an outsider's value costs nothing: the next
// interval reads the revision afresh and writes again.
#include <chrono>

#include "core/keys.hpp"
#include "runtime/leadership.hpp"

namespace etlc::runtime {

void Leadership::publish_progress(TimePoint now) {
  if (now < progress_due()) return;
  last_progress_at_ = now;
  const core::JobWeights w = leader_views_.weights();
  ctx_.metrics.set_job_weights(w.planned, w.done, w.remaining);
  rate_.observe(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()),
                w.done);
  const core::ProgressRecord rec{term_, w.planned, w.done, w.remaining, rate_.per_second()};
  if (progress_written_ == rec) return;
  const std::string key(core::kProgressKey);
  if (!progress_rev_) {
    auto cur = ctx_.store.get(key);
    progress_rev_ = cur ? cur->revision : 0;
  }
  const WriteResult r = *progress_rev_ == 0
                            ? ctx_.store.create(key, core::encode(rec))
                            : ctx_.store.update(key, core::encode(rec), *progress_rev_);
  if (r.ok) {
    progress_written_ = rec;
    progress_rev_ = r.revision;
  } else {
    progress_rev_.reset();  // someone else wrote it (or the store failed): read it next time
  }
}

}  // namespace etlc::runtime
