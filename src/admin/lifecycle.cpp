// JobAdmin's lifecycle operations: pause, resume, check_sessions, reset, seek (see admin.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <thread>

#include "admin/job_snapshot.hpp"
#include "core/keys.hpp"
#include "core/records.hpp"
#include "core/repair_rules.hpp"
#include "etlc/admin.hpp"

namespace etlc {

namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

constexpr int kCasAttempts = 4;
constexpr milliseconds kPollInterval{100};

// The sessions under member.* (instance -> revision and lease), garbage skipped.
struct SessionSeen {
  Revision rev = 0;
  std::string nonce;
  milliseconds lease{0};
};
std::map<std::string, SessionSeen> sessions_now(KvStore& store) {
  admin::SnapshotParts parts;
  parts.members = true;
  const admin::JobSnapshot snap = admin::read_snapshot(store, parts);
  std::map<std::string, SessionSeen> out;
  for (const auto& [id, v] : snap.members) {
    const std::uint64_t ms = std::clamp<std::uint64_t>(v.rec.lease_ms, 30, 24ULL * 3600 * 1000);
    out.emplace(id, SessionSeen{v.rev, v.rec.nonce, milliseconds(static_cast<std::int64_t>(ms))});
  }
  return out;
}

// Watches the sessions (only `only`'s, when given) until each has changed, gone, or stayed put for
// its own lease, at most `max_wait` of real time.
SessionCheck watch_sessions(KvStore& store, const std::optional<std::string>& only,
                            milliseconds max_wait) {
  SessionCheck out;
  std::map<std::string, SessionSeen> pending = sessions_now(store);
  if (only) std::erase_if(pending, [&](const auto& kv) { return kv.first != *only; });
  if (pending.empty()) return out;
  milliseconds window{0};
  for (const auto& [id, s] : pending) window = std::max(window, s.lease);
  window = std::min(window, max_wait);
  const Steady::time_point start = Steady::now();
  auto elapsed = [&] { return std::chrono::duration_cast<milliseconds>(Steady::now() - start); };
  while (!pending.empty() && elapsed() < window) {
    std::this_thread::sleep_for(std::min(kPollInterval, window - elapsed()));
    const std::map<std::string, SessionSeen> now = sessions_now(store);
    for (auto it = pending.begin(); it != pending.end();) {
      auto seen = now.find(it->first);
      if (seen == now.end()) {
        out.departed.push_back(it->first);
      } else if (seen->second.rev != it->second.rev) {
        out.live.push_back(it->first);
      } else {
        ++it;
        continue;
      }
      it = pending.erase(it);
    }
    if (!only) {  // a member that joined while we watched is live
      for (const auto& [id, s] : now) {
        const bool known = pending.count(id) || std::count(out.live.begin(), out.live.end(), id) ||
                           std::count(out.departed.begin(), out.departed.end(), id);
        if (!known) out.live.push_back(id);
      }
    }
  }
  out.watched = elapsed();
  for (const auto& [id, s] : pending) {
    (out.watched >= s.lease ? out.silent : out.live).push_back(id);  // not judged: assume live
  }
  std::sort(out.live.begin(), out.live.end());
  std::sort(out.silent.begin(), out.silent.end());
  std::sort(out.departed.begin(), out.departed.end());
  return out;
}

// Guarded delete of `key`, following a record that changes (bounded). True if it is gone.
bool erase_key(KvStore& store, const std::string& key, Revision rev) {
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    try {
      if (store.erase(key, rev).ok) return true;
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unknown_outcome) throw;
    }
    std::optional<Entry> cur = store.get(key);
    if (!cur) return true;
    rev = cur->revision;
  }
  return false;
}

void check_text_limit(std::string_view what, std::string_view text, std::size_t limit) {
  if (text.size() > limit) {
    throw ConfigError(fmt::format("{} of {} bytes exceeds {} bytes", what, text.size(), limit));
  }
}

}  // namespace

PauseResult JobAdmin::pause(std::string_view reason, std::string_view by, std::uint64_t since_ms) {
  check_text_limit("pause reason", reason, kMaxPauseReasonBytes);
  check_text_limit("pause 'by'", by, kMaxPausedByBytes);
  const core::PauseRecord rec{std::string(reason), std::string(by), since_ms};
  const std::string bytes = core::encode(rec);  // ConfigError if not UTF-8
  const std::string key(core::kPauseKey);
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    std::optional<Entry> cur = store_.get(key);
    if (cur) {
      try {
        const core::PauseRecord old = core::decode_pause(key, cur->value);
        return PauseResult{PauseOutcome::already_paused, {old.reason, old.by, old.since_ms}};
      } catch (const core::RecordError&) {  // garbage under the key: ours replaces it
      }
    }
    try {
      const WriteResult r =
          cur ? store_.update(key, bytes, cur->revision) : store_.create(key, bytes);
      if (r.ok) return PauseResult{PauseOutcome::paused, {rec.reason, rec.by, rec.since_ms}};
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unknown_outcome) throw;
      auto again = store_.get(key);
      if (again && again->value == bytes) {
        return PauseResult{PauseOutcome::paused, {rec.reason, rec.by, rec.since_ms}};
      }
    }
  }
  throw Error("pause: the pause record kept changing; try again");
}

ResumeResult JobAdmin::resume() {
  ResumeResult res;
  res.outcome = ResumeOutcome::not_paused;
  if (auto cur = store_.get(core::kPauseKey)) {
    if (!erase_key(store_, std::string(core::kPauseKey), cur->revision)) {
      throw Error("resume: the pause record kept changing; try again");
    }
    res.outcome = ResumeOutcome::resumed;
  }
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    std::optional<Entry> cur = store_.get(core::kPlanKey);
    if (!cur) return res;
    core::PlanRecord plan;
    try {
      plan = core::decode_plan(core::kPlanKey, cur->value);
    } catch (const core::RecordError&) {
      return res;  // the leader rewrites what it owns; nothing to clear here
    }
    if (plan.verdict != core::Verdict::failed) return res;
    const std::string message = plan.message.value_or("");
    plan.verdict = core::Verdict::running;
    plan.message.reset();
    if (store_.update(core::kPlanKey, core::encode(plan), cur->revision).ok) {
      res.plan_failure_cleared = true;
      res.plan_failure = message;
      return res;
    }
  }
  throw Error("resume: the plan record kept changing; try again");
}

SessionCheck JobAdmin::check_sessions(milliseconds max_wait) {
  return watch_sessions(store_, std::nullopt, max_wait);
}

ResetResult JobAdmin::reset(milliseconds max_wait) {
  ResetResult res;
  res.sessions = check_sessions(max_wait);
  if (res.sessions.any_live()) {
    res.outcome = ResetOutcome::refused_live;
    return res;
  }
  // 1. The plan record first: unplanned, at the term floor, so nothing can start from a
  // half-deleted state that still claims to be planned.
  admin::SnapshotParts parts;
  parts.job = parts.assigns = true;
  const admin::JobSnapshot snap = admin::read_snapshot(store_, parts);
  std::uint64_t floor = snap.plan ? snap.plan->term : 0;
  if (snap.leader) floor = std::max(floor, snap.leader->term);
  for (const auto& [id, a] : snap.assigns) floor = std::max(floor, a.term);
  res.term_floor = floor;
  bool plan_written = false;
  for (int attempt = 0; attempt < kCasAttempts && !plan_written; ++attempt) {
    std::optional<Entry> cur = store_.get(core::kPlanKey);
    if (!cur) break;  // never planned: there is no term to keep but the leader's (kept below)
    core::PlanRecord next;
    try {
      next.fingerprint = core::decode_plan(core::kPlanKey, cur->value).fingerprint;
    } catch (const core::RecordError& e) {
      throw Error(
          fmt::format("reset: the plan record is unreadable ({}); nothing was changed", e.what()));
    }
    next.term = floor;
    next.finality = snap.plan ? snap.plan->finality : core::Finality::final;
    plan_written = store_.update(core::kPlanKey, core::encode(next), cur->revision).ok;
  }
  // 2. Everything else that holds progress, ownership or membership. Without a plan record the
  // leader record is the only carrier of the term: it is kept (peers expire it).
  std::vector<std::string_view> prefixes{core::kSplitPrefix, core::kSpecPrefix, core::kLeasePrefix,
                                         core::kAssignPrefix, core::kMemberPrefix};
  std::vector<Entry> doomed;
  for (std::string_view prefix : prefixes) {
    for (Entry& e : store_.list(prefix)) doomed.push_back(std::move(e));
  }
  if (plan_written) {
    if (auto leader = store_.get(core::kLeaderKey)) doomed.push_back(std::move(*leader));
  }
  if (auto standby = store_.get(core::kStandbyKey)) doomed.push_back(std::move(*standby));
  for (const Entry& e : doomed) {
    if (!erase_key(store_, e.key, e.revision)) {
      throw Error(fmt::format(
          "reset interrupted: '{}' kept changing (has a member started?); {} records were "
          "deleted; stop every member and run reset again",
          e.key, res.deleted_keys));
    }
    ++res.deleted_keys;
    if (e.key.rfind(core::kSplitPrefix, 0) == 0) ++res.splits_forgotten;
  }
  return res;
}

SeekResult JobAdmin::seek(std::string_view split_id, const SplitProgress& progress,
                          milliseconds max_wait) {
  core::validate_id(split_id, "split id");
  check_text_limit("progress state", progress.state, kMaxProgressStateBytes);
  SeekResult res;
  res.split = std::string(split_id);
  res.watermark_after = progress.watermark;
  const std::string key = core::split_key(split_id);
  const std::string lkey = core::lease_key(split_id);
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    std::optional<Entry> cur = store_.get(key);
    if (!cur) {
      res.outcome = SeekOutcome::not_found;
      res.detail = "no split record with this id";
      return res;
    }
    core::SplitRecord rec;
    try {
      rec = core::decode_split(key, cur->value);
    } catch (const core::RecordError& e) {
      res.outcome = SeekOutcome::unreadable;
      res.detail = e.what();
      return res;
    }
    res.status_before = admin::to_public(rec.status);
    res.watermark_before = rec.progress.watermark;
    // Nobody may hold it: a lease names a live session only while its owner renews.
    if (std::optional<Entry> lease = store_.get(lkey)) {
      std::string owner = "?";
      try {
        owner = core::decode_lease(lkey, lease->value).owner;
      } catch (const core::RecordError&) {  // an unreadable lease blocks claims: refuse too
      }
      const SessionCheck held = owner == "?" ? SessionCheck{{owner}, {}, {}, {}}
                                             : watch_sessions(store_, owner, max_wait);
      if (held.any_live()) {
        res.outcome = SeekOutcome::held;
        res.holder = owner;
        res.detail = fmt::format(
            "held by {} (its session is live): pause the job or cordon {} and wait until "
            "it releases the split",
            owner, owner);
        return res;
      }
      res.detail = fmt::format("the lease names {}, whose session is gone", owner);
    }
    core::SplitRecord next = rec;
    next.progress = progress;
    next.epoch = rec.epoch + 1;  // an operator tenancy: fences every earlier lane
    next.owner.reset();
    next.owner_nonce.reset();
    if (next.status == core::SplitStatus::completed) next.status = core::SplitStatus::runnable;
    const std::string bytes = core::encode(next);
    bool done = false;
    try {
      done = store_.update(key, bytes, cur->revision).ok;
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unknown_outcome) throw;
      auto again = store_.get(key);
      done = again && again->value == bytes;
    }
    if (!done) continue;
    res.outcome = SeekOutcome::moved;
    res.status_after = admin::to_public(next.status);
    res.epoch_after = next.epoch;
    if (rec.status == core::SplitStatus::completed) reopen_plan();
    return res;
  }
  res.outcome = SeekOutcome::conflict;
  res.detail = "the split record kept changing; nothing was written";
  return res;
}

// A completed split became runnable again: a plan that says complete would end every member that
// joins before a leader recounts, so set it running (the leader recomputes the tallies).
void JobAdmin::reopen_plan() {
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    std::optional<Entry> cur = store_.get(core::kPlanKey);
    if (!cur) return;
    core::PlanRecord plan;
    try {
      plan = core::decode_plan(core::kPlanKey, cur->value);
    } catch (const core::RecordError&) {
      return;
    }
    if (plan.verdict != core::Verdict::complete && plan.verdict != core::Verdict::stalled) return;
    plan.verdict = core::Verdict::running;
    if (plan.completed > 0) --plan.completed;
    if (store_.update(core::kPlanKey, core::encode(plan), cur->revision).ok) return;
  }
}

namespace {

// The live member whose lease names the split, or nullopt (no lease, or its owner is gone).
std::optional<std::string> live_holder(KvStore& store, std::string_view split_id,
                                       milliseconds max_wait) {
  const std::string lkey = core::lease_key(split_id);
  std::optional<Entry> lease = store.get(lkey);
  if (!lease) return std::nullopt;
  std::string owner;
  try {
    owner = core::decode_lease(lkey, lease->value).owner;
  } catch (const core::RecordError&) {
    return std::nullopt;  // an unreadable lease names no session (the next claimer removes it)
  }
  if (!watch_sessions(store, owner, max_wait).any_live()) return std::nullopt;
  return owner;
}

// The highest term the job's leader and plan records show (0 if neither reads).
std::uint64_t job_term(KvStore& store) {
  admin::SnapshotParts parts;
  parts.job = true;
  const admin::JobSnapshot snap = admin::read_snapshot(store, parts);
  return std::max(snap.plan ? snap.plan->term : 0, snap.leader ? snap.leader->term : 0);
}

}  // namespace

RepairResult JobAdmin::repair(std::string_view split_id, milliseconds max_wait) {
  core::validate_id(split_id, "split id");
  RepairResult res;
  res.split = std::string(split_id);
  const std::string key = core::split_key(split_id);
  const std::string skey = core::spec_key(split_id);
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    std::optional<Entry> cur = store_.get(key);
    if (cur) {
      try {
        core::decode_split(key, cur->value);
        res.outcome = RepairOutcome::readable;
        res.detail = "the record decodes: nothing to repair";
        return res;
      } catch (const core::RecordError& e) {
        res.detail = e.what();
      }
    } else {
      res.detail = "the record is missing";
    }
    if (auto holder = live_holder(store_, split_id, max_wait)) {
      res.outcome = RepairOutcome::held;
      res.holder = *holder;
      res.detail =
          fmt::format("held by {} (its session is live): its leader repairs the record", *holder);
      return res;
    }
    std::optional<Entry> spec = store_.get(skey);
    if (!spec) {
      res.outcome = RepairOutcome::no_spec;
      res.detail = fmt::format(
          "{} is missing too: only the planner knows the split (a member "
          "re-plans when it leads)",
          skey);
      return res;
    }
    SplitSpec split_spec;
    try {
      split_spec = core::decode_spec(skey, spec->value).spec;
    } catch (const core::RecordError& e) {
      res.outcome = RepairOutcome::no_spec;
      res.detail = fmt::format("{} is unreadable too ({})", skey, e.what());
      return res;
    }
    std::uint64_t lease_epoch = 0;
    if (auto lease = store_.get(core::lease_key(split_id))) {
      try {
        lease_epoch = core::decode_lease(core::lease_key(split_id), lease->value).epoch;
      } catch (const core::RecordError&) {
      }
    }
    const core::SplitRecord rebuilt =
        core::rebuild_from_spec(split_spec, core::rebuilt_epoch(0, lease_epoch, job_term(store_)));
    const std::string bytes = core::encode(rebuilt);
    bool done = false;
    try {
      done = cur ? store_.update(key, bytes, cur->revision).ok : store_.create(key, bytes).ok;
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unknown_outcome) throw;
      auto again = store_.get(key);
      done = again && again->value == bytes;
    }
    if (!done) continue;
    res.outcome = RepairOutcome::rebuilt;
    res.epoch_after = rebuilt.epoch;
    return res;
  }
  res.outcome = RepairOutcome::conflict;
  res.detail = "the split record kept changing; nothing was written";
  return res;
}

}  // namespace etlc
