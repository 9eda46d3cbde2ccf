// JobAdmin::requeue: quarantined -> runnable by CAS on split.{id}.
//
// The write keeps the epoch and the progress (the next owner resumes from the watermark; its
// claim bumps the epoch as any claim does), resets attempts so the split gets a full new budget,
// clears the owner, and keeps last_error for whoever looks next. A conflict re-reads and tries
// again a bounded number of times; an unknown outcome is resolved by reading the record back.
#include <fmt/format.h>

#include <set>

#include "admin/job_snapshot.hpp"
#include "core/keys.hpp"
#include "etlc/admin.hpp"

namespace etlc {

namespace {

constexpr int kCasAttempts = 4;

RequeueResult requeue_one(KvStore& store, const std::string& id) {
  RequeueResult res;
  res.split = id;
  const std::string key = core::split_key(id);
  bool sent_unknown = false;  // a write of ours may have landed without an answer
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    std::optional<Entry> cur = store.get(key);
    if (!cur) {
      res.outcome = RequeueOutcome::not_found;
      res.detail = "no split record with this id";
      return res;
    }
    core::SplitRecord rec;
    try {
      rec = core::decode_split(key, cur->value);
    } catch (const core::RecordError& e) {
      res.outcome = RequeueOutcome::unreadable;
      res.detail = fmt::format("{} (`etlc repair {}` rebuilds it from its spec)", e.what(), id);
      return res;
    }
    if (rec.status != core::SplitStatus::quarantined) {
      res.status = admin::to_public(rec.status);
      if (sent_unknown) {
        res.outcome = RequeueOutcome::failed;
        res.detail = fmt::format(
            "the store did not confirm the write; the split is now {} (epoch {}, attempts {})",
            core::to_string(rec.status), rec.epoch, rec.attempts);
      } else {
        res.outcome = RequeueOutcome::not_quarantined;
        res.detail = fmt::format("the split is {}, not quarantined", core::to_string(rec.status));
      }
      return res;
    }
    res.status = SplitState::quarantined;
    res.attempts_before = rec.attempts;
    core::SplitRecord next = rec;
    next.status = core::SplitStatus::runnable;
    next.attempts = 0;
    next.owner.reset();
    next.owner_nonce.reset();
    try {
      if (store.update(key, core::encode(next), cur->revision).ok) {
        res.outcome = RequeueOutcome::requeued;
        res.detail.clear();
        return res;
      }
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unknown_outcome) throw;
      sent_unknown = true;
      auto again = store.get(key);
      if (again && again->value == core::encode(next)) {
        res.outcome = RequeueOutcome::requeued;
        return res;
      }
    }
  }
  res.outcome = RequeueOutcome::conflict;
  res.detail = "the split record kept changing; nothing was written";
  return res;
}

}  // namespace

std::vector<RequeueResult> JobAdmin::requeue(std::span<const std::string> split_ids) {
  if (split_ids.size() > kMaxRequeueIds) {
    throw ConfigError(fmt::format("requeue: {} split ids exceed the limit of {}", split_ids.size(),
                                  kMaxRequeueIds));
  }
  std::vector<std::string> ids;
  std::set<std::string_view> seen;
  for (const std::string& id : split_ids) {
    core::validate_id(id, "split id");
    if (seen.insert(id).second) ids.push_back(id);
  }
  std::vector<RequeueResult> out;
  out.reserve(ids.size());
  bool failed = false;
  for (const std::string& id : ids) {
    if (failed) {
      out.push_back(RequeueResult{id, RequeueOutcome::skipped, std::nullopt, 0,
                                  "not attempted: an earlier split failed"});
      continue;
    }
    try {
      out.push_back(requeue_one(store_, id));
    } catch (const StoreError& e) {
      failed = true;
      out.push_back(RequeueResult{id, RequeueOutcome::failed, std::nullopt, 0, e.what()});
    }
  }
  return out;
}

}  // namespace etlc
