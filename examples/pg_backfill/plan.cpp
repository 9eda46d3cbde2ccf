#include "plan.hpp"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <limits>

#include "schema.hpp"

namespace pgb {

namespace {
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::uint32_t kCountBuckets = 4096;
constexpr std::uint64_t kMaxSplits = 100'000;

bool parse_int(std::string_view t, std::int64_t& v) {
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return ec == std::errc() && p == t.data() + t.size();
}
}  // namespace

std::vector<IdRange> cut_ranges(std::span<const Bucket> buckets, std::uint64_t target_rows) {
  std::uint64_t total = 0;
  for (const Bucket& b : buckets) total += b.rows;
  const std::uint64_t target = std::max<std::uint64_t>(target_rows, 1);
  const std::uint64_t splits =
      std::clamp<std::uint64_t>((total + target / 2) / target, 1, kMaxSplits);
  std::vector<IdRange> out;
  IdRange cur{kMin, kMax, 0};
  std::uint64_t cum = 0;  // rows before the current bucket
  std::uint64_t j = 1;    // the next cut aims at j * total / splits rows
  auto threshold = [&] { return static_cast<double>(j) * static_cast<double>(total) / splits; };
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const Bucket& b = buckets[i];
    const double before = static_cast<double>(cum), after = before + static_cast<double>(b.rows);
    if (j < splits && after >= threshold()) {
      // The share's end falls in this bucket: cut before it or after it, whichever is nearer (an
      // empty range is never cut off). A bucket holding a whole share or more stands alone.
      std::uint64_t crossed = 0;
      for (std::uint64_t k = j;
           k < splits && after >= static_cast<double>(k) * static_cast<double>(total) / splits;
           ++k) {
        ++crossed;
      }
      const bool cut_before =
          cur.rows > 0 && (crossed >= 2 || threshold() - before < after - threshold());
      const bool cut_after = crossed >= 2 || !cut_before;
      if (cut_before) {
        cur.hi = b.lo - 1;
        out.push_back(cur);
        cur = IdRange{b.lo, kMax, 0};
      }
      cur.rows += b.rows;
      if (cut_after && i + 1 < buckets.size()) {
        cur.hi = buckets[i + 1].lo - 1;
        out.push_back(cur);
        cur = IdRange{buckets[i + 1].lo, kMax, 0};
      }
      while (j < splits && after >= threshold()) ++j;  // one bucket cannot be cut further
    } else {
      cur.rows += b.rows;
    }
    cum += b.rows;
  }
  cur.hi = kMax;
  out.push_back(cur);
  return out;
}

std::string encode_range(const IdRange& r) {
  return std::to_string(r.lo) + " " + std::to_string(r.hi);
}

std::optional<IdRange> decode_range(std::string_view d) {
  const auto sp = d.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  IdRange r;
  if (!parse_int(d.substr(0, sp), r.lo) || !parse_int(d.substr(sp + 1), r.hi) || r.lo > r.hi) {
    return std::nullopt;
  }
  return r;
}

std::string split_id(std::size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "r%04zu", index);
  return buf;
}

std::vector<Bucket> count_buckets(Connection& c, std::string_view table,
                                  std::uint32_t max_buckets) {
  Result r = c.exec(
      "SELECT min(id), max(id), count(*) FROM (SELECT id, ntile($1) OVER (ORDER "
      "BY id) AS b FROM " +
          quote_ident(table) + ") s GROUP BY b ORDER BY b",
      {std::to_string(max_buckets)});
  std::vector<Bucket> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(Bucket{r.int64(i, 0), r.int64(i, 1), static_cast<std::uint64_t>(r.int64(i, 2))});
  }
  return out;
}

std::vector<Bucket> stats_buckets(Connection& c, std::string_view table) {
  Result h = c.exec(
      "SELECT s.histogram_bounds::text, greatest(c.reltuples, 0)::bigint FROM pg_stats s JOIN "
      "pg_class c ON c.oid = to_regclass($1) WHERE s.schemaname = current_schema() AND "
      "s.tablename = $2 AND s.attname = 'id' AND s.histogram_bounds IS NOT NULL",
      {quote_ident(table), std::string(table)});
  if (h.rows() != 1) return {};
  std::vector<std::int64_t> bounds;
  std::string_view t = h.text(0, 0);  // "{1,5,9}"
  if (t.size() < 2) return {};
  t = t.substr(1, t.size() - 2);
  while (!t.empty()) {
    const auto comma = t.find(',');
    std::int64_t v = 0;
    if (!parse_int(t.substr(0, comma), v)) return {};
    bounds.push_back(v);
    if (comma == std::string_view::npos) break;
    t.remove_prefix(comma + 1);
  }
  if (bounds.size() < 2) return {};
  const std::uint64_t tuples = static_cast<std::uint64_t>(h.int64(0, 1));
  const std::size_t n = bounds.size() - 1;
  std::vector<Bucket> out;
  std::uint64_t given = 0;
  for (std::size_t k = 0; k < n; ++k) {
    // Equal-depth buckets: the k-th holds its share of the estimated rows (rounded so they add
    // up to the estimate).
    const std::uint64_t upto = tuples * (k + 1) / n;
    const std::int64_t hi = k + 1 < n ? bounds[k + 1] - 1 : bounds[k + 1];
    if (hi < bounds[k]) continue;  // duplicate bounds
    out.push_back(Bucket{bounds[k], hi, upto - given});
    given = upto;
  }
  return out;
}

std::string PgPlanner::fingerprint() const {
  return "pg-backfill/v1 table=" + s_.table + " sink=" + s_.sink_table +
         " fence=" + (s_.fenced ? "on" : "off") + " split-rows=" + std::to_string(s_.split_rows) +
         " plan=" + (s_.from == PlanFrom::count ? "count" : "stats");
}

std::vector<IdRange> PgPlanner::ranges() const {
  Connection c(s_.source_pg, "pg-backfill planner");
  std::vector<Bucket> buckets;
  if (s_.from == PlanFrom::stats) buckets = stats_buckets(c, s_.table);
  if (buckets.empty()) buckets = count_buckets(c, s_.table, kCountBuckets);
  return cut_ranges(buckets, s_.split_rows);
}

etlc::Plan PgPlanner::plan(const etlc::PlanContext&) {
  etlc::Plan p;
  p.finality = etlc::PlanFinality::final;
  const std::vector<IdRange> rs = ranges();
  for (std::size_t i = 0; i < rs.size(); ++i) {
    p.splits.push_back(
        etlc::PlannedSplit{etlc::SplitSpec{split_id(i), encode_range(rs[i]), rs[i].rows}, {}});
  }
  return p;
}

}  // namespace pgb
