#include "reference_improve.hpp"

#include <vector>

namespace etlc::bench {

namespace {

using core::detail::WideLoad;

// w * x exactly, as a 192-bit (hi:64, lo:128) pair, so gains of byte-scale weights compare
// exactly.
struct U192 {
  std::uint64_t hi = 0;
  WideLoad lo = 0;
  friend bool operator>(const U192& a, const U192& b) {
    return a.hi != b.hi ? a.hi > b.hi : a.lo > b.lo;
  }
};

U192 mul(std::uint64_t w, WideLoad x) {
  const auto x_lo = static_cast<std::uint64_t>(x);
  const auto x_hi = static_cast<std::uint64_t>(x >> 64);
  const WideLoad p_lo = WideLoad{w} * x_lo;
  const WideLoad p_hi = WideLoad{w} * x_hi;
  U192 r;
  r.lo = p_lo + (p_hi << 64);
  const std::uint64_t carry = r.lo < p_lo ? 1 : 0;
  r.hi = static_cast<std::uint64_t>(p_hi >> 64) + carry;
  return r;
}

}  // namespace

ReferenceOutcome reference_improve(core::detail::WorkState& st,
                                   std::chrono::steady_clock::time_point deadline) {
  const auto& in = *st.in;
  const std::size_t m_count = in.members.size();
  const std::size_t s_count = in.splits.size();
  ReferenceOutcome outcome;
  for (;;) {
    // Per-member lists, rebuilt each step (O(S), dwarfed by the scan).
    std::vector<std::vector<std::uint32_t>> held(m_count);
    for (std::size_t j = 0; j < s_count; ++j) {
      if (st.at[j] != core::kNoMember) {
        held[static_cast<std::size_t>(st.at[j])].push_back(static_cast<std::uint32_t>(j));
      }
    }
    bool found = false;
    U192 best_gain;
    std::uint32_t best_split = 0;
    std::int32_t best_to = core::kNoMember;
    for (std::size_t f = 0; f < m_count; ++f) {
      if (std::chrono::steady_clock::now() > deadline) {
        outcome.finished = false;
        return outcome;
      }
      for (std::size_t t = 0; t < m_count; ++t) {
        if (t == f || !st.has_free_lane(t)) continue;
        for (std::uint32_t j : held[f]) {
          const std::uint64_t w = in.splits[j].weight;
          if (!core::detail::improves(st.load[f], st.load[t], w)) continue;
          // Sum of squares drops by 2 * w * (load(f) - load(t) - w).
          const U192 gain = mul(w, st.load[f] - st.load[t] - w);
          if (!found || gain > best_gain) {
            found = true;
            best_gain = gain;
            best_split = j;
            best_to = static_cast<std::int32_t>(t);
          }
        }
      }
    }
    if (!found) return outcome;
    if (outcome.moves >= kReferenceMaxMoves) {
      outcome.cap_bound = true;
      st.backstop_bound = true;
      return outcome;
    }
    st.move(best_split, best_to);
    ++outcome.moves;
    ++st.improving_moves;
  }
}

}  // namespace etlc::bench
