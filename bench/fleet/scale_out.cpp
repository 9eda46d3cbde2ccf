// Scale-out convergence: `members` members hold every split (lanes >= splits / members); `join`
// more start at once. We time until the fleet is balanced (every member holds exactly its
// assignment, all splits held, loads within one split of each other: the local optimum of the
// equal-weight assignment) and count the claims it took, against the minimum: every split a
// newcomer ends up holding had to move once, and nothing else had to.
#include <fmt/format.h>

#include <algorithm>

#include "scenarios.hpp"

namespace etlc::bench {

using namespace std::chrono_literals;

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

  const double cpu0 = process_cpu_seconds();
  const Time t0 = now();
  fleet.start_all(new_members, new_members.size());
  const Time t_joined = now();
  const bool ok = Fleet::wait_for(balanced, timeout);
  const Time t_seen = now();
  const double cpu = process_cpu_seconds() - cpu0;
  std::this_thread::sleep_for(1s);  // anything still moving after "balanced" counts too
  const bool still_balanced = balanced();

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
  res.detail["config"] = {{"members", o.members},
                          {"join", o.join},
                          {"splits", o.splits},
                          {"lanes", o.lanes},
                          {"assignment_interval_ms", fo.base.assignment_interval.count()}};
  res.detail["initial_fill_s"] = setup_s;
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
  };
  if (!ok) res.notes.push_back("not balanced within the timeout");
  return res;
}

}  // namespace etlc::bench
