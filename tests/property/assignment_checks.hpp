// Independent checkers for desired_assignment's output, shared by the property and unit tests.
// They recompute everything from the input by brute force; nothing here trusts the stats.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/assignment.hpp"
#include "core/lane_pace.hpp"

namespace etlc::test {

__extension__ typedef unsigned __int128 ExactLoad;

// Exact per-member loads of an assignment.
inline std::vector<ExactLoad> exact_loads(const core::AssignmentInput& in,
                                          const core::Assignment& out) {
  std::vector<ExactLoad> load(in.members.size(), 0);
  for (std::size_t m = 0; m < out.by_member.size() && m < load.size(); ++m) {
    for (std::uint32_t j : out.by_member[m]) load[m] += in.splits[j].weight;
  }
  return load;
}

// The first structural violation (shape, range, duplicates, order, reserved, lane budgets,
// reported loads), or nullopt.
inline std::optional<std::string> structural_violation(const core::AssignmentInput& in,
                                                       const core::Assignment& out) {
  if (out.by_member.size() != in.members.size()) return "by_member has the wrong size";
  if (out.load_by_member.size() != in.members.size()) return "load_by_member has the wrong size";
  std::vector<int> seen(in.splits.size(), 0);
  const auto load = exact_loads(in, out);
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    const auto& list = out.by_member[m];
    if (list.size() > in.members[m].lanes) {
      return fmt::format("member {} got {} splits over its {} lanes", in.members[m].id, list.size(),
                         in.members[m].lanes);
    }
    for (std::size_t k = 0; k < list.size(); ++k) {
      const std::uint32_t j = list[k];
      if (j >= in.splits.size()) return fmt::format("split index {} out of range", j);
      if (++seen[j] > 1) return fmt::format("split {} assigned twice", in.splits[j].id);
      if (in.splits[j].reserved) return fmt::format("reserved split {} assigned", in.splits[j].id);
      if (k > 0 && !(in.splits[list[k - 1]].id < in.splits[j].id)) {
        return fmt::format("member {}'s list is not sorted by split id", in.members[m].id);
      }
    }
    const ExactLoad max64 = ~std::uint64_t{0};
    const std::uint64_t want =
        load[m] > max64 ? ~std::uint64_t{0} : static_cast<std::uint64_t>(load[m]);
    if (out.load_by_member[m] != want) {
      return fmt::format("member {}'s reported load is wrong", in.members[m].id);
    }
  }
  return std::nullopt;
}

// Pass 3's damping threshold, recomputed from the input and the output's loads: max(damping_weight,
// damping_ppm_of_mean * mean / 10^6), the mean over the members with lanes (the placed weight does
// not change in pass 3, so the output's loads give it).
inline ExactLoad damping_threshold(const core::AssignmentInput& in, const core::Assignment& out) {
  ExactLoad total = 0;
  std::size_t holders = 0;
  for (std::size_t m = 0; m < in.members.size(); ++m) holders += in.members[m].lanes > 0;
  for (const ExactLoad l : exact_loads(in, out)) total += l;
  ExactLoad threshold = in.damping_weight;
  if (holders > 0) {
    const ExactLoad mean = total / holders;
    const ExactLoad ppm = in.damping_ppm_of_mean;
    // mean * ppm / 10^6 without overflow: split mean at 10^6.
    const ExactLoad share = (mean / 1'000'000) * ppm + (mean % 1'000'000) * ppm / 1'000'000;
    if (share > threshold) threshold = share;
  }
  return threshold;
}

// Brute force over every (assigned split, other member with a free lane) pair: the first move
// pass 3 would admit (not pinned, to a member the pace rule admits (core::pace_admits), and
// lowering the heavier member's load by more than the damping threshold: weight > t and load(from)
// > load(to) + weight + t; with t = 0, every move that lowers the sum of squared loads), described,
// or nullopt if the assignment is (damped) locally optimal.
inline std::optional<std::string> improving_move(const core::AssignmentInput& in,
                                                 const core::Assignment& out) {
  const auto load = exact_loads(in, out);
  const ExactLoad t_min = damping_threshold(in, out);
  for (std::size_t f = 0; f < out.by_member.size(); ++f) {
    for (std::uint32_t j : out.by_member[f]) {
      if (in.splits[j].pinned) continue;
      const std::uint64_t w = in.splits[j].weight;
      for (std::size_t t = 0; t < in.members.size(); ++t) {
        if (t == f || out.by_member[t].size() >= in.members[t].lanes) continue;
        if (!core::pace_admits(in.splits[j].pace, in.members[t].lane_pace, in.pace_gain_ppm)) {
          continue;  // the pace rule: a split under way moves only to a faster lane
        }
        if (ExactLoad{w} > t_min && load[f] > load[t] + ExactLoad{w} + t_min) {
          return fmt::format("split {} (weight {}) can move from {} to {}", in.splits[j].id, w,
                             in.members[f].id, in.members[t].id);
        }
      }
    }
  }
  return std::nullopt;
}

// Every non-reserved split is assigned, unless every lane in the fleet is full.
inline std::optional<std::string> totality_violation(const core::AssignmentInput& in,
                                                     const core::Assignment& out) {
  std::vector<bool> assigned(in.splits.size(), false);
  for (const auto& list : out.by_member) {
    for (std::uint32_t j : list) assigned[j] = true;
  }
  for (std::size_t j = 0; j < in.splits.size(); ++j) {
    if (in.splits[j].reserved || assigned[j]) continue;
    for (std::size_t m = 0; m < in.members.size(); ++m) {
      if (out.by_member[m].size() < in.members[m].lanes) {
        return fmt::format("split {} is unassigned while member {} has a free lane",
                           in.splits[j].id, in.members[m].id);
      }
    }
  }
  return std::nullopt;
}

// The assignment as the leader would publish it: member id -> sorted split ids.
inline std::vector<std::pair<std::string, std::vector<std::string>>> published(
    const core::AssignmentInput& in, const core::Assignment& out) {
  std::vector<std::pair<std::string, std::vector<std::string>>> result;
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    std::vector<std::string> ids;
    for (std::uint32_t j : out.by_member[m]) ids.push_back(in.splits[j].id);
    result.emplace_back(in.members[m].id, std::move(ids));
  }
  std::sort(result.begin(), result.end());
  return result;
}

// The input with the assignment fed back as the current ownership and previous assignment.
inline core::AssignmentInput fed_back(const core::AssignmentInput& in,
                                      const core::Assignment& out) {
  core::AssignmentInput next = in;
  for (auto& s : next.splits) {
    s.previous = s.lease_owner = s.record_owner = core::kNoMember;
    s.holder_departed = false;
  }
  for (std::size_t m = 0; m < out.by_member.size(); ++m) {
    for (std::uint32_t j : out.by_member[m]) {
      auto& s = next.splits[j];
      s.previous = s.lease_owner = s.record_owner = static_cast<std::int32_t>(m);
    }
  }
  return next;
}

}  // namespace etlc::test
