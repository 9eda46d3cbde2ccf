// Planning the file backfill: listing, cutting large files at record boundaries, bin packing,
// descriptors, fingerprints.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>

#include "csv.hpp"
#include "examples/temp_dir.hpp"
#include "generate.hpp"
#include "mapped_file.hpp"
#include "plan.hpp"

namespace fb {
namespace {

// Whole files of these names and sizes.
std::vector<FileRange> files(std::initializer_list<std::pair<const char*, std::uint64_t>> l) {
  std::vector<FileRange> out;
  for (auto& [n, b] : l) out.push_back(whole_file({n, b}));
  return out;
}

TEST(PackTest, a_file_at_or_above_the_target_is_a_split_of_its_own) {
  auto s = pack_splits(files({{"a.csv", 100}, {"b.csv", 250}, {"c.csv", 10}}), 100);
  ASSERT_EQ(s.size(), 3u);
  for (const auto& split : s) {
    if (split.ranges.size() == 1 && split.ranges[0].bytes() >= 100) continue;
    EXPECT_LE(split.bytes, 100u);
  }
}

TEST(PackTest, small_files_share_splits_up_to_the_target) {
  auto s = pack_splits(files({{"a", 60}, {"b", 50}, {"c", 40}, {"d", 30}, {"e", 20}}), 100);
  std::uint64_t total = 0;
  std::set<std::string> seen;
  for (const auto& split : s) {
    EXPECT_LE(split.bytes, 100u);
    total += split.bytes;
    for (const auto& f : split.ranges) EXPECT_TRUE(seen.insert(f.name).second) << f.name;
    EXPECT_TRUE(std::is_sorted(split.ranges.begin(), split.ranges.end(),
                               [](auto& x, auto& y) { return x.name < y.name; }));
  }
  EXPECT_EQ(total, 200u);
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_EQ(s.size(), 2u) << "first fit decreasing packs 60+40 and 50+30+20";
}

TEST(PackTest, packing_is_deterministic_and_ids_follow_the_first_file_name) {
  auto in = files({{"x", 5}, {"a", 70}, {"m", 30}, {"b", 200}, {"z", 1}});
  auto s1 = pack_splits(in, 100);
  std::reverse(in.begin(), in.end());
  auto s2 = pack_splits(in, 100);
  ASSERT_EQ(s1.size(), s2.size());
  for (std::size_t i = 0; i < s1.size(); ++i) {
    EXPECT_EQ(s1[i].id, s2[i].id);
    EXPECT_EQ(s1[i].ranges, s2[i].ranges);
  }
  EXPECT_EQ(s1[0].id, "split-00000");
  EXPECT_EQ(s1[0].ranges.front().name, "a");
}

TEST(DescriptorTest, round_trips_and_rejects_foreign_bytes) {
  SplitPlan s{"split-00003", {{"a.csv", 10, 0, 10}, {"b c.csv", 20, 0, 20}}, 30};
  const std::string d = encode_descriptor(s);
  EXPECT_EQ(d, R"({"files":[{"bytes":10,"name":"a.csv"},{"bytes":20,"name":"b c.csv"}]})")
      << "whole files are written as before ranges existed";
  SplitPlan back = decode_descriptor(s.id, d);
  EXPECT_EQ(back.id, s.id);
  EXPECT_EQ(back.ranges, s.ranges);
  EXPECT_EQ(back.bytes, 30u);
  EXPECT_THROW(decode_descriptor("x", "not json"), UserError);
  EXPECT_THROW(decode_descriptor("x", R"({"files":[{"name":"../etc/passwd","bytes":1}]})"),
               UserError);
}

TEST(DescriptorTest, parts_of_files_round_trip_and_bad_ranges_are_refused) {
  SplitPlan s{"split-00001~4.1",
              {{"a.csv", 100, 40, 100}, {"b.csv", 50, 0, 50}, {"c.csv", 90, 0, 7}},
              60 + 50 + 7};
  SplitPlan back = decode_descriptor(s.id, encode_descriptor(s));
  EXPECT_EQ(back.ranges, s.ranges);
  EXPECT_EQ(back.bytes, s.bytes) << "a split's bytes are its ranges' bytes";
  EXPECT_EQ(decode_descriptor("x", R"({"files":[{"name":"a","bytes":9,"begin":4}]})").ranges,
            (std::vector<FileRange>{{"a", 9, 4, 9}}))
      << "a missing end is the file's end";
  for (const char* bad : {R"({"files":[{"name":"a","bytes":9,"begin":5,"end":4}]})",
                          R"({"files":[{"name":"a","bytes":9,"begin":0,"end":10}]})",
                          R"({"files":[{"name":"a","bytes":9,"begin":-1}]})"}) {
    EXPECT_THROW(decode_descriptor("x", bad), UserError) << bad;
  }
}

TEST(ListingTest, lists_csv_files_sorted_and_fingerprints_them) {
  testing::ScratchDir dir("plan");
  auto write = [&](const char* name, const std::string& bytes) {
    std::ofstream(dir.path() / name) << bytes;
  };
  write("b.csv", "h\n1\n");
  write("a.csv", "h\n");
  write("notes.txt", "ignored");
  std::filesystem::create_directory(dir.path() / "sub.csv");
  Listing l = list_input(dir.path());
  ASSERT_EQ(l.files.size(), 2u);
  EXPECT_EQ(l.files[0].name, "a.csv");
  EXPECT_EQ(l.files[1].name, "b.csv");
  EXPECT_EQ(l.total_bytes, 6u);
  const std::string fp = job_fingerprint(l, 100);
  EXPECT_EQ(fp, job_fingerprint(list_input(dir.path()), 100));
  EXPECT_NE(fp, job_fingerprint(l, 101)) << "the split target is part of the job";
  write("c.csv", "h\n");
  EXPECT_NE(fp, job_fingerprint(list_input(dir.path()), 100)) << "so is the input";
}

TEST(ListingTest, a_missing_input_is_a_clear_error) {
  try {
    list_input("/nonexistent/input");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "input directory /nonexistent/input does not exist");
  }
}

TEST(PlannerTest, plans_one_final_split_per_bin_weighted_by_bytes) {
  testing::ScratchDir dir("planner");
  std::ofstream(dir.path() / "a.csv") << std::string(59, 'a') << "\n";
  std::ofstream(dir.path() / "b.csv") << std::string(49, 'b') << "\n";
  std::string c = "h\n";
  while (c.size() < 298) c += "row\n";
  std::ofstream(dir.path() / "c.csv") << c;
  EXPECT_EQ(FilePlanner(list_input(dir.path()), 100).splits().size(), 3u)
      << "no range below kMinRangeBytes: three files, three splits";
  FilePlanner p(list_input(dir.path()), 100, 50);
  etlc::Plan plan = p.plan({});
  EXPECT_EQ(plan.finality, etlc::PlanFinality::final);
  ASSERT_EQ(plan.splits.size(), 5u) << "a and b alone (110 > 100), c in three ranges";
  std::uint64_t weight = 0;
  for (const auto& s : plan.splits) {
    weight += s.spec.weight;
    EXPECT_EQ(decode_descriptor(s.spec.id, s.spec.descriptor).bytes, s.spec.weight);
  }
  EXPECT_EQ(weight, 60u + 50u + c.size());
  EXPECT_EQ(p.splits()[2].ranges, (std::vector<FileRange>{{"c.csv", 298, 0, 102}}))
      << "ids follow the ranges' order; the first cut at the first record start from 100";
}

// --- cutting files at record boundaries ----------------------------------------------------------

// Where every record of `data` starts, the header's included (in reading order).
std::vector<std::size_t> record_starts(std::string_view data) {
  std::vector<std::string> fields;
  std::vector<std::size_t> out;
  const CsvParse header = parse_csv_record(data, 0, fields);
  if (header.kind == CsvParse::Kind::end) return out;
  out.push_back(header.start);
  CsvFile csv(data);
  for (CsvRow row; csv.next(row);) out.push_back(row.offset);
  return out;
}

// The answer next_boundary must give: the first record start at or after `target`.
std::size_t first_start_from(const std::vector<std::size_t>& starts, std::size_t target,
                             std::size_t size) {
  const auto it = std::lower_bound(starts.begin(), starts.end(), target);
  return it == starts.end() ? size : *it;
}

// The rows a lane reads from `range` of `data`: those starting in it, from its begin.
std::vector<std::size_t> rows_of(std::string_view data, const FileRange& range) {
  std::vector<std::size_t> out;
  CsvFile csv(data, range.begin);
  for (CsvRow row; csv.position() < range.end && csv.next(row) && row.offset < range.end;) {
    EXPECT_LE(row.next, range.end) << "a record crosses the range's end";
    out.push_back(row.offset);
  }
  return out;
}

// Ranges that start at 0, follow one another and end at the file's end, each at a record start,
// and read together every row of the file once.
void expect_cover(std::string_view data, const std::vector<FileRange>& ranges) {
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front().begin, 0u);
  EXPECT_EQ(ranges.back().end, data.size());
  const std::vector<std::size_t> starts = record_starts(data);
  std::vector<std::size_t> read;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(ranges[i].file_bytes, data.size());
    EXPECT_LT(ranges[i].begin, ranges[i].end);
    if (i > 0) {
      EXPECT_EQ(ranges[i].begin, ranges[i - 1].end);
      EXPECT_TRUE(std::binary_search(starts.begin(), starts.end(), ranges[i].begin))
          << "range " << i << " begins at " << ranges[i].begin << ", not at a record";
    }
    for (std::size_t r : rows_of(data, ranges[i])) read.push_back(r);
  }
  CsvFile csv(data);
  std::vector<std::size_t> all;
  for (CsvRow row; csv.next(row);) all.push_back(row.offset);
  EXPECT_EQ(read, all);
}

// Rows with what makes cutting hard: fields spanning lines, quoted commas and quotes, blank
// lines, malformed rows; CRLF line ends when asked.
std::string tricky_csv(int rows, bool crlf) {
  const std::string nl = crlf ? "\r\n" : "\n";
  std::string s = "id,name,note" + nl;
  for (int i = 1; i <= rows; ++i) {
    s += std::to_string(i) + ",\"n, \"\"" + std::to_string(i) + "\"\"\",";
    s += i % 5 == 0 ? "\"a" + nl + "b" + nl + "\"" : i % 17 == 0 ? "bad\"q" : "plain";
    s += i % 9 == 0 ? nl + nl : nl;
  }
  return s;
}

TEST(CutTest, next_boundary_is_the_first_record_start_at_or_after_the_point) {
  for (bool crlf : {false, true}) {
    const std::string data = "\n" + tricky_csv(60, crlf);  // a blank line before the header
    const std::vector<std::size_t> starts = record_starts(data);
    for (std::size_t t = 0; t <= data.size(); ++t) {
      ASSERT_EQ(next_boundary(data, 0, t), first_start_from(starts, t, data.size()))
          << "at " << t << (crlf ? " (CRLF)" : "");
    }
    // Reading on from a later known boundary gives the same answers.
    const std::size_t known = starts[starts.size() / 2];
    for (std::size_t t = known; t <= data.size(); t += 7) {
      EXPECT_EQ(next_boundary(data, known, t), first_start_from(starts, t, data.size()));
    }
  }
}

TEST(CutTest, far_from_a_known_boundary_reading_the_window_before_the_point_finds_it) {
  std::string data = tricky_csv(0, false);
  for (int block = 0; data.size() < 3 * kCutWindow; ++block) {
    data += tricky_csv(1000, block % 3 == 0).substr(14);  // without the header
  }
  const std::vector<std::size_t> starts = record_starts(data);
  std::vector<std::size_t> points;
  for (std::size_t t = kCutWindow + 1; t < data.size(); t += 211'111) points.push_back(t);
  // The hard points: just after a line start inside a record, where reading from that line start
  // would take a field's second line for a record.
  std::size_t found = 0;
  for (std::size_t i = 1; i + 1 < starts.size(); ++i) {
    const std::size_t nl = data.find('\n', starts[i]);
    if (starts[i] < kCutWindow || nl + 3 >= starts[i + 1] || ++found % 600 != 0) continue;
    points.push_back(nl + 2);
  }
  ASSERT_GE(points.size(), 20u);
  for (std::size_t t : points) {
    EXPECT_EQ(next_boundary(data, 0, t), first_start_from(starts, t, data.size())) << "at " << t;
  }
}

TEST(CutTest, a_point_without_a_line_start_in_the_slack_before_it_is_not_guessed) {
  std::string data = "id,v\n";
  while (data.size() < 2 * kCutWindow) data += "1,x\n";
  const std::size_t long_line = data.size();
  data += "2," + std::string(2 * kCutSlack, 'y') + "\n3,z\n";
  EXPECT_EQ(next_boundary(data, 0, long_line + kCutSlack + 10), std::nullopt)
      << "the window's proof needs a line start in its last kCutSlack bytes";
  EXPECT_EQ(next_boundary(data, long_line, long_line + kCutSlack + 10), data.size() - 4)
      << "from a known boundary near enough, it is read exactly";
}

TEST(CutTest, a_large_file_is_cut_at_record_starts_into_ranges_covering_it) {
  for (bool crlf : {false, true}) {
    const std::string data = tricky_csv(800, crlf);
    const InputFile f{"t.csv", data.size()};
    const std::vector<FileRange> ranges = cut_file(data, f, 1000);
    expect_cover(data, ranges);
    EXPECT_GE(ranges.size(), data.size() / 1000 - 1);
    for (const FileRange& r : ranges) EXPECT_LE(r.bytes(), 1000u + 200u) << "about the target";
    EXPECT_EQ(cut_file(data, f, 1000), ranges) << "deterministic";
  }
  const std::string small = tricky_csv(10, false);
  EXPECT_EQ(cut_file(small, {"s.csv", small.size()}, small.size()),
            (std::vector<FileRange>{{"s.csv", small.size(), 0, small.size()}}))
      << "a file at the target stays whole";
}

TEST(CutTest, a_generated_file_far_above_the_target_is_cut_through_the_window) {
  testing::ScratchDir dir("cut");
  GenerateOptions g;
  g.output = dir.path();
  g.files = 1;
  g.total_bytes = 6'000'000;
  g.seed = 4;
  g.malformed = 40;
  generate(g);
  const Listing l = list_input(dir.path());
  MappedFile m(l.dir / l.files[0].name);
  const std::uint64_t target = (l.files[0].bytes + 2) / 3;  // three pieces, each > kCutWindow
  const std::vector<FileRange> ranges = cut_file(m.data(), l.files[0], target);
  ASSERT_EQ(ranges.size(), 3u);
  expect_cover(m.data(), ranges);
  const std::vector<SplitPlan> plan = plan_splits(l, target, 1);
  ASSERT_EQ(plan.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_EQ(plan[i].ranges, (std::vector<FileRange>{ranges[i]}));
}

}  // namespace
}  // namespace fb
