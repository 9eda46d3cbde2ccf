// Fenced operations on held splits: commit, complete, fail, release. They run on the caller's
// thread under the split's io mutex, so lanes commit in parallel and never wait for the control
// loop.
//
// Every write is a CAS on split.{id} at the revision this member last wrote. A conflict is
// resolved by a re-read: if the record still names this member at the same epoch, the conflict
// came from our own earlier write whose outcome was unknown and we adopt it; otherwise another
// member owns a newer epoch and the split is lost (fenced) with nothing written.
//
// A release clears the record's owner first and deletes the lease second: a crash between the
// two leaves a lease that dies with the session, and the next claim sees a graceful release
// (no attempt consumed) rather than a takeover.
#include <fmt/format.h>
#include "log.hpp"

#include "core/claim_rules.hpp"
#include "core/keys.hpp"
#include "core/utf8.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

namespace {
constexpr int kCasAttempts = 3;
// Calls in a row that must read a held split's record as absent before it counts as deleted.
constexpr int kAbsentRereadLimit = 3;
constexpr std::size_t kMaxErrorBytes = 1024;

// Why a call may not write for the caller's tenancy: the split was released or lost since, or
// this member holds it again in a newer epoch than the one the caller names. io held.
std::optional<CommitResult> tenancy_over(const Held& h, std::uint64_t epoch) {
  if (h.gone) return CommitResult{CommitStatus::fenced, "split no longer held"};
  if (epoch == kAnyEpoch || epoch == h.record.epoch) return std::nullopt;
  return CommitResult{
      CommitStatus::fenced,
      fmt::format("split '{}' is held in epoch {}, not in epoch {}", h.id, h.record.epoch, epoch)};
}

// fail() reasons are user text stored in a JSON record: cap them and replace whatever is not
// UTF-8 (including a sequence the cap cut in half) with '?'.
std::string printable_reason(std::string_view reason) {
  std::string_view rest = reason.substr(0, kMaxErrorBytes);
  std::string out;
  while (auto problem = core::find_utf8_problem(rest)) {
    out.append(rest.substr(0, problem->offset));
    out.push_back('?');
    rest.remove_prefix(problem->offset + 1);
  }
  out.append(rest);
  return out;
}
}  // namespace

std::shared_ptr<Held> Member::find_held(std::string_view id) const {
  std::lock_guard lk(shared_mu_);
  auto it = held_.find(std::string(id));
  return it == held_.end() ? nullptr : it->second;
}

void Member::push_event(Event e) {
  std::lock_guard lk(shared_mu_);
  events_.push_back(std::move(e));
  event_cv_.notify_all();
}

CommitResult Member::write_record(Held& h, const core::SplitRecord& next, const char* what) {
  const std::string key = core::split_key(h.id);
  const std::string bytes = core::encode(next);
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    WriteResult r;
    bool unknown = false;
    try {
      r = store_->update(key, bytes, h.record_rev);
    } catch (const StoreError& e) {
      if (e.code() == StoreErrc::unknown_outcome) {
        unknown = true;
      } else if (e.retryable()) {
        metrics_.store_failure();
        return {CommitStatus::retryable, e.what()};
      } else {
        throw;
      }
    }
    if (r.ok) {
      h.record = next;
      h.record_rev = r.revision;
      h.absent_rereads = 0;
      return {CommitStatus::durable, {}};
    }
    // Conflict or unknown outcome: look at what the store holds now.
    std::optional<Entry> cur;
    try {
      cur = store_->get(key);
    } catch (const StoreError& e) {
      if (!e.retryable()) throw;
      return {CommitStatus::retryable, fmt::format("{} outcome unknown: {}", what, e.what())};
    }
    if (!cur) {
      // The library never deletes a split record, so a held split's record read as absent is a
      // stale replica (our write may have landed) until it is seen absent kAbsentRereadLimit
      // times in a row: then someone really deleted it (an operator wiping the job).
      if (++h.absent_rereads < kAbsentRereadLimit) {
        return {CommitStatus::retryable, fmt::format("{}: the split record read as absent", what)};
      }
      drop_held(h, LossReason::fenced);
      return {CommitStatus::fenced, "the split record is gone"};
    }
    h.absent_rereads = 0;
    if (cur->revision < h.record_rev) {
      // Revisions only grow, so this read predates a write we saw land: a stale replica. Judging
      // 'fenced' from it could hide a write of ours that landed (an unknown outcome).
      return {CommitStatus::retryable, fmt::format("{}: the store answered a stale read", what)};
    }
    core::SplitRecord seen;
    try {
      seen = core::decode_split(key, cur->value);
    } catch (const core::RecordError& e) {
      drop_held(h, LossReason::fenced);
      return {CommitStatus::fenced, e.what()};
    }
    if (seen == next) {  // our write landed (the unknown outcome, or a conflict on our own echo)
      h.record = next;
      h.record_rev = cur->revision;
      return {CommitStatus::durable, {}};
    }
    const bool still_ours = seen.epoch == h.record.epoch && seen.owner == instance_ &&
                            seen.owner_nonce == h.record.owner_nonce;
    if (!still_ours) {
      log().info("etlc: {}: {} of split '{}' fenced (epoch {} now owned by '{}' epoch {})",
                 instance_, what, h.id, h.record.epoch, seen.owner.value_or("nobody"), seen.epoch);
      drop_held(h, LossReason::fenced);
      return {CommitStatus::fenced, "another member owns a newer epoch"};
    }
    (void)unknown;
    h.record_rev = cur->revision;  // our own earlier write moved it; retry on top of it
    if (seen.progress.watermark > next.progress.watermark) {
      h.record = seen;
      return {CommitStatus::durable, "a later commit of ours already landed"};
    }
  }
  return {CommitStatus::retryable, fmt::format("{} kept conflicting", what)};
}

// Clears the record's owner (keeping epoch and progress), then deletes the lease. io held.
CommitResult Member::release_locked(Held& h) {
  core::SplitRecord next = h.record;
  next.owner.reset();
  next.owner_nonce.reset();
  CommitResult r = write_record(h, next, "release");
  if (r.status != CommitStatus::durable) return r;
  erase_lease(h);
  drop_held(h, std::nullopt);
  return r;
}

// Deletes the split's lease (guarded by the revision we created it at). If the store cannot be
// reached the delete is queued and retried by the loop: the record already says released, and a
// lease left behind would only make the next owner wait for our session to end.
void Member::erase_lease(const Held& h) {
  try {
    store_->erase(core::lease_key(h.id), h.lease_rev);
  } catch (const StoreError& e) {
    if (!e.retryable()) throw;
    std::lock_guard lk(shared_mu_);
    pending_lease_erases_.emplace_back(h.id, h.lease_rev);
  }
}

// Forgets a held split; with a reason, tells the user it is lost. io held.
void Member::drop_held(Held& h, std::optional<LossReason> reason) {
  h.gone = true;
  std::lock_guard lk(shared_mu_);
  held_.erase(h.id);
  metrics_.set_owned(held_.size());
  if (reason) {
    events_.push_back(SplitLost{h.id, *reason});
    event_cv_.notify_all();
    metrics_.lost(*reason);
  }
  if (options_.wake) options_.wake();  // a lane is free: the loop may claim
}

void Member::retry_lease_erases() {
  std::vector<std::pair<std::string, Revision>> todo;
  {
    std::lock_guard lk(shared_mu_);
    todo.swap(pending_lease_erases_);
  }
  for (std::size_t i = 0; i < todo.size(); ++i) {
    try {
      store_->erase(core::lease_key(todo[i].first), todo[i].second);
    } catch (const StoreError& e) {
      if (!e.retryable()) throw;
      std::lock_guard lk(shared_mu_);
      pending_lease_erases_.insert(pending_lease_erases_.end(), todo.begin() + i, todo.end());
      return;
    }
  }
}

CommitResult Member::commit(std::string_view id, const SplitProgress& progress,
                            std::uint64_t epoch) {
  auto h = find_held(id);
  if (!h) return {CommitStatus::fenced, fmt::format("split '{}' is not held", id)};
  if (progress.state.size() > kMaxProgressStateBytes) {
    throw UsageError(fmt::format("commit of split '{}': state of {} bytes exceeds {}", id,
                                 progress.state.size(), kMaxProgressStateBytes));
  }
  std::lock_guard io(h->io);
  if (auto over = tenancy_over(*h, epoch)) return *over;
  if (progress.watermark < h->record.progress.watermark) {
    throw UsageError(fmt::format(
        "commit of split '{}': watermark {} is below the durable watermark {} (progress never "
        "goes back)",
        id, progress.watermark, h->record.progress.watermark));
  }
  core::SplitRecord next = h->record;
  next.progress = progress;
  if (options_.unsafe.commit_without_fence) {
    // Test-only: overwrite whatever is there (what a system without fencing would do).
    auto cur = store_->get(core::split_key(h->id));
    if (cur) h->record_rev = cur->revision;
  }
  return write_record(*h, next, "commit");
}

CommitResult Member::complete(std::string_view id, const SplitProgress& progress,
                              std::uint64_t epoch) {
  auto h = find_held(id);
  if (!h) return {CommitStatus::fenced, fmt::format("split '{}' is not held", id)};
  std::lock_guard io(h->io);
  if (auto over = tenancy_over(*h, epoch)) return *over;
  if (progress.watermark < h->record.progress.watermark) {
    throw UsageError(fmt::format("complete of split '{}': watermark {} is below the durable {}", id,
                                 progress.watermark, h->record.progress.watermark));
  }
  core::SplitRecord next = h->record;
  next.progress = progress;
  next.status = core::SplitStatus::completed;
  next.owner.reset();
  next.owner_nonce.reset();
  CommitResult r = write_record(*h, next, "complete");
  if (r.status != CommitStatus::durable) return r;
  erase_lease(*h);
  drop_held(*h, std::nullopt);
  log().info("etlc: {}: completed split '{}' at watermark {}", instance_, id, progress.watermark);
  return r;
}

CommitResult Member::fail(std::string_view id, std::string_view reason, std::uint64_t epoch) {
  auto h = find_held(id);
  if (!h) return {CommitStatus::fenced, fmt::format("split '{}' is not held", id)};
  std::lock_guard io(h->io);
  if (auto over = tenancy_over(*h, epoch)) return *over;
  core::FailDecision d = core::decide_fail(h->record, config_.max_attempts);
  core::SplitRecord next = h->record;
  next.attempts = d.attempts_after;
  next.last_error = printable_reason(reason);
  next.owner.reset();
  next.owner_nonce.reset();
  if (d.quarantine) next.status = core::SplitStatus::quarantined;
  CommitResult r = write_record(*h, next, "fail");
  if (r.status != CommitStatus::durable) return r;
  erase_lease(*h);
  drop_held(*h, std::nullopt);
  if (d.quarantine) {
    metrics_.quarantined_split();
    push_event(SplitQuarantined{std::string(id), d.attempts_after});
    log().warn("etlc: {}: split '{}' quarantined after {} attempts: {}", instance_, id,
               d.attempts_after, reason);
  } else {
    log().info("etlc: {}: split '{}' failed (attempt {} of {}): {}", instance_, id,
               d.attempts_after, config_.max_attempts, reason);
  }
  return r;
}

CommitResult Member::release_drained(std::string_view id, std::uint64_t epoch) {
  auto h = find_held(id);
  if (!h) return {CommitStatus::fenced, fmt::format("split '{}' is not held", id)};
  std::lock_guard io(h->io);
  if (auto over = tenancy_over(*h, epoch)) return *over;
  CommitResult r = release_locked(*h);
  if (r.durable()) {
    metrics_.revocation("cooperative");
    log().info("etlc: {}: released drained split '{}' at watermark {}", instance_, id,
               h->record.progress.watermark);
  }
  return r;
}

void Member::release(std::span<const std::string> ids) {
  for (const std::string& id : ids) {
    auto h = find_held(id);
    if (!h) continue;
    std::lock_guard io(h->io);
    if (!h->gone) release_locked(*h);
  }
}

void Member::decline_revoke(std::string_view id, std::uint64_t epoch) {
  auto h = find_held(id);
  if (!h) return;
  if (epoch != kAnyEpoch) {
    std::lock_guard io(h->io);
    if (tenancy_over(*h, epoch)) return;  // a late answer for an ended tenancy
  }
  {
    std::lock_guard lk(shared_mu_);
    if (!h->draining) return;
    h->declined = true;
  }
  if (options_.wake) options_.wake();
}

}  // namespace etlc::runtime
