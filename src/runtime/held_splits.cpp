// HeldSplits: the held-split table, the event queue and the fenced operations (held_splits.hpp).
//
// A release clears the record's owner first and deletes the lease second: a crash between the
// two leaves a lease that dies with the session, and the next claim sees a graceful release
// (no attempt consumed) rather than a takeover.
#include "runtime/held_splits.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/claim_rules.hpp"
#include "core/cut_rules.hpp"
#include "core/held_write.hpp"
#include "core/keys.hpp"
#include "core/protocol_assert.hpp"
#include "core/utf8.hpp"
#include "log.hpp"

namespace etlc::runtime {

namespace {
constexpr int kCasAttempts = 3;
// Calls in a row that must read a held split's record as absent before it counts as deleted.
constexpr int kAbsentRereadLimit = 3;
constexpr std::size_t kMaxErrorBytes = 1024;

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

// A commit's progress replaces the record's, except that a commit which reports no `done` keeps
// the last one reported (a lane resumed by a source that does not track it loses nothing).
void set_progress(core::SplitRecord& next, const SplitProgress& progress) {
  std::optional<std::uint64_t> done = progress.done ? progress.done : next.progress.done;
  next.progress = progress;
  next.progress.done = done;
}

CommitResult not_held(std::string_view id) {
  return {CommitStatus::fenced, fmt::format("split '{}' is not held", id)};
}
}  // namespace

// --- the table, the events, the mirrors ---------------------------------------------------------

void HeldSplits::push_locked(Event e) {
  events_.push_back(std::move(e));
  event_cv_.notify_all();
}

void HeldSplits::push_event(Event e) {
  MutexLock lk(mu_);
  push_locked(std::move(e));
}

std::optional<Event> HeldSplits::poll_event() {
  MutexLock lk(mu_);
  if (events_.empty()) return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

std::optional<Event> HeldSplits::wait_event(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lk(mu_);
  while (events_.empty() && std::chrono::steady_clock::now() < deadline) {
    event_cv_.wait_until(mu_, deadline);
  }
  if (events_.empty()) return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void HeldSplits::add(std::shared_ptr<Held> h) {
  SplitGranted grant;
  {
    MutexLock io(h->io);
    // A held record names this instance and this session's nonce, at the tenancy's epoch.
    ETLC_ASSERT(h->record.epoch == h->epoch && h->record.owner == ctx_.instance &&
                    h->record.owner_nonce == nonce(),
                "split '{}' held at epoch {} by nonce '{}' but its record says epoch {} owner '{}' "
                "nonce '{}'",
                h->id, h->epoch, nonce(), h->record.epoch, h->record.owner.value_or(""),
                h->record.owner_nonce.value_or(""));
    grant = SplitGranted{h->spec, h->epoch, h->record.progress, h->session};
  }
  MutexLock lk(mu_);
  held_[h->id] = h;
  held_changes_.emplace_back(h->id, true);
  revocations_.erase(h->id);
  push_locked(std::move(grant));
  ctx_.metrics.set_owned(held_.size());
}

std::shared_ptr<Held> HeldSplits::find(std::string_view id) const {
  MutexLock lk(mu_);
  auto it = held_.find(id);
  return it == held_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, bool>> HeldSplits::take_held_changes() {
  std::vector<std::pair<std::string, bool>> out;
  MutexLock lk(mu_);
  out.swap(held_changes_);
  return out;
}

std::vector<std::shared_ptr<Held>> HeldSplits::all() const {
  MutexLock lk(mu_);
  std::vector<std::shared_ptr<Held>> out;
  out.reserve(held_.size());
  for (const auto& [id, h] : held_) out.push_back(h);
  return out;
}

std::vector<std::string> HeldSplits::ids() const {
  MutexLock lk(mu_);
  std::vector<std::string> out;
  out.reserve(held_.size());
  for (const auto& [id, h] : held_) out.push_back(id);
  return out;
}

std::size_t HeldSplits::size() const {
  MutexLock lk(mu_);
  return held_.size();
}

void HeldSplits::set_leader(bool leader) {
  MutexLock lk(mu_);
  leader_ = leader;
}
bool HeldSplits::leader() const {
  MutexLock lk(mu_);
  return leader_;
}
void HeldSplits::set_assignment(std::optional<std::vector<std::string>> a) {
  MutexLock lk(mu_);
  assignment_ = std::move(a);
}
std::optional<std::vector<std::string>> HeldSplits::assignment() const {
  MutexLock lk(mu_);
  return assignment_;
}
void HeldSplits::set_nonce(std::string nonce) {
  MutexLock lk(mu_);
  nonce_ = std::move(nonce);
}
std::string HeldSplits::nonce() const {
  MutexLock lk(mu_);
  return nonce_;
}

// --- revocations --------------------------------------------------------------------------------

void HeldSplits::begin_revocation(const Held& h, TimePoint now) {
  MutexLock lk(mu_);
  if (!held_.count(h.id) || revocations_.count(h.id)) return;  // once begun, it finishes
  revocations_[h.id] = Revocation{false, now + ctx_.config.drain_deadline};
  push_locked(RevokeRequested{h.id, ctx_.config.drain_deadline, h.epoch});
  log().info("etlc: {}: revoking split '{}' (drain deadline {} ms)", ctx_.instance, h.id,
             ctx_.config.drain_deadline.count());
}

std::vector<std::pair<std::shared_ptr<Held>, bool>> HeldSplits::due_revocations(
    TimePoint now) const {
  MutexLock lk(mu_);
  std::vector<std::pair<std::shared_ptr<Held>, bool>> out;
  for (const auto& [id, r] : revocations_) {
    auto h = held_.find(id);
    if (h != held_.end() && (r.declined || now >= r.deadline))
      out.emplace_back(h->second, r.declined);
  }
  return out;
}

std::optional<TimePoint> HeldSplits::next_revocation_due(TimePoint now) const {
  MutexLock lk(mu_);
  std::optional<TimePoint> next;
  for (const auto& [id, r] : revocations_) {
    const TimePoint due = r.declined ? now : r.deadline;
    if (!next || due < *next) next = due;
  }
  return next;
}

std::size_t HeldSplits::draining() const {
  MutexLock lk(mu_);
  return revocations_.size();
}

void HeldSplits::decline_revoke(std::string_view id, std::uint64_t epoch) {
  auto h = find(id);
  if (!h) return;
  if (epoch != kAnyEpoch && epoch != h->epoch) return;  // a late answer for an ended tenancy
  {
    MutexLock lk(mu_);
    auto r = revocations_.find(id);
    if (r == revocations_.end() || held_.find(id) == held_.end() ||
        held_.at(std::string(id)) != h) {
      return;
    }
    r->second.declined = true;
  }
  ctx_.wake_loop();
}

void HeldSplits::ask_splits(std::span<const core::SplitAsk> asks) {
  MutexLock lk(mu_);
  for (const core::SplitAsk& a : asks) {
    auto h = held_.find(a.split);
    if (h == held_.end() || h->second->epoch != a.epoch) continue;  // not this tenancy's
    const std::pair<std::uint64_t, std::uint32_t> key{a.epoch, a.children};
    auto [it, fresh] = asked_.try_emplace(a.split, key);
    if (!fresh && it->second == key) continue;  // passed on already
    it->second = key;
    push_locked(SplitRequested{a.split, a.epoch, static_cast<double>(a.keep_ppm) / 1e6});
  }
}

// --- losing splits ------------------------------------------------------------------------------

void HeldSplits::drop(Held& h, std::optional<LossReason> reason) {
  h.gone = true;
  {
    MutexLock lk(mu_);
    auto it = held_.find(h.id);
    if (it != held_.end() && it->second.get() == &h) {
      held_.erase(it);
      held_changes_.emplace_back(h.id, false);
      revocations_.erase(h.id);
      asked_.erase(h.id);
    }
    ctx_.metrics.set_owned(held_.size());
    if (reason) {
      push_locked(SplitLost{h.id, *reason});
      ctx_.metrics.lost(*reason);
    }
  }
  ctx_.wake_loop();  // a lane is free: the loop may claim
}

void HeldSplits::drop_all(LossReason reason) {
  for (auto& h : all()) {
    MutexLock io(h->io);
    if (!h->gone) drop(*h, reason);
  }
}

void HeldSplits::abandon() {
  std::vector<std::shared_ptr<Held>> every = all();
  for (auto& h : every) {
    MutexLock io(h->io);
    h->gone = true;  // no further I/O from user threads
  }
  MutexLock lk(mu_);
  for (const auto& [id, h] : held_) held_changes_.emplace_back(id, false);
  held_.clear();
  revocations_.clear();
  asked_.clear();
  leader_ = false;
}

// The guarded delete itself; a delete that landed is journalled for the loop's lease view.
void HeldSplits::erase_lease_at(const std::string& id, Revision rev) {
  const WriteResult r = ctx_.store.erase(core::lease_key(id), rev);
  if (!r.ok) return;
  MutexLock lk(mu_);
  erased_leases_.emplace_back(id, r.revision);
}

// Deletes the split's lease (guarded by the revision we created it at). If the store cannot be
// reached the delete is queued and retried by the loop: the record already says released, and a
// lease left behind would only make the next owner wait for our session to end.
void HeldSplits::erase_lease(const Held& h) {
  try {
    erase_lease_at(h.id, h.lease_rev);
  } catch (const StoreError& e) {
    if (!e.retryable()) throw;
    MutexLock lk(mu_);
    pending_lease_erases_.emplace_back(h.id, h.lease_rev);
  }
}

void HeldSplits::retry_lease_erases() {
  std::vector<std::pair<std::string, Revision>> todo;
  {
    MutexLock lk(mu_);
    todo.swap(pending_lease_erases_);
  }
  for (std::size_t i = 0; i < todo.size(); ++i) {
    try {
      erase_lease_at(todo[i].first, todo[i].second);
    } catch (const StoreError& e) {
      if (!e.retryable()) throw;
      MutexLock lk(mu_);
      pending_lease_erases_.insert(pending_lease_erases_.end(), todo.begin() + i, todo.end());
      return;
    }
  }
}

std::vector<std::pair<std::string, Revision>> HeldSplits::take_erased_leases() {
  std::vector<std::pair<std::string, Revision>> out;
  MutexLock lk(mu_);
  out.swap(erased_leases_);
  return out;
}

bool HeldSplits::lease_erases_pending() const {
  MutexLock lk(mu_);
  return !pending_lease_erases_.empty();
}

// --- fenced writes ------------------------------------------------------------------------------

std::optional<CommitResult> HeldSplits::tenancy_over(const Held& h, std::uint64_t epoch) {
  if (h.gone) return CommitResult{CommitStatus::fenced, "split no longer held"};
  if (epoch == kAnyEpoch || epoch == h.epoch) return std::nullopt;
  return CommitResult{
      CommitStatus::fenced,
      fmt::format("split '{}' is held in epoch {}, not in epoch {}", h.id, h.epoch, epoch)};
}

CommitResult HeldSplits::write_record(Held& h, core::SplitRecord next, const char* what) {
  const std::string key = core::split_key(h.id);
  core::SplitRecord base = h.record;  // what `next` was built on
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    const std::string bytes = core::encode(next);
    WriteResult r;
    try {
      r = ctx_.store.update(key, bytes, h.record_rev);
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unknown_outcome) {
        if (!e.retryable()) throw;
        ctx_.metrics.store_failure();
        return {CommitStatus::retryable, e.what()};
      }
    }
    if (r.ok) {
      ETLC_ASSERT(next.epoch == h.epoch && next.epoch >= h.record.epoch,
                  "{} of split '{}' wrote epoch {} while held at epoch {} (record at {})", what,
                  h.id, next.epoch, h.epoch, h.record.epoch);
      h.record = next;
      h.record_rev = r.revision;
      h.absent_rereads = 0;
      return {CommitStatus::durable, {}};
    }
    if (auto outcome = resolve_conflict(h, base, next, what)) return *outcome;
  }
  return {CommitStatus::retryable, fmt::format("{} kept conflicting", what)};
}

// A CAS lost, or its outcome is unknown: what the store holds now decides (core/held_write.hpp).
// A retry is moved onto the record read, which becomes the holder's (`base`, h.record): a write
// of another writer in between is kept, and the next write is built on it too.
std::optional<CommitResult> HeldSplits::resolve_conflict(Held& h, core::SplitRecord& base,
                                                         core::SplitRecord& next,
                                                         const char* what) {
  const std::string key = core::split_key(h.id);
  std::optional<Entry> cur;
  try {
    cur = ctx_.store.get(key);
  } catch (const StoreError& e) {
    if (!e.retryable()) throw;
    return CommitResult{CommitStatus::retryable,
                        fmt::format("{} outcome unknown: {}", what, e.what())};
  }
  if (!cur) {
    // The library never deletes a split record, so a held split's record read as absent is a
    // stale replica (our write may have landed) until it is seen absent kAbsentRereadLimit
    // times in a row: then someone really deleted it.
    if (++h.absent_rereads < kAbsentRereadLimit) {
      return CommitResult{CommitStatus::retryable,
                          fmt::format("{}: the split record read as absent", what)};
    }
    drop(h, LossReason::fenced);
    return CommitResult{CommitStatus::fenced, "the split record is gone"};
  }
  h.absent_rereads = 0;
  if (cur->revision < h.record_rev) {
    // Revisions only grow, so this read predates a write we saw land: a stale replica. Judging
    // 'fenced' from it could hide a write of ours that landed (an unknown outcome).
    return CommitResult{CommitStatus::retryable,
                        fmt::format("{}: the store answered a stale read", what)};
  }
  core::SplitRecord seen;
  try {
    seen = core::decode_split(key, cur->value);
  } catch (const core::RecordError& e) {
    drop(h, LossReason::fenced);
    return CommitResult{CommitStatus::fenced, e.what()};
  }
  core::ConflictResolution res =
      core::resolve_held_conflict(base, next, seen, h.epoch, ctx_.instance, h.record.owner_nonce);
  switch (res.verdict) {
    case core::ConflictVerdict::fenced:
      log().info("etlc: {}: {} of split '{}' fenced (epoch {} now owned by '{}' epoch {})",
                 ctx_.instance, what, h.id, h.epoch, seen.owner.value_or("nobody"), seen.epoch);
      drop(h, LossReason::fenced);
      return CommitResult{CommitStatus::fenced, "another member owns a newer epoch"};
    case core::ConflictVerdict::landed:
    case core::ConflictVerdict::superseded:
      h.record = std::move(res.record);
      h.record_rev = cur->revision;
      if (res.verdict == core::ConflictVerdict::landed)
        return CommitResult{CommitStatus::durable, {}};
      return CommitResult{CommitStatus::durable, "a later commit of ours already landed"};
    case core::ConflictVerdict::retry:
      break;
  }
  h.record = std::move(seen);  // our own earlier write, or another writer's, moved it
  h.record_rev = cur->revision;
  base = h.record;
  next = std::move(res.record);
  return std::nullopt;
}

CommitResult HeldSplits::release_locked(Held& h) {
  core::SplitRecord next = h.record;
  next.owner.reset();
  next.owner_nonce.reset();
  return terminal_write(h, std::move(next), "release");
}

// A write that ends the tenancy (release, complete, fail): then the lease goes and the split
// is no longer held.
CommitResult HeldSplits::terminal_write(Held& h, core::SplitRecord next, const char* what) {
  CommitResult r = write_record(h, next, what);
  if (r.status != CommitStatus::durable) return r;
  erase_lease(h);
  drop(h, std::nullopt);
  return r;
}

CommitResult HeldSplits::commit(std::string_view id, const SplitProgress& progress,
                                std::uint64_t epoch) {
  auto h = find(id);
  if (!h) return not_held(id);
  if (progress.state.size() > kMaxProgressStateBytes) {
    throw UsageError(fmt::format("commit of split '{}': state of {} bytes exceeds {}", id,
                                 progress.state.size(), kMaxProgressStateBytes));
  }
  MutexLock io(h->io);
  if (auto over = tenancy_over(*h, epoch)) return *over;
  if (progress.watermark < h->record.progress.watermark) {
    throw UsageError(fmt::format(
        "commit of split '{}': watermark {} is below the durable watermark {} (progress never "
        "goes back)",
        id, progress.watermark, h->record.progress.watermark));
  }
  core::SplitRecord next = h->record;
  set_progress(next, progress);
  if (ctx_.unsafe.commit_without_fence) {
    // Test-only: overwrite whatever is there (what a system without fencing would do).
    auto cur = ctx_.store.get(core::split_key(h->id));
    if (cur) h->record_rev = cur->revision;
  }
  return write_record(*h, next, "commit");
}

CommitResult HeldSplits::complete(std::string_view id, const SplitProgress& progress,
                                  std::uint64_t epoch) {
  auto h = find(id);
  if (!h) return not_held(id);
  MutexLock io(h->io);
  if (auto over = tenancy_over(*h, epoch)) return *over;
  if (progress.watermark < h->record.progress.watermark) {
    throw UsageError(fmt::format("complete of split '{}': watermark {} is below the durable {}", id,
                                 progress.watermark, h->record.progress.watermark));
  }
  core::SplitRecord next = h->record;
  set_progress(next, progress);
  next.status = core::SplitStatus::completed;
  next.owner.reset();
  next.owner_nonce.reset();
  CommitResult r = terminal_write(*h, std::move(next), "complete");
  if (r.durable()) {
    log().info("etlc: {}: completed split '{}' at watermark {}", ctx_.instance, id,
               progress.watermark);
  }
  return r;
}

CommitResult HeldSplits::fail(std::string_view id, std::string_view reason, std::uint64_t epoch) {
  auto h = find(id);
  if (!h) return not_held(id);
  MutexLock io(h->io);
  if (auto over = tenancy_over(*h, epoch)) return *over;
  const core::FailDecision d = core::decide_fail(h->record, ctx_.config.max_attempts);
  core::SplitRecord next = h->record;
  next.attempts = d.attempts_after;
  next.last_error = printable_reason(reason);
  next.owner.reset();
  next.owner_nonce.reset();
  if (d.quarantine) next.status = core::SplitStatus::quarantined;
  CommitResult r = terminal_write(*h, std::move(next), "fail");
  if (!r.durable()) return r;
  if (d.quarantine) {
    ctx_.metrics.quarantined_split();
    push_event(SplitQuarantined{std::string(id), d.attempts_after});
    log().warn("etlc: {}: split '{}' quarantined after {} attempts: {}", ctx_.instance, id,
               d.attempts_after, reason);
  } else {
    log().info("etlc: {}: split '{}' failed (attempt {} of {}): {}", ctx_.instance, id,
               d.attempts_after, ctx_.config.max_attempts, reason);
  }
  return r;
}

CommitResult HeldSplits::release_drained(std::string_view id, std::uint64_t epoch) {
  auto h = find(id);
  if (!h) return not_held(id);
  MutexLock io(h->io);
  if (auto over = tenancy_over(*h, epoch)) return *over;
  CommitResult r = release_locked(*h);
  if (r.durable()) {
    ctx_.metrics.revocation("cooperative");
    log().info("etlc: {}: released drained split '{}' at watermark {}", ctx_.instance, id,
               h->record.progress.watermark);
  }
  return r;
}

// The cut (core/cut_rules.hpp): the residual's spec, then its pending record, then the parent's
// fenced CAS naming it. A retry after an unknown outcome finds the first two from its earlier
// attempt (the child's id is the same: the parent's record names no new child meanwhile) and
// carries on; the CAS itself resolves its doubt as every commit does.
CommitResult HeldSplits::split(std::string_view id, const SplitProgress& progress,
                               const SplitResidual& residual, std::uint64_t epoch) {
  auto h = find(id);
  if (!h) return not_held(id);
  if (progress.state.size() > kMaxProgressStateBytes ||
      residual.descriptor.size() > kMaxDescriptorBytes) {
    throw UsageError(
        fmt::format("split of '{}': state of {} bytes or residual descriptor of {} "
                    "bytes over its limit ({} / {})",
                    id, progress.state.size(), residual.descriptor.size(), kMaxProgressStateBytes,
                    kMaxDescriptorBytes));
  }
  MutexLock io(h->io);
  if (auto over = tenancy_over(*h, epoch)) return *over;
  if (progress.watermark < h->record.progress.watermark) {
    throw UsageError(fmt::format("split of '{}': watermark {} is below the durable {}", id,
                                 progress.watermark, h->record.progress.watermark));
  }
  if (h->record.children.size() >= core::kMaxChildrenPerSplit) {
    throw UsageError(fmt::format("split of '{}': it has {} residuals already, the most a split may",
                                 id, h->record.children.size()));
  }
  std::string child;
  if (auto r = create_residual(*h, progress, residual, child)) return *r;
  CommitResult r =
      write_record(*h, core::cut_parent(h->record, progress, child, residual.weight), "split");
  if (r.durable()) {
    log().info("etlc: {}: split '{}' cut at watermark {}: its residual is '{}' (weight {})",
               ctx_.instance, id, progress.watermark, child, residual.weight);
  }
  return r;
}

// Steps 1 and 2 of the cut: spec.{child} (with the parent's progress after the cut, which a
// parent rebuilt from its spec resumes from), then its pending record; nullopt when both are
// there, with `child` set. The child is the tenancy's next, {P}~{E}.{n} with n the number of
// children P names plus one, unless an earlier cut of this tenancy that never landed left a
// different residual's spec there (the lane closed, the split adopted again at E): then the next
// n. Specs are never rewritten (a stale read of a rewritten one would give a claimer the wrong
// range); the leftover is an orphan, deleted by the leader once the tenancy is over.
std::optional<CommitResult> HeldSplits::create_residual(const Held& h,
                                                        const SplitProgress& progress,
                                                        const SplitResidual& residual,
                                                        std::string& child) {
  const core::SplitOrigin origin{h.id, h.epoch};
  const std::size_t first = h.record.children.size() + 1;
  for (std::size_t n = first; n <= std::min(first + kLeftoversSkipped, core::kMaxChildNumber);
       ++n) {
    try {
      child = core::child_split_id(h.id, h.epoch, n);
    } catch (const ConfigError& e) {
      throw UsageError(fmt::format("split of '{}': {}", h.id, e.what()));
    }
    const core::SpecRecord spec{SplitSpec{child, residual.descriptor, residual.weight}, progress};
    // The same residual: a retry of this cut (its progress may have moved on since; the end,
    // which the cut fixed, has not).
    const Placed placed = place(core::spec_key(child), core::encode(spec), [&](const Entry& e) {
      const core::SpecRecord seen = core::decode_spec(e.key, e.value);
      return seen.spec == spec.spec && seen.parent_progress.has_value();
    });
    if (placed.status == Placed::taken) continue;
    if (placed.status == Placed::retry) return placed.why;
    return create_pending(child, core::pending_child(child, residual.weight, origin));
  }
  throw UsageError(fmt::format(
      "split of '{}': the ids of its next {} residuals are taken by cuts of epoch {} that never "
      "landed",
      h.id, kLeftoversSkipped + 1, h.epoch));
}

// Step 2: the pending record of a residual whose spec is ours. Ours in any status: the leader may
// have made it runnable (even granted it) after our cut landed with an unknown outcome, or
// rebuilt it pending from our spec. A pending record of this tenancy that is not ours (an
// earlier cut whose spec an operator removed) is unnamed and never claimable: replaced by CAS.
// Anything else, an unreadable record included, is left to the leader's healing (retryable).
std::optional<CommitResult> HeldSplits::create_pending(const std::string& child,
                                                       const core::SplitRecord& pending) {
  std::optional<core::SplitRecord> seen;
  const Placed placed = place(core::split_key(child), core::encode(pending), [&](const Entry& e) {
    seen = core::decode_split(e.key, e.value);
    return seen->cut_from == pending.cut_from && (seen->status != core::SplitStatus::pending ||
                                                  (seen->weight == pending.weight && !seen->owner));
  });
  if (placed.status == Placed::here) return std::nullopt;
  if (placed.status == Placed::retry) return placed.why;
  if (!seen || seen->status != core::SplitStatus::pending || seen->cut_from != pending.cut_from) {
    return CommitResult{CommitStatus::retryable,
                        fmt::format("split.{} holds a record this cut cannot use; the leader heals "
                                    "it",
                                    child)};
  }
  try {
    if (ctx_.store.update(core::split_key(child), core::encode(pending), placed.rev).ok) {
      return std::nullopt;
    }
  } catch (const StoreError& e) {
    if (!e.retryable()) throw;
    ctx_.metrics.store_failure();
  }
  return CommitResult{CommitStatus::retryable, fmt::format("split.{} changed meanwhile", child)};
}

// Creates `bytes` at `key`, or finds what is there: `here` when it is `ours` (an earlier attempt
// of this very cut), `taken` (with its revision) when it is something else or unreadable.
HeldSplits::Placed HeldSplits::place(const std::string& key, const std::string& bytes,
                                     const std::function<bool(const Entry&)>& ours) {
  try {
    if (ctx_.store.create(key, bytes).ok) return Placed{Placed::here, 0, {}};
    const std::optional<Entry> cur = ctx_.store.get(key);
    if (!cur) {
      return Placed{Placed::retry, 0,
                    CommitResult{CommitStatus::retryable, fmt::format("{} read as absent", key)}};
    }
    try {
      if (ours(*cur)) return Placed{Placed::here, cur->revision, {}};
    } catch (const core::RecordError&) {
    }
    return Placed{Placed::taken, cur->revision, {}};
  } catch (const StoreError& e) {
    if (!e.retryable()) throw;
    ctx_.metrics.store_failure();
    // An unknown outcome is settled by the retry: it finds what landed and takes it as its own.
    return Placed{Placed::retry, 0, CommitResult{CommitStatus::retryable, e.what()}};
  }
}

void HeldSplits::release(std::span<const std::string> ids) {
  for (const std::string& id : ids) {
    auto h = find(id);
    if (!h) continue;
    MutexLock io(h->io);
    if (!h->gone) release_locked(*h);
  }
}

}  // namespace etlc::runtime
