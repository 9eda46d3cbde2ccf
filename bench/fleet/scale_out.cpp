// Scale-out convergence: `members` members hold every split (lanes >= splits / members); `join`
// more start at once. We time until the fleet is balanced (every member holds exactly its
// assignment, all splits held, loads within one split of each other: the local optimum of the
// equal-weight assignment) and count the claims it took, against the minimum: every split a
// newcomer ends up holding had to move once, and nothing else had to.
//
// The membership change's traffic: every watch event delivered to any member (joiners' snapshots
// included) from the join until balanced, by key family and by role (leader, standby, joiners,
// the other members), so issue 14's target 2 (O(members + splits moved) deliveries with targeted
// watches; O(members x moves) fleet-wide) can be checked: `--members 50 --join 1`.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "scenarios.hpp"

namespace etlc::bench {

using namespace std::chrono_literals;

namespace {

using Snapshot = std::map<const MemberSlot*, StoreCounts>;

Snapshot snapshot(const std::vector<MemberSlot*>& members) {
  Snapshot out;
  for (const auto* m : members) out[m] = m->store->counts();
  return out;
}

// Watch events delivered between two snapshots, by family and by role.
struct Deliveries {
  std::array<std::uint64_t, kFamilies> by_family{};
  std::uint64_t leader = 0, standby = 0, joiners = 0, others = 0;
  std::uint64_t writes = 0;  // every member's writes over the same span
  std::uint64_t total() const { return leader + standby + joiners + others; }
  std::uint64_t excluding_sessions() const {
    return total() - by_family[static_cast<std::size_t>(Family::member)];
  }
  Json json() const {
    Json fam = Json::object();
    for (std::size_t f = 0; f < kFamilies; ++f) {
      if (by_family[f] > 0) fam[std::string(to_string(static_cast<Family>(f)))] = by_family[f];
    }
    return {{"total", total()},   {"excluding_sessions", excluding_sessions()},
            {"by_family", fam},   {"leader", leader},
            {"standby", standby}, {"joiners", joiners},
            {"others", others},   {"writes", writes}};
  }
};

Deliveries deliveries(const Snapshot& from, const Snapshot& to, const MemberSlot* leader,
                      const std::string& standby_id, const std::vector<MemberSlot*>& joiners) {
  Deliveries d;
  for (const auto& [m, end] : to) {
    const StoreCounts diff = end - from.at(m);
    const std::uint64_t n = diff.total_watch_events();
    for (std::size_t f = 0; f < kFamilies; ++f) d.by_family[f] += diff.watch_events[f];
    d.writes += diff.total_writes();
    if (m == leader) {
      d.leader += n;
    } else if (m->id == standby_id) {
      d.standby += n;
    } else if (std::find(joiners.begin(), joiners.end(), m) != joiners.end()) {
      d.joiners += n;
    } else {
      d.others += n;
    }
  }
  return d;
}

// The member job.standby names (empty: none or unreadable).
std::string standby_of(KvStore& store) {
  auto e = store.get(core::kStandbyKey);
  if (!e) return {};
  try {
    return core::decode_standby(core::kStandbyKey, e->value).owner;
  } catch (const core::RecordError&) {
    return {};
  }
}

}  // namespace

Result run_scale_out(const BackendOptions& bo, const ScaleOutOptions& o) {
  auto backend = make_backend(bo);
  FleetOptions fo;
  fo.splits = o.splits;
  fo.base = bench_config();
  fo.base.max_in_flight = o.lanes;
  Fleet fleet(*backend, fo);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));

  std::vector<MemberSlot*> old_members, new_members;
  for (std::size_t i = 0; i < o.members; ++i)
    old_members.push_back(&fleet.add(fmt::format("scale-{:03}", i)));
  fleet.start(*old_members.front());
  Fleet::wait_for([&] { return old_members.front()->coord->is_leader(); }, 10s);
  fleet.start_all(std::vector<MemberSlot*>(old_members.begin() + 1, old_members.end()), 4);
  const std::size_t want = std::min<std::size_t>(o.splits, o.members * o.lanes);
  const Time t_setup = now();
  if (!Fleet::wait_for([&] { return fleet.held_total() == want && fleet.settled(); }, timeout))
    throw std::runtime_error("scale-out: the initial fleet did not settle");
  const double setup_s = ms_between(t_setup, now()) / 1000.0;
  std::this_thread::sleep_for(500ms);

  for (std::size_t i = 0; i < o.join; ++i)
    new_members.push_back(&fleet.add(fmt::format("scale-{:03}", o.members + i)));
  const std::size_t want_after = std::min<std::size_t>(o.splits, (o.members + o.join) * o.lanes);

  auto balanced = [&] {
    if (fleet.held_total() != want_after || !fleet.settled()) return false;
    std::size_t lo = SIZE_MAX, hi = 0;
    for (auto* m : fleet.live()) {
      const std::size_t n = m->coord->held_splits().size();
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    return hi <= lo + 1;
  };

  std::vector<MemberSlot*> everyone = old_members;
  everyone.insert(everyone.end(), new_members.begin(), new_members.end());
  const Snapshot counts0 = snapshot(everyone);
  const double cpu0 = process_cpu_seconds();
  const Time t0 = now();
  fleet.start_all(new_members, new_members.size());
  const Time t_joined = now();
  const bool ok = Fleet::wait_for(balanced, timeout);
  const Time t_seen = now();
  const Snapshot counts1 = snapshot(everyone);
  const double cpu = process_cpu_seconds() - cpu0;
  std::this_thread::sleep_for(1s);  // anything still moving after "balanced" counts too
  const bool still_balanced = balanced();
  const Snapshot counts2 = snapshot(everyone);
  const MemberSlot* leader = fleet.leader();
  const std::string standby_id = leader != nullptr ? standby_of(*leader->store) : std::string();
  const Deliveries change = deliveries(counts0, counts1, leader, standby_id, new_members);
  const Deliveries after = deliveries(counts1, counts2, leader, standby_id, new_members);

  const std::uint64_t moves = fleet.timeline().claims_since(t0);
  std::uint64_t minimum = 0;
  for (auto* m : new_members) minimum += m->coord->held_splits().size();
  std::uint64_t revocations = 0, newcomer_revocations = 0;
  for (auto* m : old_members) revocations += m->revoked.load();
  for (auto* m : new_members) newcomer_revocations += m->revoked.load();
  std::optional<Time> last_claim;
  // The last claim after t0 is when the final move became durable.
  {
    std::vector<std::string> ids;
    for (auto* m : new_members) {
      for (auto& id : m->coord->held_splits()) ids.push_back(id);
    }
    last_claim = fleet.timeline().wait_all_claimed(ids, "", t0, 0ms);
  }

  Result res;
  const double balanced_s = ok ? ms_between(t0, t_seen) / 1000.0 : NAN;
  res.add("balanced_s", balanced_s);
  res.add("last_move_claimed_s", last_claim ? ms_between(t0, *last_claim) / 1000.0 : NAN);
  res.add("moves", static_cast<double>(moves));
  res.add("minimum_moves", static_cast<double>(minimum));
  res.add("watch_deliveries", static_cast<double>(change.total()));
  res.add("watch_deliveries_excluding_sessions", static_cast<double>(change.excluding_sessions()));
  const double members_plus_moves = static_cast<double>(o.members + o.join + moves);
  res.add("deliveries_excluding_sessions_per_member_plus_move",
          static_cast<double>(change.excluding_sessions()) / members_plus_moves);
  res.detail["config"] = {{"members", o.members},
                          {"join", o.join},
                          {"splits", o.splits},
                          {"lanes", o.lanes},
                          {"assignment_interval_ms", fo.base.assignment_interval.count()}};
  res.detail["initial_fill_s"] = setup_s;
  // From the join (before the newcomers start) until balanced was observed, every member.
  res.detail["watch_deliveries"] = change.json();
  res.detail["watch_deliveries_next_1s"] = after.json();
  res.detail["standby"] = standby_id;
  res.detail["watches_broken"] = fleet.watches_broken();
  if (const auto wb = fleet.watches_broken(); wb > 0) {
    res.notes.push_back(fmt::format("{} watch(es) broke and were re-opened during the run", wb));
  }
  res.detail["joined_s"] = ms_between(t0, t_joined) / 1000.0;
  res.detail["revocations"] = revocations;
  res.detail["newcomer_revocations"] = newcomer_revocations;
  res.detail["still_balanced_1s_later"] = still_balanced;
  res.detail["cpu_utilisation"] = ok ? cpu / std::max(1e-9, ms_between(t0, t_seen) / 1000.0) : NAN;
  res.columns = {"figure", "value"};
  res.rows = {
      {"initial fill (s)", fmt_num(setup_s, 2)},
      {fmt::format("{} members joined (s)", o.join), fmt_num(ms_between(t0, t_joined) / 1000.0, 3)},
      {"balanced, observed (s)", fmt_num(balanced_s, 3)},
      {"last move claimed (s)",
       fmt_num(last_claim ? ms_between(t0, *last_claim) / 1000.0 : NAN, 3)},
      {"splits moved (claims)", std::to_string(moves)},
      {"minimum moves for that balance", std::to_string(minimum)},
      {"revocations on old members", std::to_string(revocations)},
      {"revocations on newcomers (moved twice)", std::to_string(newcomer_revocations)},
      {"still balanced 1 s later", still_balanced ? "yes" : "no"},
      {"watch deliveries, join -> balanced, whole fleet", std::to_string(change.total())},
      {"  of them session (member.*) events",
       std::to_string(change.by_family[static_cast<std::size_t>(Family::member)])},
      {"  lease.* / assign.* / split.* / job.* events",
       fmt::format("{} / {} / {} / {}", change.by_family[static_cast<std::size_t>(Family::lease)],
                   change.by_family[static_cast<std::size_t>(Family::assign)],
                   change.by_family[static_cast<std::size_t>(Family::split)],
                   change.by_family[static_cast<std::size_t>(Family::job)])},
      {"  to leader / standby / joiners / others",
       fmt::format("{} / {} / {} / {}", change.leader, change.standby, change.joiners,
                   change.others)},
      {"  excluding sessions, per (members + moves)",
       fmt_num(static_cast<double>(change.excluding_sessions()) / members_plus_moves, 2)},
      {"watch deliveries in the 1 s after", std::to_string(after.total())},
  };
  if (!ok) res.notes.push_back("not balanced within the timeout");
  return res;
}

}  // namespace etlc::bench
