// RapidCheck generators for desired_assignment inputs: fleets of 0-12 members with
// heterogeneous lane budgets (0 included), 0-200 splits with small, byte-scale or near-2^64
// weights (and many ties), random ownership, reserved sets, previous assignments, pinned splits,
// pass 3's damping and the pace rule (members' lane paces, splits under way, the gain).
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/assignment.hpp"

namespace etlc::core {

// How RapidCheck prints a counterexample (found by argument-dependent lookup).
inline void showValue(const AssignmentInput& in, std::ostream& os) {
  os << "seed " << in.seed << ", backstop "
     << (in.max_improving_moves ? std::to_string(*in.max_improving_moves) : "default")
     << ", damping " << in.damping_weight << " + " << in.damping_ppm_of_mean
     << " ppm of mean, pace gain " << in.pace_gain_ppm << " ppm\n";
  auto pace = [](const std::optional<std::uint64_t>& p) {
    return p ? std::to_string(*p) : std::string("?");
  };
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    os << "  member[" << m << "] " << in.members[m].id << " lanes " << in.members[m].lanes
       << " pace " << pace(in.members[m].lane_pace) << "\n";
  }
  for (std::size_t j = 0; j < in.splits.size(); ++j) {
    const AssignSplit& s = in.splits[j];
    os << "  split[" << j << "] " << s.id << " w " << s.weight << " prev " << s.previous
       << " lease " << s.lease_owner << " record " << s.record_owner
       << (s.reserved ? " reserved" : "") << (s.holder_departed ? " departed" : "")
       << (s.pinned ? " pinned" : "") << (s.pace ? " pace " + pace(s.pace) : "") << "\n";
  }
}

}  // namespace etlc::core

namespace etlc::test {

// A uniform draw from [lo, hi) whatever RapidCheck's current size (inRange alone is scaled by the
// size, which would make the early half of every run mostly one-member fleets and 0% rolls).
// Still shrinks towards lo.
template <class T>
rc::Gen<T> uniform(T lo, T hi) {
  return rc::gen::resize(100, rc::gen::inRange<T>(lo, hi));
}

inline rc::Gen<std::uint32_t> gen_lanes() {
  return rc::gen::weightedOneOf<std::uint32_t>({
      {2, rc::gen::just<std::uint32_t>(0)},       // cordoned
      {6, uniform<std::uint32_t>(1, 6)},          // small pods
      {3, uniform<std::uint32_t>(6, 60)},         // bigger pods
      {1, rc::gen::just<std::uint32_t>(100000)},  // effectively unbounded
  });
}

// One weight under a per-input profile, so inputs range from all-equal (ties everywhere) to
// values within a few units of 2^64-1 (overflow territory).
inline rc::Gen<std::uint64_t> gen_weight(int profile) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  switch (profile) {
    case 0:
      return rc::gen::just<std::uint64_t>(7);  // all equal: ties decide everything
    case 1:
      return rc::gen::inRange<std::uint64_t>(0, 10);  // tiny, zeros included
    case 2:
      return uniform<std::uint64_t>(std::uint64_t{1} << 20, std::uint64_t{1} << 40);
    case 3:  // near the top of the range: loads far beyond 2^64
      return rc::gen::map(rc::gen::inRange<std::uint64_t>(0, 4),
                          [](std::uint64_t d) { return kMax - d; });
    default:  // a mix of everything
      return rc::gen::weightedOneOf<std::uint64_t>({
          {3, rc::gen::inRange<std::uint64_t>(0, 100)},
          {3, uniform<std::uint64_t>(std::uint64_t{1} << 20, std::uint64_t{1} << 40)},
          {1, rc::gen::map(rc::gen::inRange<std::uint64_t>(0, 1000),
                           [](std::uint64_t d) { return kMax - d; })},
          {1, rc::gen::arbitrary<std::uint64_t>()},
      });
  }
}

// Unique, unordered-looking ids: k -> a bijection of k mixed with a per-input salt.
inline std::string scrambled_id(const char* prefix, std::uint32_t k, std::uint32_t salt) {
  const std::uint32_t x = (k * 2654435761u) ^ salt;  // odd multiplier: a bijection mod 2^32
  return std::string(prefix) + std::to_string(x);
}

// Inputs vary along independent axes, each chosen per input:
//   capacity:  tight (small budgets, usually a queue) or roomy (free lanes: pass 3 has targets);
//   ownership: uniform over the fleet, or concentrated on one or two members (a newcomer joined,
//              a fleet restarted behind one survivor), so that pass 3 has work to do;
//   weights:   gen_weight's profiles.
inline rc::Gen<core::AssignmentInput> gen_assignment_input() {
  return rc::gen::exec([] {
    core::AssignmentInput in;
    const auto salt = *rc::gen::arbitrary<std::uint32_t>();
    const auto m_count = *uniform<std::uint32_t>(0, 13);
    const auto s_count = *rc::gen::inRange<std::uint32_t>(0, 201);
    const bool roomy = *rc::gen::arbitrary<bool>();
    const std::uint32_t fair = m_count == 0 ? 1 : s_count / m_count + 1;
    for (std::uint32_t k = 0; k < m_count; ++k) {
      const std::uint32_t lanes = roomy ? *rc::gen::weightedOneOf<std::uint32_t>(
                                              {{1, rc::gen::just<std::uint32_t>(0)},
                                               {8, uniform<std::uint32_t>(1, 3 * fair + 2)}})
                                        : *gen_lanes();
      in.members.push_back(core::AssignMember{scrambled_id("m", k, salt), lanes});
    }
    const int profile = *uniform(0, 5);
    const int owned_pct = *uniform(0, 101);
    const bool concentrated = *rc::gen::arbitrary<bool>();
    const auto favourites = static_cast<std::int32_t>(std::min<std::uint32_t>(m_count, 2));
    const int reserved_pct = *rc::gen::element(0, 0, 5, 30);
    const int departed_pct = *uniform(0, 101);
    const int pinned_pct = *rc::gen::element(0, 0, 0, 10, 50);
    // The pace rule in half the inputs: paces from a few values (many ties, gains either side of
    // the margin), some members of unknown pace, a share of the splits under way.
    const bool paced = *rc::gen::arbitrary<bool>();
    const int under_way_pct = *rc::gen::element(10, 50, 100);
    const auto gen_pace = [] {
      return *rc::gen::element<std::uint64_t>(0, 5, 10, 12, 13, 20, 100);
    };
    if (paced) {
      for (auto& m : in.members) {
        if (*uniform(0, 5) > 0) m.lane_pace = gen_pace();
      }
      in.pace_gain_ppm = *rc::gen::element<std::uint32_t>(0, 250'000, 1'000'000);
    }
    const auto who = [&](int pct) -> std::int32_t {
      if (m_count == 0 || *uniform(0, 100) >= pct) return core::kNoMember;
      if (concentrated) return *uniform<std::int32_t>(0, favourites);
      return *uniform<std::int32_t>(0, static_cast<std::int32_t>(m_count));
    };
    for (std::uint32_t k = 0; k < s_count; ++k) {
      core::AssignSplit s;
      s.id = scrambled_id("s", k, ~salt);
      s.weight = *gen_weight(profile);
      s.previous = who(owned_pct);
      s.lease_owner = who(owned_pct);
      s.record_owner = who(owned_pct);
      s.reserved = *uniform(0, 100) < reserved_pct;
      s.holder_departed = *uniform(0, 100) < departed_pct;
      s.pinned = *uniform(0, 100) < pinned_pct;
      if (paced && *uniform(0, 100) < under_way_pct) s.pace = gen_pace();
      in.splits.push_back(std::move(s));
    }
    in.seed = *rc::gen::arbitrary<std::uint64_t>();
    // Half the inputs undamped (today's default), the rest with an absolute threshold near the
    // weights' scale and/or a fraction of the mean load up to all of it.
    if (*rc::gen::arbitrary<bool>()) {
      in.damping_weight =
          in.splits.empty() ? 0 : in.splits[*uniform<std::size_t>(0, s_count)].weight;
      if (*rc::gen::arbitrary<bool>()) in.damping_weight = 0;
      in.damping_ppm_of_mean =
          *rc::gen::element<std::uint32_t>(0, 1'000, 50'000, 100'000, 1'000'000);
    }
    return in;
  });
}

// The same input with members and splits in another order (indices remapped).
inline core::AssignmentInput shuffled(const core::AssignmentInput& in, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto permutation = [&rng](std::size_t n) {
    std::vector<std::size_t> p(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = i;
    for (std::size_t i = n; i > 1; --i) std::swap(p[i - 1], p[rng() % i]);
    return p;
  };
  const auto mp = permutation(in.members.size());  // new position -> old index
  const auto sp = permutation(in.splits.size());
  std::vector<std::int32_t> new_index(in.members.size());
  for (std::size_t i = 0; i < mp.size(); ++i) new_index[mp[i]] = static_cast<std::int32_t>(i);
  auto remap = [&](std::int32_t old) {
    return old == core::kNoMember ? core::kNoMember : new_index[static_cast<std::size_t>(old)];
  };
  core::AssignmentInput out;
  out.seed = in.seed;
  out.max_improving_moves = in.max_improving_moves;
  out.damping_weight = in.damping_weight;
  out.damping_ppm_of_mean = in.damping_ppm_of_mean;
  out.pace_gain_ppm = in.pace_gain_ppm;
  for (std::size_t i : mp) out.members.push_back(in.members[i]);
  for (std::size_t j : sp) {
    core::AssignSplit s = in.splits[j];
    s.previous = remap(s.previous);
    s.lease_owner = remap(s.lease_owner);
    s.record_owner = remap(s.record_owner);
    out.splits.push_back(std::move(s));
  }
  return out;
}

}  // namespace etlc::test
