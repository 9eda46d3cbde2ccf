// Pass 3 for the splits under way (the pace rule, core/lane_pace.hpp): such a split moves for
// balance only to a member whose lanes read it faster. For a split at pace p the admitted targets
// are the members of unknown pace or of pace >= p x (1 + gain): with the members ordered fastest
// first (unknown ahead of every known pace), a prefix of that order. The best admitted target is
// the lightest member of the prefix with a free lane, other than the giver (a lighter target
// admits every move a heavier one does), found in a min-tree over the order: O(log M) per split
// looked at and per move, O(P log P + M log M) per round over P splits under way.
#include <algorithm>

#include "core/assignment_passes.hpp"
#include "core/lane_pace.hpp"

namespace etlc::core::detail {

namespace {

// The members ordered fastest first: unknown pace, then by pace descending, ties by rank.
std::vector<std::uint32_t> by_pace(const WorkState& st) {
  const AssignmentInput& in = *st.in;
  std::vector<std::uint32_t> order(in.members.size());
  for (std::size_t m = 0; m < order.size(); ++m) order[m] = static_cast<std::uint32_t>(m);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const auto& pa = in.members[a].lane_pace;
    const auto& pb = in.members[b].lane_pace;
    if (pa.has_value() != pb.has_value()) return !pa.has_value();
    if (pa && *pa != *pb) return *pa > *pb;
    return st.member_rank[a] < st.member_rank[b];
  });
  return order;
}

// A min-tree over positions of the pace order: each node holds the lightest member (by load, then
// rank) with a free lane below it, or -1.
class OpenTree {
 public:
  OpenTree(const WorkState& st, std::vector<std::uint32_t> order)
      : st_(st), order_(std::move(order)), pos_(order_.size()) {
    while (size_ < order_.size()) size_ *= 2;
    tree_.assign(2 * size_, -1);
    for (std::size_t p = 0; p < order_.size(); ++p) {
      pos_[order_[p]] = p;
      tree_[size_ + p] = leaf(order_[p]);
    }
    for (std::size_t n = size_ - 1; n >= 1; --n) tree_[n] = lighter(tree_[2 * n], tree_[2 * n + 1]);
  }

  const std::vector<std::uint32_t>& order() const { return order_; }

  // Re-reads member m's load and free lane.
  void update(std::uint32_t m) { set(pos_[m], leaf(m)); }

  // The lightest member with a free lane among order[0, k), other than `except`; -1 if none.
  std::int32_t lightest(std::size_t k, std::uint32_t except) {
    const std::size_t p = pos_[except];
    const std::int32_t saved = tree_[size_ + p];
    if (p < k) set(p, -1);
    std::int32_t best = -1;
    for (std::size_t lo = size_, hi = size_ + k; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) best = lighter(best, tree_[lo++]);
      if (hi & 1) best = lighter(best, tree_[--hi]);
    }
    if (p < k) set(p, saved);
    return best;
  }

 private:
  std::int32_t leaf(std::uint32_t m) const {
    return st_.has_free_lane(m) ? static_cast<std::int32_t>(m) : -1;
  }
  std::int32_t lighter(std::int32_t a, std::int32_t b) const {
    if (a < 0) return b;
    if (b < 0) return a;
    const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
    if (st_.load[ua] != st_.load[ub]) return st_.load[ua] < st_.load[ub] ? a : b;
    return st_.member_rank[ua] < st_.member_rank[ub] ? a : b;
  }
  void set(std::size_t p, std::int32_t v) {
    std::size_t n = size_ + p;
    tree_[n] = v;
    for (n /= 2; n >= 1; n /= 2) tree_[n] = lighter(tree_[2 * n], tree_[2 * n + 1]);
  }

  const WorkState& st_;
  std::vector<std::uint32_t> order_;  // position -> member
  std::vector<std::size_t> pos_;      // member -> position
  std::size_t size_ = 1;              // leaves: a power of two >= members
  std::vector<std::int32_t> tree_;    // 1-based heap layout; leaves at size_ + position
};

bool movable_paced(const WorkState& st, std::size_t j) {
  return st.paced[j] && !st.pinned[j] && st.at[j] != kNoMember &&
         WideLoad{st.weight[j]} > st.threshold;
}

// The splits under way that may move, heaviest first (ties by rank; the order depends only on
// weights, ids and the seed). A faster lane saves time in proportion to the work it takes over,
// so the heaviest admitted move saves the most per drain: measured against rank order and
// against the free splits' nearest-half choice, it ended the simulator's tail 5 % sooner
// (docs/performance.md, "The tail of a job").
std::vector<std::uint32_t> candidates(const WorkState& st) {
  std::vector<std::uint32_t> out;
  for (std::size_t j = 0; j < st.in->splits.size(); ++j) {
    if (movable_paced(st, j)) out.push_back(static_cast<std::uint32_t>(j));
  }
  std::sort(out.begin(), out.end(), [&st](std::uint32_t a, std::uint32_t b) {
    if (st.weight[a] != st.weight[b]) return st.weight[a] > st.weight[b];
    return st.split_rank[a] < st.split_rank[b];
  });
  return out;
}

}  // namespace

std::uint64_t improve_paced(WorkState& st) {
  const AssignmentInput& in = *st.in;
  const std::vector<std::uint32_t> splits = candidates(st);
  if (splits.empty()) return 0;
  OpenTree open(st, by_pace(st));
  std::uint64_t moves = 0;
  for (const std::uint32_t j : splits) {
    if (!movable_paced(st, j)) continue;
    const auto f = static_cast<std::uint32_t>(st.at[j]);
    const std::optional<std::uint64_t> pace = in.splits[j].pace;
    const auto& order = open.order();
    const auto k = static_cast<std::size_t>(
        std::partition_point(order.begin(), order.end(),
                             [&](std::uint32_t m) {
                               return pace_admits(pace, in.members[m].lane_pace, in.pace_gain_ppm);
                             }) -
        order.begin());
    const std::int32_t t = open.lightest(k, f);
    if (t < 0 ||
        !improves(st.load[f], st.load[static_cast<std::size_t>(t)], st.weight[j], st.threshold)) {
      continue;
    }
    if (st.improving_moves >= st.max_improving_moves) {
      st.backstop_bound = true;
      return moves;
    }
    st.move(j, t);
    open.update(f);
    open.update(static_cast<std::uint32_t>(t));
    ++st.improving_moves;
    ++moves;
  }
  return moves;
}

}  // namespace etlc::core::detail
