// The leader's assignment duty: build desired_assignment's input from the views, compute, and
// publish assign.{instance} only where the record differs from what this term wants.
//
// Inputs: live members by the lane budget rule (core::lane_budget: a cordoned member, one of
// another job configuration or one advertising an impossible budget gets zero lanes), runnable
// splits with their previous assignee / lease owner / record owner, and the rebalance delay's
// reservations: a split whose lease or record names a departed member inside its window is
// withheld from everyone. Recomputation is coalesced: at most once per assignment_interval while
// events keep arriving. A paused job (job.pause) assigns nothing, so every worker drains and
// releases what it holds; resuming recomputes from the committed progress.
//
// When to recompute. Anything that can move work (a member, a freed lease, an owner or status
// change, a cordon, a window ending, a record we did not publish) makes the assignment dirty. New
// splits that nobody holds (seeding's, LeaderViews::unheld_added) are different: they are placed
// only into free lanes (sticky keeps every held split, fill needs a free lane, improve moves only
// to a member with one), so when the last computation left splits queued — every lane full — and
// nothing else changed, recomputing would publish the same records. Seeding a plan of n splits
// therefore costs one computation per slice only while lanes are free (as before: lanes fill as
// fast), then none per slice; the split set doubling since the last computation still forces one
// (bounded staleness of the queue statistics: O(log n) computations of geometrically growing
// size, O(n) in all), and the end of seeding forces one over the whole plan. These decisions
// depend on counts only, never on the clock. Two that follow do use the leader's clock: commits
// that move only a split's remaining work (the weight balanced on, progress.done) recompute at
// most once per progress_interval (a busy job costs the leader one computation per interval, not
// one per commit, publishing only the records that changed), and a split moved for balance is
// pinned for rebalance_cooldown, with a recomputation when that ends. The pace rule's paces come
// from the same commits, timed by the leader's clock as its watch delivers them (leader_views.cpp)
// and read at the computation (a stall lowers a pace): no write and no key of their own.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "core/assignment.hpp"
#include "core/assignment_rules.hpp"
#include "core/balance_cooldown.hpp"
#include "core/keys.hpp"
#include "core/lane_pace.hpp"
#include "core/protocol_assert.hpp"
#include "core/remaining_work.hpp"
#include "core/repair_rules.hpp"
#include "core/stable_hash.hpp"
#include "log.hpp"
#include "runtime/leadership.hpp"

namespace etlc::runtime {

namespace {

using MemberIndex = std::unordered_map<std::string, std::int32_t>;

// Progress-only recomputations wait at least this many times the last computation's duration.
constexpr int kProgressCostFactor = 10;

// The pace rule applies to splits balanced on what remains (docs/work-assignment.md, "Pace").
bool pace_rule_on(const CoordinatorConfig& config) {
  return config.balance_on_remaining_work && config.balance_by_pace;
}

// The runnable splits as desired_assignment sees them (with their measured paces under the pace
// rule).
void add_splits(const LeaderViews& lv, const FleetViews& views, const MemberIndex& index,
                const core::RebalanceDelay& delay, const CoordinatorConfig& config,
                core::BalanceCooldown& cooldown, TimePoint now, core::AssignmentInput& in) {
  // previous assignee per split, from the published records (any term)
  std::unordered_map<std::string, std::int32_t> previous;
  for (const auto& [member, v] : views.assigns()) {
    auto it = index.find(member);
    if (it == index.end()) continue;
    for (const std::string& s : v.rec.splits) previous.emplace(s, it->second);
  }
  auto member_index = [&](const std::optional<std::string>& owner) {
    if (!owner) return core::kNoMember;
    auto it = index.find(*owner);
    return it == index.end() ? core::kNoMember : it->second;
  };
  in.splits.reserve(lv.splits().size());
  const bool by_pace = pace_rule_on(config);
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
  for (const auto& [id, v] : lv.splits()) {
    if (v.rec.status != core::SplitStatus::runnable) continue;
    core::AssignSplit s;
    s.id = id;
    // Balanced on what remains (docs/work-assignment.md): a nearly done split stays put.
    s.weight = config.balance_on_remaining_work ? core::remaining_weight(v.rec) : v.rec.weight;
    if (auto it = previous.find(id); it != previous.end()) s.previous = it->second;
    std::optional<std::string> lease_owner;
    if (auto it = views.leases().find(id); it != views.leases().end()) {
      lease_owner = it->second.rec.owner;
    }
    cooldown.observe(id, lease_owner ? *lease_owner : v.rec.owner.value_or(""), now);
    s.pinned = (config.balance_on_remaining_work &&
                core::nearly_done(v.rec, config.pin_remaining_ppm, v.last_done_step)) ||
               cooldown.pinned(id, now);
    s.lease_owner = member_index(lease_owner);
    s.record_owner = member_index(v.rec.owner);
    const bool lease_withheld = lease_owner && delay.withheld(*lease_owner, now);
    const bool record_withheld = v.rec.owner && delay.withheld(*v.rec.owner, now);
    // Withheld only while no live member holds it (a departed owner's split stays put for the
    // window; one already taken over by a live member is simply that member's).
    s.reserved = (lease_withheld || record_withheld) && s.lease_owner == core::kNoMember &&
                 s.record_owner == core::kNoMember;
    s.holder_departed = (lease_owner && s.lease_owner == core::kNoMember) ||
                        (v.rec.owner && s.record_owner == core::kNoMember);
    if (by_pace && v.rec.progress.done) s.pace = v.pace.per_kilosecond(now_ms);
    in.splits.push_back(std::move(s));
  }
}

// The pace rule (core/lane_pace.hpp): a split under way moves for balance only to a member whose
// lanes read it faster. Each member's history records the median of its splits' measured paces
// at the load (splits held) it had; its lane pace for the rule is what it read at one split more
// than it holds now, the load a move would give it (`history`, pruned to the live members).
// add_splits set each split's measured pace.
void apply_paces(core::AssignmentInput& in, const MemberIndex& index, std::uint32_t gain_ppm,
                 std::unordered_map<std::string, core::LanePaceHistory>& history) {
  std::vector<std::vector<std::uint64_t>> seen(in.members.size());
  std::vector<std::uint32_t> held(in.members.size(), 0);
  for (const core::AssignSplit& s : in.splits) {
    if (s.record_owner == core::kNoMember) continue;
    ++held[static_cast<std::size_t>(s.record_owner)];
    if (s.pace) seen[static_cast<std::size_t>(s.record_owner)].push_back(*s.pace);
  }
  std::erase_if(history, [&](const auto& e) { return index.count(e.first) == 0; });
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    core::AssignMember& member = in.members[m];
    if (auto median = core::median_pace(std::move(seen[m]))) {
      history[member.id].observe(held[m], *median);
    }
    if (auto it = history.find(member.id); it != history.end()) {
      member.lane_pace = it->second.at(held[m] + 1);
    }
  }
  // A split its owner has just started is not measured yet: it reads at about what its owner's
  // lanes read at the owner's load, so a move of it must find a faster lane too (or an unknown).
  for (core::AssignSplit& s : in.splits) {
    if (s.pace || s.record_owner == core::kNoMember) continue;
    const auto m = static_cast<std::size_t>(s.record_owner);
    if (auto it = history.find(in.members[m].id); it != history.end()) {
      s.pace = it->second.at(held[m]);
    }
  }
  in.pace_gain_ppm = gain_ppm;
}

}  // namespace

void Leadership::note_departure(const std::string& instance, TimePoint now) {
  delay_.departed(instance, now);
  assignment_dirty_ = true;
}

void Leadership::note_arrival(const std::string& instance) {
  delay_.returned(instance);
  assignment_dirty_ = true;
}

void Leadership::warn_about_bounds(const std::string& id, const core::MemberRecord& rec) {
  const core::PeerBounds bounds = core::bound_peer(rec, ctx_.config.lease_duration);
  if ((!bounds.lanes_refused && !bounds.lease_clamped) || peer_warned_[id] == rec.nonce) return;
  peer_warned_[id] = rec.nonce;
  log().warn("etlc: {}: member '{}' advertises a lane budget of {} and a lease of {} ms; {}{}",
             ctx_.instance, id, rec.max_in_flight, rec.lease_ms,
             bounds.lanes_refused ? fmt::format("outside 1..{}: it gets no lanes", kMaxLanes) : "",
             bounds.lease_clamped
                 ? fmt::format("{}its lease is judged as {} ms", bounds.lanes_refused ? "; " : "",
                               bounds.lease.count())
                 : "");
}

std::optional<TimePoint> Leadership::assignment_due() const {
  const std::uint64_t added = leader_views_.unheld_added();
  if (assignment_dirty_ ||
      (added > 0 && (!lanes_full_ || added >= std::max<std::uint64_t>(computed_over_, 1)))) {
    return last_assignment_at_ + ctx_.config.assignment_interval;
  }
  std::optional<TimePoint> due;
  // Remaining work moved by commits alone: recompute at most once per progress_interval, and
  // never more than a tenth of the leader's time (a computation over 10^5 splits takes about
  // 0.25 s: then once per 2.5 s).
  if (leader_views_.progress_changed() && ctx_.config.balance_on_remaining_work) {
    const Duration interval = std::max({Duration(ctx_.config.progress_interval),
                                        Duration(ctx_.config.assignment_interval),
                                        kProgressCostFactor * last_assignment_took_});
    due = last_assignment_at_ + interval;
  }
  // An outstanding split request times out: the split may be asked of another, or not at all.
  if (auto t = next_ask_timeout(); t && (!due || *t < *due)) due = t;
  // A split's rebalance cooldown ends: it may move for balance again.
  if (auto ends = cooldown_.next_end(); ends && (!due || *ends < *due)) due = ends;
  return due;
}

void Leadership::publish_assignment(TimePoint now) {
  // Windows that ended: their splits are released to the pool now.
  if (!delay_.take_expired(now).empty()) assignment_dirty_ = true;
  const std::optional<TimePoint> due = assignment_due();
  if (!due || now < *due) return;
  leader_views_.clear_unheld_added();  // the views as of now are what this computation reads
  leader_views_.clear_progress_changed();
  const TimePoint started = ctx_.clock.now();
  core::AssignmentInput in;
  in.seed = core::stable_hash64(0, ctx_.fingerprint);
  in.damping_weight = ctx_.config.damping_weight;
  in.damping_ppm_of_mean = ctx_.config.damping_ppm_of_mean;
  MemberIndex index;
  for (const auto& [id, v] : views_.members()) {
    if (v.rec.fingerprint != ctx_.fingerprint) continue;  // another job config: no work at all
    warn_about_bounds(id, v.rec);
    index.emplace(id, static_cast<std::int32_t>(in.members.size()));
    in.members.push_back(core::AssignMember{
        id, core::lane_budget(v.rec, ctx_.fingerprint, leader_views_.cordons().count(id) > 0)});
  }
  cooldown_.expire(now);  // cooldowns that ended: those splits may move for balance again
  if (!views_.paused()) {
    add_splits(leader_views_, views_, index, delay_, ctx_.config, cooldown_, now, in);
    if (pace_rule_on(ctx_.config)) apply_paces(in, index, ctx_.config.pace_gain_ppm, lane_pace_);
  }
  const core::Assignment out = core::desired_assignment(in);
  ask_for_splits(in, out, now);
  if (out.stats.backstop_bound) {
    log().warn("etlc: {}: assignment improve pass hit its backstop ({} moves)", ctx_.instance,
               out.stats.max_improving_moves);
  }
  std::uint64_t written = 0;
  bool failed = false;
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    ETLC_ASSERT(out.by_member[m].size() <= in.members[m].lanes,
                "assignment gives member '{}' {} splits, over its lane budget of {}",
                in.members[m].id, out.by_member[m].size(), in.members[m].lanes);
    std::vector<std::string> splits;
    splits.reserve(out.by_member[m].size());
    for (std::uint32_t si : out.by_member[m]) splits.push_back(in.splits[si].id);
    const bool failed_before = failed;
    std::vector<core::SplitAsk> asks = asks_for(in.members[m].id, splits);
    write_assignment(in.members[m].id, std::move(splits), std::move(asks), failed, written);
    if (failed == failed_before && out.stats.drains() > 0) note_balance_moves(in, out, m, now);
  }
  assignment_dirty_ = failed;
  lanes_full_ = out.stats.queued > 0;
  computed_over_ = in.splits.size();
  last_assignment_at_ = now;
  last_assignment_took_ = ctx_.clock.now() - started;
  const double seconds = std::chrono::duration<double>(last_assignment_took_).count();
  ctx_.metrics.assignment_computed(seconds, out.stats.changed(), written);
  ctx_.metrics.set_live_workers(in.members.size());
  if (written > 0) {
    log().info(
        "etlc: {}: published {} assignment records (term {}): {} assigned, {} queued, {} reserved, "
        "{} changed",
        ctx_.instance, written, term_, out.stats.assigned, out.stats.queued, out.stats.reserved,
        out.stats.changed());
  }
}

// The splits this computation took from a live holder and gave to member m (whose record was
// just written) are not moved for balance again within rebalance_cooldown of m holding them
// (core/balance_cooldown.hpp): add_splits pins them.
void Leadership::note_balance_moves(const core::AssignmentInput& in, const core::Assignment& out,
                                    std::size_t m, TimePoint now) {
  for (std::uint32_t si : out.by_member[m]) {
    const core::AssignSplit& s = in.splits[si];
    const std::int32_t holder = s.previous != core::kNoMember      ? s.previous
                                : s.lease_owner != core::kNoMember ? s.lease_owner
                                                                   : s.record_owner;
    if (holder != core::kNoMember && holder != static_cast<std::int32_t>(m)) {
      cooldown_.moved(s.id, in.members[m].id, now);
    }
  }
}

// Writes assign.{member} unless it already says `splits` at this term. A lost CAS means the view
// is behind: stay dirty and recompute once the watch caught up.
void Leadership::write_assignment(const std::string& member, std::vector<std::string> splits,
                                  std::vector<core::SplitAsk> asks, bool& failed,
                                  std::uint64_t& written) {
  const core::AssignmentRecord rec{member, term_, std::move(splits), std::move(asks)};
  auto it = views_.assigns().find(member);
  if (it != views_.assigns().end() && it->second.readable && it->second.rec == rec) {
    published_[member] = rec.splits;
    return;
  }
  const std::string key = core::assign_key(member);
  const WriteResult r = it == views_.assigns().end()
                            ? ctx_.store.create(key, core::encode(rec))
                            : ctx_.store.update(key, core::encode(rec), it->second.rev);
  if (!r.ok) {
    failed = true;
    return;
  }
  ++written;
  ++deps_.publishes;
  views_.set_assign_view(member, rec, r.revision);
  published_[member] = rec.splits;
}

// Assignment records of members that are gone and whose window has ended are deleted (guarded),
// so a member returning much later starts from "no record": it holds nothing and claims nothing
// until the leader names its splits.
void Leadership::cleanup_departed(TimePoint now) {
  std::vector<std::pair<std::string, Revision>> stale;
  for (const auto& [id, v] : views_.assigns()) {
    if (views_.members().count(id) || delay_.withheld(id, now)) continue;
    stale.emplace_back(id, v.rev);
  }
  for (const auto& [id, rev] : stale) {
    if (ctx_.store.erase(core::assign_key(id), rev).ok) {
      views_.erase_assign_view(id);
      published_.erase(id);
    }
  }
}

}  // namespace etlc::runtime
