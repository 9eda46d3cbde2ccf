// The PostgreSQL backfill's planning, without a server: cut_ranges balances rows whatever the ids
// look like, covers every id exactly once, and the descriptors round-trip.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "pg.hpp"
#include "plan.hpp"

namespace pgb {
namespace {

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

void expect_cover(const std::vector<IdRange>& rs) {
  ASSERT_FALSE(rs.empty());
  EXPECT_EQ(rs.front().lo, kMin);
  EXPECT_EQ(rs.back().hi, kMax);
  for (std::size_t i = 0; i + 1 < rs.size(); ++i) {
    EXPECT_LE(rs[i].lo, rs[i].hi) << i;
    EXPECT_EQ(rs[i].hi + 1, rs[i + 1].lo) << "ranges " << i << " and " << i + 1;
  }
}

// Buckets of 10 rows each: most of them packed into three narrow clusters, the rest scattered
// over a span a million times wider (what `generate` makes).
std::vector<Bucket> clustered() {
  std::vector<Bucket> out;
  std::int64_t id = 1'000;
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 200; ++i, id += 10) out.push_back({id, id + 9, 10});
    id += 1'000'000'000'000;
  }
  for (int i = 0; i < 100; ++i, id += 10'000'000'000) out.push_back({id, id + 9'999'999'999, 10});
  return out;
}

TEST(PgPlan, clustered_sparse_ids_get_ranges_of_equal_rows_not_of_equal_id_spans) {
  const auto buckets = clustered();  // 7,000 rows
  const auto rs = cut_ranges(buckets, 500);
  expect_cover(rs);
  ASSERT_EQ(rs.size(), 14u);
  std::uint64_t total = 0;
  for (const auto& r : rs) {
    total += r.rows;
    EXPECT_GE(r.rows, 490u);
    EXPECT_LE(r.rows, 510u) << "bucket granularity is 10 rows";
  }
  EXPECT_EQ(total, 7000u);
  // The same number of ranges cut by id span would put almost everything in one range.
  const std::int64_t span = (buckets.back().hi - buckets.front().lo) / 14;
  std::uint64_t in_first_span = 0;
  for (const auto& b : buckets) in_first_span += b.lo < buckets.front().lo + span ? b.rows : 0;
  EXPECT_GE(in_first_span, 2000u) << "the naive cut puts 4 shares in one range (the point)";
}

TEST(PgPlan, a_bucket_is_never_split_and_a_huge_one_stands_alone) {
  std::vector<Bucket> b{{1, 10, 10}, {11, 20, 10}, {21, 30, 1000}, {31, 40, 10}, {41, 50, 10}};
  const auto rs = cut_ranges(b, 100);
  expect_cover(rs);
  std::uint64_t total = 0;
  bool alone = false;
  for (const auto& r : rs) {
    total += r.rows;
    alone |= r.lo == 21 && r.hi == 30 && r.rows == 1000;
  }
  EXPECT_EQ(total, 1040u);
  EXPECT_TRUE(alone);
}

TEST(PgPlan, random_buckets_are_covered_and_balanced_within_one_bucket) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Bucket> b;
    std::int64_t id = static_cast<std::int64_t>(rng() % 1000);
    const int n = 1 + static_cast<int>(rng() % 300);
    std::uint64_t total = 0, biggest = 0;
    for (int i = 0; i < n; ++i) {
      const std::int64_t width = 1 + static_cast<std::int64_t>(rng() % 100000);
      const std::uint64_t rows = rng() % 50;
      b.push_back({id, id + width - 1, rows});
      total += rows;
      biggest = std::max(biggest, rows);
      id += width + static_cast<std::int64_t>(rng() % 1000);
    }
    const std::uint64_t target = 1 + rng() % 500;
    const auto rs = cut_ranges(b, target);
    expect_cover(rs);
    std::uint64_t sum = 0;
    const double share = static_cast<double>(total) / static_cast<double>(rs.size());
    for (const auto& r : rs) {
      sum += r.rows;
      EXPECT_LE(static_cast<double>(r.rows), share + 2.0 * static_cast<double>(biggest) + 1)
          << "trial " << trial;
    }
    EXPECT_EQ(sum, total);
  }
}

TEST(PgPlan, an_empty_table_is_one_range_over_every_id) {
  const auto rs = cut_ranges({}, 100);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0], (IdRange{kMin, kMax, 0}));
}

TEST(PgPlan, descriptors_round_trip_and_garbage_is_refused) {
  const IdRange r{kMin, 42, 7};
  auto back = decode_range(encode_range(r));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->lo, r.lo);
  EXPECT_EQ(back->hi, r.hi);
  for (const char* bad : {"", "1", "1 x", "5 1", "1  2", "a b"}) {
    EXPECT_FALSE(decode_range(bad).has_value()) << bad;
  }
  EXPECT_EQ(split_id(3), "r0003");
}

TEST(PgPlan, urls_are_redacted_in_messages_and_identifiers_quoted) {
  EXPECT_EQ(redact_url("postgresql://u:secret@h:5432/db"), "postgresql://u:***@h:5432/db");
  EXPECT_EQ(redact_url("postgresql://u@h/db"), "postgresql://u@h/db");
  EXPECT_EQ(quote_ident("a\"b"), "\"a\"\"b\"");
  std::string out;
  copy_escape("a\tb\nc\\d\r", out);
  EXPECT_EQ(out, "a\\tb\\nc\\\\d\\r");
}

}  // namespace
}  // namespace pgb
