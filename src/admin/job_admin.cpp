// JobAdmin's reads: existence, status (with the observation memory), split listings.
#include <algorithm>

#include "admin/job_snapshot.hpp"
#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/admin.hpp"

namespace etlc {

namespace {
std::chrono::milliseconds since(Clock::time_point now, Clock::time_point then) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - then);
}
}  // namespace

JobAdmin::JobAdmin(KvStore& store, const Clock& clock) : store_(store), clock_(clock) {}

bool JobAdmin::job_exists() {
  if (store_.get(core::kPlanKey) || store_.get(core::kLeaderKey)) return true;
  return !store_.list(core::kMemberPrefix).empty();
}

JobStatus JobAdmin::status() {
  admin::SnapshotParts parts;
  parts.job = parts.members = parts.leases = parts.assigns = parts.cordons = parts.splits = true;
  parts.specs = parts.everything = true;  // report every unreadable or out-of-layout key
  const admin::JobSnapshot snap = admin::read_snapshot(store_, parts);
  JobStatus st = admin::build_status(snap);

  MutexLock lk(mu_);
  const Clock::time_point now = clock_.now();
  if (st.leader) {
    LeaderStatus& l = *st.leader;
    if (seen_leader_ && seen_leader_->instance == l.instance && seen_leader_->nonce == l.nonce &&
        seen_leader_->term == l.term) {
      l.observed_for = since(now, seen_leader_->first_seen);
    } else {
      seen_leader_ = SeenLeader{l.instance, l.nonce, l.term, now};
    }
  } else {
    seen_leader_.reset();
  }

  std::map<std::string, SeenSession, std::less<>> next;
  for (MemberStatus& m : st.members) {
    if (!m.has_session) continue;
    const Revision rev = snap.members.at(m.instance).rev;
    auto it = seen_sessions_.find(m.instance);
    if (it == seen_sessions_.end() || it->second.nonce != m.nonce) {
      next.emplace(m.instance, SeenSession{m.nonce, now, rev, now});
      continue;
    }
    SeenSession s = it->second;
    if (s.revision != rev) {
      s.revision = rev;
      s.changed_at = now;
    }
    m.observed_for = since(now, s.first_seen);
    m.unchanged_for = since(now, s.changed_at);
    next.emplace(m.instance, s);
  }
  seen_sessions_ = std::move(next);  // forget sessions that are gone: the memory stays bounded
  return st;
}

std::optional<WeightProgress> JobAdmin::job_progress() {
  auto e = store_.get(core::kProgressKey);
  if (!e) return std::nullopt;
  try {
    return admin::leader_progress(core::decode_progress(e->key, e->value));
  } catch (const core::RecordError&) {
    return std::nullopt;  // status() lists it as unreadable
  }
}

SplitListing JobAdmin::splits(const SplitFilter& filter) {
  admin::SnapshotParts parts;
  parts.leases = parts.splits = true;
  const admin::JobSnapshot snap = admin::read_snapshot(store_, parts);
  SplitListing out;
  for (const auto& [id, rec] : snap.splits) {
    const SplitState state = admin::to_public(rec.status);
    if (filter.status && *filter.status != state) continue;
    if (filter.owner && rec.owner != *filter.owner) continue;
    ++out.matched;
    if (filter.limit != 0 && out.rows.size() >= filter.limit) continue;
    SplitRow row;
    row.id = id;
    row.status = state;
    row.owner = rec.owner;
    if (auto it = snap.leases.find(id); it != snap.leases.end()) row.lease_owner = it->second.owner;
    row.epoch = rec.epoch;
    row.attempts = rec.attempts;
    row.weight = rec.weight;
    row.watermark = rec.progress.watermark;
    row.last_error = rec.last_error;
    if (rec.cut_from) row.parent = rec.cut_from->split;
    row.children = static_cast<std::uint32_t>(rec.children.size());
    out.rows.push_back(std::move(row));
  }
  out.garbage = snap.garbage.report();
  out.garbage_total = snap.garbage.total();
  return out;
}

}  // namespace etlc
