// build_status: the operator's picture of a job from one snapshot of its records, by the rules the
// leader assigns with (core/assignment_rules.hpp): a member's lane budget is zero when it is
// cordoned, has no session, carries another fingerprint or advertises an impossible budget; an
// assignment record below the plan's term counts as none.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "admin/job_snapshot.hpp"
#include "core/assignment_rules.hpp"
#include "core/remaining_work.hpp"

namespace etlc::admin {

namespace {

std::uint64_t add_sat(std::uint64_t a, std::uint64_t b) {
  return b > std::numeric_limits<std::uint64_t>::max() - a
             ? std::numeric_limits<std::uint64_t>::max()
             : a + b;
}

SplitCounts count_splits(const JobSnapshot& snap) {
  SplitCounts c;
  for (const auto& [id, rec] : snap.splits) {
    ++c.total;
    c.total_weight = add_sat(c.total_weight, rec.weight);
    if (rec.cut_from) ++c.residuals;
    switch (rec.status) {
      case core::SplitStatus::runnable:
        ++c.runnable;
        if (rec.owner) ++c.owned;
        break;
      case core::SplitStatus::completed:
        ++c.completed;
        break;
      case core::SplitStatus::quarantined:
        ++c.quarantined;
        break;
      case core::SplitStatus::pending:
        ++c.pending;
        break;
    }
  }
  return c;
}

// The job's weight counted over the split records, as the leader tallies it
// (core::WeightTally); no rate: one look cannot measure one.
WeightProgress counted_progress(const JobSnapshot& snap) {
  core::WeightTally tally;
  for (const auto& [id, rec] : snap.splits) tally.add(rec);
  const core::JobWeights w = tally.weights();
  WeightProgress p;
  p.source = ProgressSource::split_records;
  p.record =
      snap.progress_unreadable ? ProgressRecordState::unreadable : ProgressRecordState::absent;
  p.planned = w.planned;
  p.done = w.done;
  p.remaining = w.remaining;
  return p;
}

// Remaining weight per owner named by a runnable split record; "" collects the unowned.
std::map<std::string, std::uint64_t> remaining_by_owner(const JobSnapshot& snap) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [id, rec] : snap.splits) {
    if (rec.status != core::SplitStatus::runnable) continue;
    std::uint64_t& sum = out[rec.owner.value_or("")];
    sum = add_sat(sum, core::remaining_weight(rec));
  }
  return out;
}

// The assignment a member follows, or null: none, written by a deposed leader, or left behind by
// a member that has no session (it departed: nothing follows that record, and the leader
// reassigns its splits once rebalance_delay has passed).
const core::AssignmentRecord* current_assignment(const JobSnapshot& snap, const std::string& id) {
  if (!snap.members.count(id)) return nullptr;
  auto it = snap.assigns.find(id);
  if (it == snap.assigns.end()) return nullptr;
  const std::uint64_t plan_term = snap.plan ? snap.plan->term : 0;
  return core::assignment_in_force(it->second.term, plan_term) ? &it->second : nullptr;
}

bool assigned_to(const core::AssignmentRecord& a, const std::string& split) {
  return std::binary_search(a.splits.begin(), a.splits.end(), split);
}

std::optional<LeaderStatus> leader_status(const JobSnapshot& snap) {
  if (!snap.leader) return std::nullopt;
  LeaderStatus l;
  l.instance = snap.leader->owner;
  l.nonce = snap.leader->nonce;
  l.term = snap.leader->term;
  auto it = snap.members.find(l.instance);
  l.has_session = it != snap.members.end() && it->second.rec.nonce == l.nonce;
  return l;
}

std::optional<StandbyStatus> standby_status(const JobSnapshot& snap) {
  if (!snap.standby) return std::nullopt;
  StandbyStatus s{snap.standby->owner, snap.standby->nonce, false};
  auto it = snap.members.find(s.instance);
  s.has_session = it != snap.members.end() && it->second.rec.nonce == s.nonce;
  return s;
}

std::optional<PlanStatus> plan_status(const JobSnapshot& snap) {
  if (!snap.plan) return std::nullopt;
  const core::PlanRecord& p = *snap.plan;
  return PlanStatus{p.fingerprint,         p.term,      to_public(p.finality), p.planned,
                    p.split_count,         p.completed, p.quarantined,         to_public(p.verdict),
                    p.message.value_or("")};
}

// Every instance the records mention: sessions, lease owners, assignees, cordons, split owners.
std::set<std::string> instances_of(const JobSnapshot& snap) {
  std::set<std::string> ids;
  for (const auto& [split, rec] : snap.splits) {
    if (rec.owner && rec.status == core::SplitStatus::runnable) ids.insert(*rec.owner);
  }
  for (const auto& [id, v] : snap.members) ids.insert(id);
  for (const auto& [split, lease] : snap.leases) ids.insert(lease.owner);
  for (const auto& [id, a] : snap.assigns) ids.insert(id);
  for (const auto& [id, c] : snap.cordons) ids.insert(id);
  return ids;
}

// What a member's session record says of it.
void add_session(const core::MemberRecord& r, const JobSnapshot& snap, MemberStatus& m) {
  m.has_session = true;
  m.nonce = r.nonce;
  m.fingerprint_matches = !snap.plan || r.fingerprint == snap.plan->fingerprint;
  m.max_in_flight = r.max_in_flight;
  m.renewals = r.counter;
  m.lease = std::chrono::milliseconds(
      static_cast<std::int64_t>(std::min<std::uint64_t>(r.lease_ms, 1ULL << 40)));
  // One renewal per third of a lease; saturate rather than overflow on a hostile counter.
  const std::uint64_t third = static_cast<std::uint64_t>(m.lease.count()) / 3;
  const std::uint64_t age =
      third == 0 || r.counter <= (1ULL << 62) / third ? r.counter * third : (1ULL << 62);
  m.session_age_estimate = std::chrono::milliseconds(static_cast<std::int64_t>(age));
}

// One member from its session, cordon and assignment records (holdings come from the leases).
MemberStatus member_status(const JobSnapshot& snap, const std::string& id) {
  MemberStatus m;
  m.instance = id;
  const auto session = snap.members.find(id);
  if (session != snap.members.end()) add_session(session->second.rec, snap, m);
  if (auto it = snap.cordons.find(id); it != snap.cordons.end()) {
    m.cordoned = true;
    m.cordon_reason = it->second.reason;
  }
  // A departed member's record is not counted: nobody works on it (ASSIGNED shows "-").
  if (auto it = snap.assigns.find(id); it != snap.assigns.end() && m.has_session) {
    m.assigned = it->second.splits.size();
    m.assignment_term = it->second.term;
  }
  if (session != snap.members.end()) {
    // The leader's own rule: a plan's fingerprint, or this member's when there is no plan yet.
    m.lane_budget = core::lane_budget(
        session->second.rec, snap.plan ? snap.plan->fingerprint : session->second.rec.fingerprint,
        m.cordoned);
  }
  return m;
}

// Holdings and drains, from the leases.
void add_holdings(const JobSnapshot& snap, std::map<std::string, MemberStatus>& by_id) {
  for (const auto& [split, lease] : snap.leases) {
    MemberStatus& m = by_id[lease.owner];
    ++m.held;
    if (auto it = snap.splits.find(split); it != snap.splits.end()) {
      m.weight_held = add_sat(m.weight_held, it->second.weight);
    }
    if (const core::AssignmentRecord* a = current_assignment(snap, lease.owner)) {
      if (!assigned_to(*a, split)) ++m.draining;
    }
  }
}

// Splits assigned to one member while another holds their lease, sorted by split id.
std::vector<SplitMove> split_moves(const JobSnapshot& snap) {
  std::vector<SplitMove> moves;
  for (const auto& [to, a] : snap.assigns) {
    if (current_assignment(snap, to) == nullptr) continue;
    for (const std::string& split : a.splits) {
      auto it = snap.leases.find(split);
      if (it != snap.leases.end() && it->second.owner != to) {
        moves.push_back(SplitMove{split, it->second.owner, to});
      }
    }
  }
  std::sort(moves.begin(), moves.end(),
            [](const SplitMove& x, const SplitMove& y) { return x.split < y.split; });
  return moves;
}

// Each member's share of the held weight, and the balance over members that can work.
BalanceStatus share_and_balance(std::map<std::string, MemberStatus>& by_id) {
  BalanceStatus balance;
  std::uint64_t held_total = 0;
  for (const auto& [id, m] : by_id) held_total = add_sat(held_total, m.weight_held);
  long double load_sum = 0;
  for (auto& [id, m] : by_id) {
    if (held_total > 0) {
      m.weight_share = static_cast<double>(static_cast<long double>(m.weight_held) / held_total);
    }
    if (!m.has_session || m.lane_budget == 0) continue;
    ++balance.members;
    balance.max_load = std::max(balance.max_load, m.weight_held);
    load_sum += m.weight_held;
  }
  if (balance.members > 0) {
    balance.mean_load = static_cast<double>(load_sum / balance.members);
    if (balance.mean_load > 0) {
      balance.max_over_mean = static_cast<double>(balance.max_load) / balance.mean_load;
    }
  }
  return balance;
}

}  // namespace

WeightProgress leader_progress(const core::ProgressRecord& r) {
  WeightProgress p;
  p.source = ProgressSource::leader_record;
  p.record = ProgressRecordState::ok;
  p.term = r.term;
  p.planned = r.planned;
  p.done = r.done;
  p.remaining = r.remaining;
  p.rate_per_s = r.rate_per_s;
  return p;
}

JobStatus build_status(const JobSnapshot& snap) {
  JobStatus st;
  st.found = snap.plan || snap.leader || !snap.members.empty();
  if (snap.pause) st.paused = PauseStatus{snap.pause->reason, snap.pause->by, snap.pause->since_ms};
  st.leader = leader_status(snap);
  st.standby = standby_status(snap);
  st.plan = plan_status(snap);
  st.splits = count_splits(snap);
  // A record below the current leader's term is an earlier leader's last word: count instead.
  const bool stale = snap.progress && snap.leader && snap.leader->term > snap.progress->term;
  if (snap.progress && !stale) {
    st.progress = leader_progress(*snap.progress);
  } else {
    st.progress = counted_progress(snap);
    if (stale) {
      st.progress.record = ProgressRecordState::stale;
      st.progress.term = snap.progress->term;
    }
  }

  std::map<std::string, MemberStatus> by_id;
  for (const std::string& id : instances_of(snap)) by_id.emplace(id, member_status(snap, id));
  add_holdings(snap, by_id);
  for (const auto& [owner, remaining] : remaining_by_owner(snap)) {
    if (owner.empty()) {
      st.unowned_remaining = remaining;
    } else {
      by_id[owner].weight_remaining = remaining;
    }
  }
  std::vector<SplitMove> moves = split_moves(snap);
  st.moves_total = moves.size();
  if (moves.size() > kMaxMovesReported) moves.resize(kMaxMovesReported);
  st.moves = std::move(moves);
  st.balance = share_and_balance(by_id);

  st.members.reserve(by_id.size());
  for (auto& [id, m] : by_id) st.members.push_back(std::move(m));
  st.garbage = snap.garbage.report();
  st.garbage_total = snap.garbage.total();
  return st;
}

}  // namespace etlc::admin
