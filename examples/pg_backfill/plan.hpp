// Planning a range scan: id ranges of balanced row counts.
//
// The leader learns how rows are distributed over ids as buckets (sorted, disjoint id ranges with
// their row counts) either by counting (exact: ntile over the primary key, one index-ordered scan)
// or from the table's statistics (pg_stats.histogram_bounds: equal-row buckets estimated by
// ANALYZE, times pg_class.reltuples; no scan, but only as good as the last ANALYZE). cut_ranges()
// then cuts the id space at bucket boundaries nearest to equal shares of the rows, so a split of
// a dense hot range is as heavy as one spanning a million times more sparse ids.
//
// Split i is "r%04d" over ids [lo, hi] (inclusive); the first starts at INT64_MIN and the last
// ends at INT64_MAX, so a row with any id belongs to exactly one split. The ids depend only on the
// buckets: counting gives the same plan whenever the table has not changed (a leader that crashes
// mid-seeding is replaced by one that plans the same splits); statistics give the same plan while
// pg_statistic is unchanged (do not re-ANALYZE a table during its backfill). A lane that splits
// its range under way (lane.hpp) hands over the ids from its cut on in the same "lo hi" form.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <etlc/planner.hpp>

#include "pg.hpp"

namespace pgb {

struct Bucket {
  std::int64_t lo = 0, hi = 0;  // ids lo..hi (inclusive)
  std::uint64_t rows = 0;
};

struct IdRange {
  std::int64_t lo = 0, hi = 0;  // inclusive
  std::uint64_t rows = 0;       // the weight
  friend bool operator==(const IdRange&, const IdRange&) = default;
};

// Cuts the id space into about total/target_rows ranges (at least 1) at bucket boundaries, each
// as close to an equal share of the rows as the buckets allow. Covers INT64_MIN..INT64_MAX
// without gaps or overlaps. `buckets` sorted and disjoint. Pure.
std::vector<IdRange> cut_ranges(std::span<const Bucket> buckets, std::uint64_t target_rows);

// "lo hi", and back (nullopt for anything else).
std::string encode_range(const IdRange& r);
std::optional<IdRange> decode_range(std::string_view descriptor);
std::string split_id(std::size_t index);

// Exact buckets by counting (at most `max_buckets`, each a ntile of the rows).
std::vector<Bucket> count_buckets(Connection& c, std::string_view table, std::uint32_t max_buckets);
// Estimated buckets from pg_stats; empty when the table has no statistics on id (never ANALYZEd).
std::vector<Bucket> stats_buckets(Connection& c, std::string_view table);

enum class PlanFrom : std::uint8_t { count, stats };

struct PlanSettings {
  std::string source_pg;
  std::string table;
  std::string sink_table;
  std::uint64_t split_rows = 20'000;
  PlanFrom from = PlanFrom::count;
  bool fenced = true;
};

// The job's planner (runs on the leader only). The fingerprint names the table, the sink, the
// fence mode, the split size and the plan source, so members configured differently are refused.
class PgPlanner final : public etlc::Planner {
 public:
  explicit PgPlanner(PlanSettings s) : s_(std::move(s)) {}
  std::string fingerprint() const override;
  etlc::Plan plan(const etlc::PlanContext& context) override;
  // The ranges the plan would have (for `pg-backfill plan` and tests).
  std::vector<IdRange> ranges() const;

 private:
  PlanSettings s_;
};

}  // namespace pgb
