// The leader's assignment duty: build desired_assignment's input from the views, compute, and
// publish assign.{instance} only where the record differs from what this term wants (a record
// this term did not publish, e.g. one of our unknown-outcome writes landing late, marks the
// assignment dirty in on_assign_event).
//
// Inputs: live members whose fingerprint matches (a cordoned member gets zero lanes), runnable
// splits with their previous assignee / lease owner / record owner, and the rebalance delay's
// reservations: a split whose lease or record names a departed member inside its window is
// withheld from everyone. Recomputation is coalesced: at most once per assignment_interval while
// events keep arriving.
#include <fmt/format.h>
#include "log.hpp"

#include <algorithm>
#include <chrono>

#include "core/assignment.hpp"
#include "core/keys.hpp"
#include "core/repair_rules.hpp"
#include "core/stable_hash.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

void Member::note_departure(const std::string& instance, TimePoint now) {
  delay_.departed(instance, now);
  assignment_dirty_ = true;
}

void Member::note_arrival(const std::string& instance) {
  delay_.returned(instance);
  assignment_dirty_ = true;
}

void Member::publish_assignment(TimePoint now) {
  // Windows that ended: their splits are released to the pool now.
  for (const std::string& id : delay_.take_expired(now)) {
    (void)id;
    assignment_dirty_ = true;
  }
  if (!assignment_dirty_) return;
  if (now - last_assignment_at_ < config_.assignment_interval) return;

  const TimePoint started = clock_.now();

  core::AssignmentInput in;
  in.seed = core::stable_hash64(0, fingerprint_);
  std::unordered_map<std::string, std::int32_t> index;
  for (const auto& [id, v] : members_) {
    if (v.rec.fingerprint != fingerprint_) continue;  // a member of another job config: no work
    const core::PeerBounds bounds = core::bound_peer(v.rec, config_.lease_duration);
    if ((bounds.lanes_refused || bounds.lease_clamped) && peer_warned_[id] != v.rec.nonce) {
      peer_warned_[id] = v.rec.nonce;
      log().warn(
          "etlc: {}: member '{}' advertises a lane budget of {} and a lease of {} ms; {}{}",
          instance_, id, v.rec.max_in_flight, v.rec.lease_ms,
          bounds.lanes_refused ? fmt::format("outside 1..{}: it gets no lanes", kMaxLanes) : "",
          bounds.lease_clamped ? fmt::format("{}its lease is judged as {} ms",
                                             bounds.lanes_refused ? "; " : "", bounds.lease.count())
                               : "");
    }
    const std::uint32_t lanes = cordons_.count(id) ? 0 : bounds.lanes;
    index.emplace(id, static_cast<std::int32_t>(in.members.size()));
    in.members.push_back(core::AssignMember{id, lanes});
  }
  // previous assignee per split, from the published records (any term)
  std::unordered_map<std::string, std::int32_t> previous;
  for (const auto& [member, v] : assigns_) {
    auto it = index.find(member);
    if (it == index.end()) continue;
    for (const std::string& s : v.rec.splits) previous.emplace(s, it->second);
  }
  auto member_index = [&](const std::optional<std::string>& owner) {
    if (!owner) return core::kNoMember;
    auto it = index.find(*owner);
    return it == index.end() ? core::kNoMember : it->second;
  };
  in.splits.reserve(splits_.size());
  for (const auto& [id, v] : splits_) {
    if (v.rec.status != core::SplitStatus::runnable) continue;
    core::AssignSplit s;
    s.id = id;
    s.weight = v.rec.weight;
    if (auto it = previous.find(id); it != previous.end()) s.previous = it->second;
    std::optional<std::string> lease_owner;
    if (auto it = leases_.find(id); it != leases_.end()) lease_owner = it->second.rec.owner;
    s.lease_owner = member_index(lease_owner);
    s.record_owner = member_index(v.rec.owner);
    const bool lease_withheld = lease_owner && delay_.withheld(*lease_owner, now);
    const bool record_withheld = v.rec.owner && delay_.withheld(*v.rec.owner, now);
    // Withheld only while no live member holds it (a departed owner's split stays put for the
    // window; one already taken over by a live member is simply that member's).
    s.reserved = (lease_withheld || record_withheld) && s.lease_owner == core::kNoMember &&
                 s.record_owner == core::kNoMember;
    s.holder_departed = (lease_owner && s.lease_owner == core::kNoMember) ||
                        (v.rec.owner && s.record_owner == core::kNoMember);
    in.splits.push_back(std::move(s));
  }
  // Paused (job.pause, job_controls.cpp): nothing is assigned, so every worker drains and
  // releases what it holds; resuming recomputes from the committed progress.
  if (paused_) in.splits.clear();

  core::Assignment out = core::desired_assignment(in);
  if (out.stats.backstop_bound) {
    log().warn("etlc: {}: assignment improve pass hit its backstop ({} moves)", instance_,
               out.stats.max_improving_moves);
  }

  std::uint64_t written = 0;
  bool failed = false;
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    const std::string& member = in.members[m].id;
    core::AssignmentRecord rec;
    rec.instance = member;
    rec.term = term_;
    rec.splits.reserve(out.by_member[m].size());
    for (std::uint32_t si : out.by_member[m]) rec.splits.push_back(in.splits[si].id);
    auto it = assigns_.find(member);
    if (it != assigns_.end() && it->second.rec == rec) {
      published_[member] = rec.splits;
      continue;
    }
    const std::string key = core::assign_key(member);
    WriteResult r = it == assigns_.end() ? store_->create(key, core::encode(rec))
                                         : store_->update(key, core::encode(rec), it->second.rev);
    if (!r.ok) {
      failed = true;  // the view is behind: stay dirty and recompute once the watch caught up
      continue;
    }
    ++written;
    ++publishes_;
    assigns_[member] = AssignView{rec, r.revision};
    published_[member] = rec.splits;
  }
  assignment_dirty_ = failed;
  last_assignment_at_ = now;
  const double seconds = std::chrono::duration<double>(clock_.now() - started).count();
  metrics_.assignment_computed(seconds, out.stats.changed(), written);
  metrics_.set_live_workers(in.members.size());
  if (written > 0) {
    log().info(
        "etlc: {}: published {} assignment records (term {}): {} assigned, {} queued, {} reserved, "
        "{} changed",
        instance_, written, term_, out.stats.assigned, out.stats.queued, out.stats.reserved,
        out.stats.changed());
  }
}

// Assignment records of members that are gone and whose window has ended are deleted (guarded),
// so a member returning much later starts from "no record": it holds nothing and claims nothing
// until the leader names its splits.
void Member::cleanup_departed(TimePoint now) {
  std::vector<std::pair<std::string, Revision>> stale;
  for (const auto& [id, v] : assigns_) {
    if (members_.count(id) || delay_.withheld(id, now)) continue;
    stale.emplace_back(id, v.rev);
  }
  for (const auto& [id, rev] : stale) {
    WriteResult r = store_->erase(core::assign_key(id), rev);
    if (r.ok) {
      assigns_.erase(id);
      published_.erase(id);
    }
  }
}

}  // namespace etlc::runtime
