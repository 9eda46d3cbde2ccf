// desired_assignment. The normative description, invariants and proofs sketched here live in
// docs/work-assignment.md; keep the two in step.
#include "core/assignment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <limits>
#include <memory>
#include <memory_resource>
#include <set>
#include <utility>

#include "core/assignment_passes.hpp"
#include "core/indexed_heap.hpp"

namespace etlc::core {

std::uint64_t default_max_improving_moves(std::size_t split_count) noexcept {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t s = split_count;
  if (s > (kMax - kImproveMovesFloor) / kImproveMovesPerSplit) return kMax;
  return s * kImproveMovesPerSplit + kImproveMovesFloor;
}

namespace detail {

namespace {

constexpr std::uint64_t kMaxWeight = std::numeric_limits<std::uint64_t>::max();

struct Keyed {
  std::uint64_t hash;
  std::uint32_t index;
};

// Sorts by hash with an LSD radix sort (6 passes of 11 bits): the rank computation is the largest
// fixed cost of a settled fleet's recomputation, and a comparison sort of 10^6 keys is several
// times slower. Equal hashes keep their input order here; the caller orders them by id.
void radix_sort_by_hash(std::vector<Keyed>& v) {
  constexpr unsigned kBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  std::vector<Keyed> tmp(v.size());
  std::vector<std::size_t> start(kBuckets);
  for (unsigned shift = 0; shift < 64; shift += kBits) {
    std::fill(start.begin(), start.end(), 0);
    for (const Keyed& k : v) ++start[(k.hash >> shift) & (kBuckets - 1)];
    std::size_t sum = 0;
    for (auto& c : start) sum += std::exchange(c, sum);
    for (const Keyed& k : v) tmp[start[(k.hash >> shift) & (kBuckets - 1)]++] = k;
    v.swap(tmp);
  }
}

// Ranks handles 0..n-1 by (stable_hash64(seed, id), id): a total order that depends only on the
// ids and the seed, never on input order. Equal ids are adjacent after the sort: ConfigError.
template <class IdOf>
std::vector<std::uint32_t> rank_by_hash(std::size_t n, std::uint64_t seed, IdOf id_of,
                                        std::string_view what) {
  std::vector<Keyed> keyed(n);
  for (std::size_t i = 0; i < n; ++i) {
    keyed[i] = Keyed{stable_hash64(seed, id_of(i)), static_cast<std::uint32_t>(i)};
  }
  auto by_hash_then_id = [&](const Keyed& a, const Keyed& b) {
    if (a.hash != b.hash) return a.hash < b.hash;
    return id_of(a.index) < id_of(b.index);
  };
  if (n < 4096) {
    std::sort(keyed.begin(), keyed.end(), by_hash_then_id);
  } else {
    radix_sort_by_hash(keyed);
    // Order runs of equal hashes by id (distinct ids rarely collide; duplicates end up adjacent).
    for (std::size_t r = 0; r + 1 < n;) {
      std::size_t end = r + 1;
      while (end < n && keyed[end].hash == keyed[r].hash) ++end;
      if (end - r > 1)
        std::sort(keyed.begin() + static_cast<std::ptrdiff_t>(r),
                  keyed.begin() + static_cast<std::ptrdiff_t>(end), by_hash_then_id);
      r = end;
    }
  }
  std::vector<std::uint32_t> rank(n);
  for (std::size_t r = 0; r < n; ++r) {
    if (r > 0 && keyed[r].hash == keyed[r - 1].hash &&
        id_of(keyed[r].index) == id_of(keyed[r - 1].index)) {
      throw ConfigError(
          fmt::format("desired_assignment: duplicate {} id '{}'", what, id_of(keyed[r].index)));
    }
    rank[keyed[r].index] = static_cast<std::uint32_t>(r);
  }
  return rank;
}

void check_owner_index(std::int32_t v, std::size_t members, const AssignSplit& s,
                       std::string_view field) {
  if (v == kNoMember) return;
  if (v < 0 || static_cast<std::size_t>(v) >= members) {
    throw ConfigError(fmt::format(
        "desired_assignment: split '{}' has {} = {}, which is neither kNoMember nor a member "
        "index below {}",
        s.id, field, v, members));
  }
}

std::int32_t holder_of(const AssignSplit& s) {
  if (s.previous != kNoMember) return s.previous;
  if (s.lease_owner != kNoMember) return s.lease_owner;
  return s.record_owner;
}

// Pass 1: every split stays with its live holder while the holder has lanes. When a holder has
// more candidates than lanes (its budget shrank, or ownership and the previous assignment
// disagree), it keeps first the splits it is actually running (it holds their lease), then the
// heaviest, then by rank — so the work it sheds costs the least.
void sticky(WorkState& st) {
  const AssignmentInput& in = *st.in;
  const std::size_t m_count = in.members.size();
  std::vector<std::uint32_t> candidates(m_count, 0);
  for (std::size_t j = 0; j < in.splits.size(); ++j) {
    const std::int32_t h = st.holder[j];
    if (in.splits[j].reserved || h == kNoMember) continue;
    ++candidates[static_cast<std::size_t>(h)];
  }
  struct Contender {
    std::int32_t member;
    bool running;
    std::uint64_t weight;
    std::uint32_t rank;
    std::uint32_t split;
  };
  std::vector<Contender> contenders;
  for (std::size_t j = 0; j < in.splits.size(); ++j) {
    const AssignSplit& s = in.splits[j];
    const std::int32_t h = st.holder[j];
    if (s.reserved || h == kNoMember) continue;
    const auto hm = static_cast<std::size_t>(h);
    if (in.members[hm].lanes == 0) continue;
    if (candidates[hm] <= in.members[hm].lanes) {
      st.move(static_cast<std::uint32_t>(j), h);
      st.stuck[j] = 1;
    } else {
      contenders.push_back(Contender{h, s.lease_owner == h, s.weight, st.split_rank[j],
                                     static_cast<std::uint32_t>(j)});
    }
  }
  std::sort(contenders.begin(), contenders.end(), [](const Contender& a, const Contender& b) {
    if (a.member != b.member) return a.member < b.member;
    if (a.running != b.running) return a.running;
    if (a.weight != b.weight) return a.weight > b.weight;
    return a.rank < b.rank;
  });
  for (const Contender& c : contenders) {
    if (st.has_free_lane(static_cast<std::size_t>(c.member))) {
      st.move(c.split, c.member);
      st.stuck[c.split] = 1;
    }
  }
}

// Pass 2: longest processing time first. Unplaced splits, heaviest first (ties by rank), each to
// the least-loaded member with a free lane (ties by member rank). When no member has a free
// lane, the rest is the queue.
void fill(WorkState& st) {
  const AssignmentInput& in = *st.in;
  struct Pending {
    std::uint64_t weight;
    std::uint32_t rank;
    std::uint32_t split;
  };
  std::vector<Pending> pending;
  for (std::size_t j = 0; j < in.splits.size(); ++j) {
    if (in.splits[j].reserved || st.at[j] != kNoMember) continue;
    pending.push_back(
        Pending{in.splits[j].weight, st.split_rank[j], static_cast<std::uint32_t>(j)});
  }
  if (pending.empty()) return;
  std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
    if (a.weight != b.weight) return a.weight > b.weight;
    return a.rank < b.rank;
  });
  // A min-heap of the members with a free lane, keys inline (this loop runs once per split, so
  // it avoids the indirection of IndexedHeap): only the top ever changes.
  struct Slot {
    WideLoad load;
    std::uint32_t rank;
    std::uint32_t member;
  };
  auto heavier = [](const Slot& a, const Slot& b) {  // std heap order: the lightest on top
    return a.load != b.load ? a.load > b.load : a.rank > b.rank;
  };
  std::vector<Slot> open;
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    if (st.has_free_lane(m)) {
      open.push_back(Slot{st.load[m], st.member_rank[m], static_cast<std::uint32_t>(m)});
    }
  }
  std::make_heap(open.begin(), open.end(), heavier);
  auto sift_down_top = [&open, &heavier]() {
    const std::size_t n = open.size();
    const Slot top = open[0];
    std::size_t i = 0;
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && heavier(open[child], open[child + 1])) ++child;
      if (!heavier(top, open[child])) break;
      open[i] = open[child];
      i = child;
    }
    open[i] = top;
  };
  for (const Pending& p : pending) {
    if (open.empty()) break;
    const std::uint32_t m = open[0].member;
    // st.move() inlined with the weight at hand: the splits come in weight order, so reading
    // st.weight[p.split] would be a cache miss per split.
    st.at[p.split] = static_cast<std::int32_t>(m);
    st.load[m] += p.weight;
    ++st.count[m];
    if (st.has_free_lane(m)) {
      open[0].load = st.load[m];
    } else {
      open[0] = open.back();
      open.pop_back();
      if (open.empty()) break;
    }
    sift_down_top();
  }
}

// Sorting each member's list by split id is the largest cost of finish(): the ids are scattered
// through the input, so touching them in member order is a cache miss per split. Instead, one
// sequential pass computes an integer key per assigned split — the 8 bytes after the longest
// prefix common to all assigned ids, big-endian, zero-padded — and the per-member sorts compare
// keys, falling back to the full ids only when keys tie. The key order agrees with the byte-wise
// (unsigned) order std::string uses: keys that differ differ first at the first differing byte
// after the common prefix, and zero padding sorts a proper prefix first.
struct IdKey {
  std::uint64_t key;
  std::uint32_t split;
};

std::uint64_t id_key(std::string_view id, std::size_t lcp) {
  std::uint64_t key = 0;
  for (std::size_t k = 0; k < 8; ++k) {
    const std::size_t at = lcp + k;
    const auto byte = at < id.size() ? static_cast<unsigned char>(id[at]) : 0u;
    key = (key << 8) | byte;
  }
  return key;
}

void fill_sorted_by_id(const WorkState& st, std::vector<std::vector<std::uint32_t>>& by_member) {
  const AssignmentInput& in = *st.in;
  const std::size_t m_count = in.members.size();
  const std::size_t s_count = in.splits.size();
  std::string_view first;
  std::size_t lcp = 0;
  bool any = false;
  for (std::size_t j = 0; j < s_count; ++j) {
    if (st.at[j] == kNoMember) continue;
    const std::string_view id = in.splits[j].id;
    if (!any) {
      first = id;
      lcp = id.size();
      any = true;
    }
    const std::size_t limit = std::min(lcp, id.size());
    std::size_t k = 0;
    while (k < limit && id[k] == first[k]) ++k;
    lcp = k;
  }
  std::vector<std::size_t> begin(m_count + 1, 0);
  for (std::size_t m = 0; m < m_count; ++m) begin[m + 1] = begin[m] + st.count[m];
  std::vector<IdKey> keyed(begin[m_count]);
  std::vector<std::size_t> cursor(begin.begin(), begin.end() - 1);
  for (std::size_t j = 0; j < s_count; ++j) {
    if (st.at[j] == kNoMember) continue;
    keyed[cursor[static_cast<std::size_t>(st.at[j])]++] =
        IdKey{id_key(in.splits[j].id, lcp), static_cast<std::uint32_t>(j)};
  }
  for (std::size_t m = 0; m < m_count; ++m) {
    const auto lo = keyed.begin() + static_cast<std::ptrdiff_t>(begin[m]);
    const auto hi = keyed.begin() + static_cast<std::ptrdiff_t>(begin[m + 1]);
    std::sort(lo, hi, [&in](const IdKey& a, const IdKey& b) {
      if (a.key != b.key) return a.key < b.key;
      return in.splits[a.split].id < in.splits[b.split].id;
    });
    by_member[m].reserve(begin[m + 1] - begin[m]);
    for (auto it = lo; it != hi; ++it) by_member[m].push_back(it->split);
  }
}

}  // namespace

WorkState sticky_and_fill(const AssignmentInput& in) {
  const std::size_t m_count = in.members.size();
  const std::size_t s_count = in.splits.size();
  if (m_count > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw ConfigError("desired_assignment: more than 2^31-1 members");
  }
  if (s_count >= static_cast<std::size_t>(std::numeric_limits<std::uint32_t>::max())) {
    throw ConfigError("desired_assignment: 2^32-1 splits or more");
  }
  WorkState st;
  st.in = &in;
  st.member_rank = rank_by_hash(
      m_count, in.seed, [&in](std::size_t i) -> std::string_view { return in.members[i].id; },
      "member");
  st.split_rank = rank_by_hash(
      s_count, in.seed, [&in](std::size_t j) -> std::string_view { return in.splits[j].id; },
      "split");
  st.by_split_rank.resize(s_count);
  for (std::size_t j = 0; j < s_count; ++j) {
    st.by_split_rank[st.split_rank[j]] = static_cast<std::uint32_t>(j);
  }
  st.holder.resize(s_count);
  st.weight.resize(s_count);
  for (std::size_t j = 0; j < s_count; ++j) {
    const AssignSplit& s = in.splits[j];
    st.weight[j] = s.weight;
    check_owner_index(s.previous, m_count, s, "previous");
    check_owner_index(s.lease_owner, m_count, s, "lease_owner");
    check_owner_index(s.record_owner, m_count, s, "record_owner");
    st.holder[j] = holder_of(s);
  }
  if (in.damping_ppm_of_mean > 1'000'000) {
    throw ConfigError(fmt::format("desired_assignment: damping_ppm_of_mean {} is above 10^6",
                                  in.damping_ppm_of_mean));
  }
  if (in.pace_gain_ppm > kMaxPaceGainPpm) {
    throw ConfigError(
        fmt::format("desired_assignment: pace_gain_ppm {} is above 10^7", in.pace_gain_ppm));
  }
  st.pinned.resize(s_count);
  st.paced.resize(s_count);
  for (std::size_t j = 0; j < s_count; ++j) {
    st.pinned[j] = in.splits[j].pinned ? 1 : 0;
    st.paced[j] = in.splits[j].pace.has_value() ? 1 : 0;
  }
  st.stuck.assign(s_count, 0);
  st.at.assign(s_count, kNoMember);
  st.load.assign(m_count, 0);
  st.count.assign(m_count, 0);
  st.max_improving_moves =
      in.max_improving_moves ? *in.max_improving_moves : default_max_improving_moves(s_count);
  sticky(st);
  fill(st);
  return st;
}

// Pass 3, the splits without a pace (the paced ones: assignment_pace.cpp; improve() alternates the
// two). A move (split s on member f, to member t with a free lane) is admitted iff
// w(s) > 0 and load(f) > load(t) + w(s) — exactly when it lowers the sum of squared loads (a
// zero-weight split changes no load, so moving it would be a drain for nothing). For a given f,
// the best target is the lightest member with a free lane (any admitted target could be replaced
// by it), and f can give something to it iff load(f) - minw(f) > load(lightest), where minw(f)
// is f's lightest split of positive weight. So with
//   open   = min-heap of members with a free lane, by load
//   excess = max-heap of members holding positive-weight splits, by load - minw
// an admitted move exists iff excess.top's key > load(open.top) — an O(1) check that is also the
// exact local-optimality test (docs/work-assignment.md has the argument). Each step moves, from
// excess.top to open.top, the split whose weight is nearest half their load difference (the
// largest drop of the sum of squared loads available on that pair), then re-keys the two
// members: O(log M + log k) per move. Per-member ordered split sets are built lazily, only for
// members that actually give a split away, so a settled fleet costs one O(S) scan.
namespace {

// The state of one pass 3 over a WorkState, and its phases: count what each member can give
// (constructor), seed the heaps, snapshot the placement at the first move, build a giver's split
// set when it first gives, pick the split to move, and move it.
class Improver {
 public:
  explicit Improver(WorkState& st);
  void run();

 private:
  // A positive-weight split in a member's set, ordered by (weight, rank).
  struct Entry {
    std::uint64_t weight;
    std::uint32_t rank;
    bool operator<(const Entry& o) const {
      return weight != o.weight ? weight < o.weight : rank < o.rank;
    }
  };
  using SplitSet = std::pmr::set<Entry>;
  struct Lighter {
    const WorkState* st;
    bool operator()(std::uint32_t a, std::uint32_t b) const {
      if (st->load[a] != st->load[b]) return st->load[a] < st->load[b];
      return st->member_rank[a] < st->member_rank[b];
    }
  };
  struct MoreExcess {
    const std::vector<WideLoad>* excess;
    const WorkState* st;
    bool operator()(std::uint32_t a, std::uint32_t b) const {
      if ((*excess)[a] != (*excess)[b]) return (*excess)[a] > (*excess)[b];
      return st->member_rank[a] < st->member_rank[b];
    }
  };

  // The splits this part of pass 3 moves: not pinned, not paced (improve_paced moves those),
  // heavier than the threshold (a lighter one can never lower a load by more than it).
  bool movable(std::size_t j) const {
    return !st_.pinned[j] && !st_.paced[j] && WideLoad{st_.weight[j]} > st_.threshold;
  }
  void rekey(std::size_t m) {
    excess_[m] = movable_[m] == 0 ? WideLoad{0} : st_.load[m] - minw_[m];
  }
  void seed_heaps();
  void snapshot();
  SplitSet& materialize(std::size_t m);
  static SplitSet::const_iterator nearest_half(const SplitSet& from, WideLoad diff,
                                               WideLoad threshold);
  void move_one(std::uint32_t f, std::uint32_t t);

  WorkState& st_;
  const std::size_t m_count_;
  const std::size_t s_count_;
  // movable_[m]: m's splits of positive weight (the only ones pass 3 moves); minw_[m]: the
  // lightest of them (meaningless when movable_[m] == 0); excess_[m]: its key in givers_.
  std::vector<std::uint32_t> movable_;
  std::vector<std::uint64_t> minw_;
  std::vector<WideLoad> excess_;
  IndexedHeap<Lighter> open_;
  IndexedHeap<MoreExcess> givers_;
  // Set nodes come from one arena, released at once at the end: a busy pass builds tens of
  // thousands of nodes, and a malloc/free per node was a large share of its cost.
  std::pmr::monotonic_buffer_resource arena_;
  std::vector<std::unique_ptr<SplitSet>> sets_;  // built lazily, in arena_
  // Snapshot of the placement, taken when the first move is made: each member's (weight, rank)
  // entries of positive weight, contiguous, written in one sequential pass over the splits (reading
  // weights member by member instead would be a cache miss per split).
  std::vector<std::uint32_t> csr_offset_;
  std::vector<Entry> csr_items_;
  std::vector<std::vector<Entry>> arrived_;  // placed after the snapshot
  std::vector<Entry> scratch_;
};

Improver::Improver(WorkState& st)
    : st_(st),
      m_count_(st.in->members.size()),
      s_count_(st.in->splits.size()),
      movable_(m_count_, 0),
      minw_(m_count_, kMaxWeight),
      excess_(m_count_, 0),
      open_(m_count_, Lighter{&st}),
      givers_(m_count_, MoreExcess{&excess_, &st}),
      sets_(m_count_),
      arrived_(m_count_) {
  for (std::size_t j = 0; j < s_count_; ++j) {
    const std::int32_t m = st_.at[j];
    if (m != kNoMember && movable(j)) {
      const auto mm = static_cast<std::size_t>(m);
      ++movable_[mm];
      minw_[mm] = std::min(minw_[mm], st_.weight[j]);
    }
  }
  for (std::size_t m = 0; m < m_count_; ++m) rekey(m);
  seed_heaps();
}

void Improver::seed_heaps() {
  for (std::size_t m = 0; m < m_count_; ++m) {
    const auto h = static_cast<std::uint32_t>(m);
    if (st_.has_free_lane(m)) open_.push(h);
    if (movable_[m] > 0) givers_.push(h);
  }
}

void Improver::snapshot() {
  csr_offset_.assign(m_count_ + 1, 0);
  auto listed = [this](std::size_t j) { return st_.at[j] != kNoMember && movable(j); };
  for (std::size_t j = 0; j < s_count_; ++j) {
    if (listed(j)) ++csr_offset_[static_cast<std::size_t>(st_.at[j]) + 1];
  }
  for (std::size_t m = 0; m < m_count_; ++m) csr_offset_[m + 1] += csr_offset_[m];
  csr_items_.resize(csr_offset_[m_count_]);
  std::vector<std::uint32_t> cursor(csr_offset_.begin(), csr_offset_.end() - 1);
  for (std::size_t j = 0; j < s_count_; ++j) {
    if (listed(j)) {
      csr_items_[cursor[static_cast<std::size_t>(st_.at[j])]++] =
          Entry{st_.weight[j], st_.split_rank[j]};
    }
  }
}

// A member's splits leave it only after its set is built, so its snapshot entries plus what
// arrived since are exactly what it holds. Built from a sorted run: O(k log k), then O(1)
// amortised per hinted insert.
Improver::SplitSet& Improver::materialize(std::size_t m) {
  if (!sets_[m]) {
    scratch_.assign(csr_items_.begin() + csr_offset_[m], csr_items_.begin() + csr_offset_[m + 1]);
    scratch_.insert(scratch_.end(), arrived_[m].begin(), arrived_[m].end());
    std::sort(scratch_.begin(), scratch_.end());
    auto set = std::make_unique<SplitSet>(&arena_);
    for (const Entry& e : scratch_) set->insert(set->end(), e);
    assert(set->size() == movable_[m]);
    arrived_[m] = std::vector<Entry>();
    sets_[m] = std::move(set);
  }
  return *sets_[m];
}

// The split of `from` whose weight is nearest diff/2 among those < diff - threshold (every split
// in the set is heavier than the threshold, so these are the admitted ones): the heaviest split
// <= min(diff/2, limit - 1) or the lightest split in (diff/2, limit). `from` holds one of them
// (its lightest is < limit).
Improver::SplitSet::const_iterator Improver::nearest_half(const SplitSet& from, WideLoad diff,
                                                          WideLoad threshold) {
  const WideLoad limit = diff - threshold;  // > minw(from) > threshold
  const WideLoad half = std::min(diff / 2, limit - 1);
  auto it = half > WideLoad{kMaxWeight}
                ? from.end()
                : from.upper_bound(Entry{static_cast<std::uint64_t>(half),
                                         std::numeric_limits<std::uint32_t>::max()});
  auto pick = from.end();
  if (it != from.begin()) pick = std::prev(it);
  if (it != from.end() && WideLoad{it->weight} < limit) {
    if (pick == from.end() || WideLoad{2} * it->weight - diff < diff - WideLoad{2} * pick->weight) {
      pick = it;
    }
  }
  assert(pick != from.end());
  return pick;
}

// Moves the best split of giver f to the lightest open member t.
void Improver::move_one(std::uint32_t f, std::uint32_t t) {
  SplitSet& from = materialize(f);
  const WideLoad diff = st_.load[f] - st_.load[t];  // > minw(f) + threshold > 0
  const auto pick = nearest_half(from, diff, st_.threshold);
  const std::uint64_t w = pick->weight;
  const std::uint32_t j = st_.by_split_rank[pick->rank];
  assert(improves(st_.load[f], st_.load[t], w, st_.threshold));
  from.erase(pick);

  // Take j off f and re-key f in both heaps, then put it on t and re-key t (one key change
  // at a time keeps each heap update a single-element repair).
  st_.move(j, kNoMember);
  --movable_[f];
  minw_[f] = from.empty() ? kMaxWeight : from.begin()->weight;
  rekey(f);
  givers_.set(f, movable_[f] > 0);
  open_.set(f, st_.has_free_lane(f));

  st_.move(j, static_cast<std::int32_t>(t));
  if (sets_[t]) {
    sets_[t]->insert(Entry{w, st_.split_rank[j]});
  } else {
    arrived_[t].push_back(Entry{w, st_.split_rank[j]});
  }
  ++movable_[t];
  minw_[t] = std::min(minw_[t], w);
  rekey(t);
  givers_.set(t, true);
  open_.set(t, st_.has_free_lane(t));
}

void Improver::run() {
  bool snapshotted = false;
  while (!open_.empty() && !givers_.empty()) {
    const std::uint32_t t = open_.top();
    const std::uint32_t f = givers_.top();
    // No admitted move anywhere: a (damped) local optimum.
    if (!(excess_[f] > st_.load[t] + st_.threshold)) break;
    if (st_.improving_moves >= st_.max_improving_moves) {
      st_.backstop_bound = true;
      break;
    }
    if (!snapshotted) {
      snapshot();
      snapshotted = true;
    }
    assert(f != t);
    move_one(f, t);
    ++st_.improving_moves;
  }
}

}  // namespace

// The mean is over the members that can hold anything (lanes > 0); a fleet of none has no load.
WideLoad damping_threshold(const WorkState& st) {
  const AssignmentInput& in = *st.in;
  WideLoad total = 0;
  std::size_t holders = 0;
  for (std::size_t m = 0; m < in.members.size(); ++m) {
    total += st.load[m];
    holders += in.members[m].lanes > 0 ? 1 : 0;
  }
  WideLoad threshold = in.damping_weight;
  if (holders == 0 || in.damping_ppm_of_mean == 0) return threshold;
  const WideLoad mean = total / holders;  // < 2^96
  constexpr WideLoad kMillion = 1'000'000;
  const WideLoad ppm = in.damping_ppm_of_mean;
  const WideLoad share = mean / kMillion * ppm + mean % kMillion * ppm / kMillion;
  return std::max(threshold, share);
}

// Each round's moves lower the sum of squared loads, so the rounds end; they stop when a round
// of the paced splits moves nothing after the free splits settled: then no admitted move is left
// of either kind (invariant 4). Without paced splits this is a single Improver run.
void improve(WorkState& st) {
  st.threshold = damping_threshold(st);
  if (st.in->members.size() < 2) return;
  for (;;) {
    Improver(st).run();
    if (st.backstop_bound || improve_paced(st) == 0) return;
  }
}

Assignment finish(const WorkState& st) {
  const AssignmentInput& in = *st.in;
  const std::size_t m_count = in.members.size();
  const std::size_t s_count = in.splits.size();
  Assignment out;
  out.by_member.resize(m_count);
  out.load_by_member.resize(m_count);
  for (std::size_t m = 0; m < m_count; ++m) out.load_by_member[m] = saturate64(st.load[m]);
  fill_sorted_by_id(st, out.by_member);
  // A member that holds nothing now is a newcomer for the stats.
  std::vector<std::uint8_t> held_something(m_count, 0);
  for (std::size_t j = 0; j < s_count; ++j) {
    if (!in.splits[j].reserved && st.holder[j] != kNoMember) {
      held_something[static_cast<std::size_t>(st.holder[j])] = 1;
    }
  }
  AssignmentStats& stats = out.stats;
  for (std::size_t j = 0; j < s_count; ++j) {
    const AssignSplit& s = in.splits[j];
    const std::int32_t a = st.at[j];
    if (s.reserved) {
      ++stats.reserved;
      continue;
    }
    if (a == kNoMember) {
      ++stats.queued;
    } else {
      ++stats.assigned;
    }
    const std::int32_t h = st.holder[j];
    if (h != kNoMember) {
      if (a == h) {
        ++stats.kept;
      } else if (a == kNoMember) {
        ++stats.queued_over_budget;
      } else if (!st.stuck[j]) {
        ++stats.moved_over_budget;
      } else if (!held_something[static_cast<std::size_t>(a)]) {
        ++stats.moved_to_newcomer;
      } else {
        ++stats.moved_for_improvement;
      }
    } else if (a == kNoMember) {
      ++stats.still_queued;
    } else if (s.holder_departed) {
      ++stats.reassigned_after_departure;
    } else {
      ++stats.placed_from_queue;
    }
  }
  stats.damping_threshold = saturate64(st.threshold);
  stats.improving_moves = st.improving_moves;
  stats.max_improving_moves = st.max_improving_moves;
  stats.backstop_bound = st.backstop_bound;
  return out;
}

}  // namespace detail

Assignment desired_assignment(const AssignmentInput& in) {
  detail::WorkState st = detail::sticky_and_fill(in);
  detail::improve(st);
  return detail::finish(st);
}

}  // namespace etlc::core
