// Splitting a range scan under way, without a server. cut.hpp: the progress state round-trips and
// still reads the states written before splitting existed; the cut keeps at least `keep` of the
// ids left, leaves the residual at least one, is the earliest such cut, and never overflows on
// ranges that start at INT64_MIN or end at INT64_MAX; the residual's estimated rows add up. The
// lane (its databases out of reach): open checks a resume state's cut against the range, a lane
// resumed after a cut reports its end before any batch, and a lane that cannot see its source
// declines to split and changes nothing. tests/examples/pg_lane_test.cpp splits on a real server.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <random>

#include "cut.hpp"
#include "lane.hpp"

namespace etlc {
// Failure messages show the progress, not its bytes.
inline void PrintTo(const SplitProgress& p, std::ostream* os) {
  *os << "{" << p.watermark << ", \"" << p.state << "\"}";
}
}  // namespace etlc

namespace pgb {
namespace {

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

TEST(PgCut, the_state_round_trips_in_its_four_forms_and_old_states_still_decode) {
  for (const LaneState& s : {LaneState{}, LaneState{42, std::nullopt}, LaneState{-7, 100},
                             LaneState{std::nullopt, 9}, LaneState{kMin, kMax}}) {
    const std::string text = encode_state(s);
    EXPECT_EQ(decode_state(text), s) << text;
  }
  EXPECT_EQ(encode_state({42, std::nullopt}), "42") << "an uncut range writes what it always did";
  EXPECT_EQ(encode_state({42, 99}), "42 hi=99");
  EXPECT_EQ(encode_state({std::nullopt, 99}), "hi=99");
  EXPECT_EQ(encode_state({}), "");
  // States written before splitting existed: "" and the last id.
  EXPECT_EQ(decode_state(""), LaneState{});
  EXPECT_EQ(decode_state("12"), (LaneState{12, std::nullopt}));
  EXPECT_EQ(decode_state("-9223372036854775808"), (LaneState{kMin, std::nullopt}));
}

TEST(PgCut, anything_else_is_not_a_state) {
  for (const char* bad : {"x", "1 2", "hi=", "hi=x", "1 hi=2 3", " 1", "1 ", "1  hi=2", "hi=3 1",
                          "hi=1 hi=2", "+1", "1 HI=2", "99999999999999999999"}) {
    EXPECT_FALSE(decode_state(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(PgCut, the_earliest_cut_that_keeps_at_least_keep_of_the_ids_and_leaves_the_residual_one) {
  for (std::int64_t n = 2; n <= 60; ++n) {
    for (double keep = 0.01; keep < 1; keep += 0.01) {
      const std::int64_t first = 1'000 - n / 2, last = first + n - 1;
      const auto cut = cut_point(first, last, keep);
      // keep * n, exactly (a 53-bit double times a 6-bit count fits a long double's 64 bits).
      const long double share = static_cast<long double>(keep) * static_cast<long double>(n);
      if (std::ceil(share) >= static_cast<long double>(n)) {
        EXPECT_FALSE(cut.has_value()) << n << " " << keep;
        continue;
      }
      ASSERT_TRUE(cut.has_value()) << n << " " << keep;
      EXPECT_GT(*cut, first);
      EXPECT_LE(*cut, last);
      EXPECT_GE(static_cast<long double>(*cut - first), share) << n << " " << keep;
      EXPECT_LT(static_cast<long double>(*cut - 1 - first), share)
          << "earliest " << n << " " << keep;
    }
  }
}

TEST(PgCut, declines_fewer_than_two_ids_and_keep_outside_zero_to_one) {
  EXPECT_FALSE(cut_point(5, 5, 0.5).has_value());
  EXPECT_FALSE(cut_point(6, 5, 0.5).has_value());
  EXPECT_EQ(cut_point(5, 6, 0.5), 6);
  EXPECT_FALSE(cut_point(5, 6, 0.7).has_value()) << "keeping 70 % of 2 ids leaves none";
  for (double keep : {0.0, 1.0, -0.5, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_FALSE(cut_point(0, 1'000, keep).has_value()) << keep;
  }
}

TEST(PgCut, the_whole_int64_span_cuts_without_overflow) {
  auto cut = cut_point(kMin, kMax, 0.5);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(*cut, 0) << "half of 2^64 ids from INT64_MIN";
  cut = cut_point(kMin, kMax, 0.25);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(*cut, kMin / 2);
  cut = cut_point(kMax - 1, kMax, 0.5);
  EXPECT_EQ(cut, kMax);
  cut = cut_point(kMin, kMin + 1, 0.5);
  EXPECT_EQ(cut, kMin + 1);
  cut = cut_point(kMin, kMax, 0.999999);
  ASSERT_TRUE(cut.has_value());
  EXPECT_GT(*cut, kMax / 2);
}

TEST(PgCut, random_ranges_cut_inside_and_keep_their_share) {
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<std::int64_t> any(kMin, kMax);
  std::uniform_real_distribution<double> keeps(0.001, 0.999);
  for (int i = 0; i < 20'000; ++i) {
    std::int64_t a = any(rng), b = any(rng);
    if (a > b) std::swap(a, b);
    if (a == b) continue;
    const double keep = keeps(rng);
    const auto cut = cut_point(a, b, keep);
    ASSERT_TRUE(cut.has_value()) << a << " " << b << " " << keep;
    ASSERT_GT(*cut, a);
    ASSERT_LE(*cut, b);
    const long double ids =
        static_cast<long double>(static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(a)) + 1;
    const long double kept =
        static_cast<long double>(static_cast<std::uint64_t>(*cut) - static_cast<std::uint64_t>(a));
    EXPECT_NEAR(static_cast<double>(kept / ids), keep, 1e-9) << a << " " << b;
  }
}

TEST(PgCut, the_residual_weighs_its_share_of_the_rows_left_never_none_nor_all) {
  EXPECT_EQ(residual_rows(1'000, 1, 100, 51), 500u);
  EXPECT_EQ(residual_rows(1'000, 1, 100, 91), 100u);
  EXPECT_EQ(residual_rows(1'000, 1, 100, 100), 10u);
  EXPECT_EQ(residual_rows(0, 1, 100, 51), 1u) << "the residual holds the row at `last`";
  EXPECT_EQ(residual_rows(1, 1, 100, 51), 1u);
  EXPECT_EQ(residual_rows(2, 1, 100, 2), 1u) << "the parent holds the row at `first`";
  EXPECT_EQ(residual_rows(10, kMin, kMax, 0), 5u);
}

// Lanes whose databases refuse connections (nothing connects until a lane reads or splits).
class PgLaneOffline : public ::testing::Test {
 protected:
  static LaneSettings nowhere(Counters* counters) {
    const std::string url = "postgresql://etlc@127.0.0.1:1/x";
    LaneSettings s;
    s.source = std::make_shared<ConnPool>(url, "test");
    s.sink = std::make_shared<ConnPool>(url, "test");
    s.table = "src";
    s.target = SinkTarget{"job", "src_sink", true};
    s.counters = counters;
    return s;
  }
  std::unique_ptr<etlc::Lane> open(const std::string& descriptor, const std::string& state) {
    const etlc::LaneContext ctx{{"s1", descriptor, 100}, 1, {7, state}, "m1", {}, {}};
    return source.open(ctx);
  }

  Counters counters;
  PgSource source{nowhere(&counters)};
};

TEST_F(PgLaneOffline, open_accepts_old_and_cut_states_inside_the_range_and_names_any_other) {
  for (const char* ok : {"", "3", "100", "hi=50", "3 hi=50", "50 hi=50", "7 hi=100", "hi=3"}) {
    EXPECT_NO_THROW(open("3 100", ok)) << ok;
  }
  for (const char* bad : {"2", "101", "hi=2", "hi=101", "51 hi=50", "2 hi=50", "x", "5 6"}) {
    try {
      open("3 100", bad);
      ADD_FAILURE() << "'" << bad << "' must not open";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("resumes from state '" + std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(PgLaneOffline, a_lane_resumed_after_a_cut_reports_the_cut_before_any_batch) {
  EXPECT_EQ(open("3 100", "42 hi=50")->durable_progress(), (etlc::SplitProgress{7, "42 hi=50"}));
  EXPECT_EQ(open("3 100", "hi=50")->durable_progress(), (etlc::SplitProgress{7, "hi=50"}));
  EXPECT_EQ(open("3 100", "42")->durable_progress(), (etlc::SplitProgress{7, "42"}))
      << "an uncut range reports its state as it always did";
}

TEST_F(PgLaneOffline, a_lane_that_cannot_reach_its_source_declines_to_split_and_changes_nothing) {
  auto lane = open("3 100", "42");
  EXPECT_FALSE(lane->split(0.5).has_value());
  EXPECT_EQ(lane->durable_progress(), (etlc::SplitProgress{7, "42"}));
  lane->close(etlc::LaneEnd::shutdown);
}

}  // namespace
}  // namespace pgb
