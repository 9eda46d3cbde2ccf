// verify and generate: what counts as missing, duplicated, wrong or invalid, also for the output
// of planned ranges and of splits cut by their lanes; determinism and skew of the generated input.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "csv.hpp"
#include "examples/temp_dir.hpp"
#include "generate.hpp"
#include "json_line.hpp"
#include "lane.hpp"
#include "mapped_file.hpp"
#include "plan.hpp"
#include "verify.hpp"

namespace fb {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GenerateOptions g;
    g.output = dir.path() / "in";
    g.files = 4;
    g.total_bytes = 40'000;
    g.seed = 11;
    g.malformed = 3;
    report = generate(g);
    fs::create_directories(dir.path() / "out" / "data");
    // A correct output, written with the lanes' line format: every valid row once.
    const Listing l = list_input(dir.path() / "in");
    std::ofstream f(data(), std::ios::binary);
    for (const InputFile& file : l.files) {
      MappedFile m(l.dir / file.name);
      CsvFile csv(m.data());
      CsvRow row;
      std::string out;
      while (csv.next(row)) {
        if (!row.malformed) append_row_line(out, file.name, row.offset, csv.header(), row.fields);
      }
      f << out;
    }
  }
  fs::path data() const { return dir.path() / "out" / "data" / "split-00000.e1.jsonl"; }
  VerifyReport check() { return verify(dir.path() / "in", dir.path() / "out"); }
  std::vector<std::string> lines() {
    std::vector<std::string> out;
    std::istringstream in(slurp(data()));
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  void rewrite(const std::vector<std::string>& ls, const std::string& tail = "") {
    std::ofstream f(data(), std::ios::binary | std::ios::trunc);
    for (const auto& l : ls) f << l << '\n';
    f << tail;
  }

  testing::ScratchDir dir{"verify"};
  GenerateReport report;
};

TEST_F(VerifyTest, a_complete_output_passes) {
  VerifyReport r = check();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.rows, report.rows);
  EXPECT_EQ(r.malformed, report.malformed);
  EXPECT_EQ(r.missing, 0u);
  EXPECT_EQ(r.duplicates, 0u);
  EXPECT_EQ(r.output_lines, report.rows);
}

TEST_F(VerifyTest, duplicates_are_counted_but_allowed) {
  auto ls = lines();
  ls.push_back(ls[3]);
  ls.push_back(ls[3]);
  rewrite(ls);
  VerifyReport r = check();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.duplicates, 2u);
}

TEST_F(VerifyTest, a_missing_row_fails) {
  auto ls = lines();
  ls.erase(ls.begin() + 5);
  rewrite(ls);
  VerifyReport r = check();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.missing, 1u);
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems[0].find("missing"), std::string::npos);
}

TEST_F(VerifyTest, changed_content_fails_even_if_every_row_is_present) {
  auto ls = lines();
  const std::string orig = ls[2];
  auto pos = ls[2].find("\"city\":\"");
  ASSERT_NE(pos, std::string::npos);
  ls[2].insert(pos + 8, "X");
  ls.push_back(orig);  // the right content is there too, but one line lies
  rewrite(ls);
  VerifyReport r = check();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.wrong, 1u);
  EXPECT_EQ(r.missing, 0u);
}

TEST_F(VerifyTest, a_dropped_column_is_wrong_content) {
  auto ls = lines();
  auto pos = ls[1].find(",\"comment\":");
  auto end = ls[1].find(",\"created_at\"");
  ASSERT_NE(pos, std::string::npos);
  ls[1].erase(pos, end - pos);
  rewrite(ls);
  EXPECT_EQ(check().wrong, 1u);
}

TEST_F(VerifyTest, garbage_and_unknown_rows_fail) {
  auto ls = lines();
  ls.push_back("this is not json");
  ls.push_back(R"({"file":"part-00000.csv","offset":1,"row":{}})");
  ls.push_back(R"({"file":"part-00000.csv","offset":"8","row":{}})");
  rewrite(ls);
  VerifyReport r = check();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.invalid, 2u);
  EXPECT_EQ(r.unknown, 1u);
}

TEST_F(VerifyTest, a_torn_last_line_is_reported_and_ignored) {
  rewrite(lines(), "{\"file\":\"part-0");
  VerifyReport r = check();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.torn, 1u);
}

TEST_F(VerifyTest, an_empty_output_fails_with_every_row_missing) {
  fs::remove(data());
  VerifyReport r = check();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.missing, report.rows);
}

// The output of a job whose planner cut the files and whose lanes split themselves: parents up
// to their cuts and children (ids "split-00001~1.1") after them.
class VerifySplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GenerateOptions g;
    g.output = dir.path() / "in";
    g.files = 3;
    g.total_bytes = 60'000;
    g.seed = 8;
    g.malformed = 5;
    report = generate(g);
    fs::create_directories(out() / "data");
    fs::create_directories(out() / "rejects");
    settings.input_dir = g.output;
    settings.output_dir = out();
    settings.step_bytes = 1000;
    settings.min_split_bytes = 500;
    settings.counters = &counters;
    const std::vector<SplitPlan> plan = plan_splits(list_input(g.output), 8'000, 1);
    planned = plan.size();
    for (const SplitPlan& s : plan) run(s.id, encode_descriptor(s), 1);
  }
  // Reads a split to its end, after giving half of what it has not read to a child (read too).
  void run(const std::string& id, const std::string& descriptor, std::uint64_t epoch) {
    etlc::LaneContext ctx;
    ctx.spec = {id, descriptor, decode_descriptor(id, descriptor).bytes};
    ctx.epoch = epoch;
    FileSource source(settings);
    auto lane = source.open(ctx);
    lane->step();
    if (auto rest = lane->split(0.5)) {
      ++children;
      run(id + "~" + std::to_string(epoch) + ".1", rest->descriptor, epoch);
    }
    while (lane->step().status != etlc::StepResult::Status::end_of_split) {
    }
    lane->durable_progress();
    lane->close(etlc::LaneEnd::completed);
  }
  fs::path out() const { return dir.path() / "out"; }
  VerifyReport check() { return verify(dir.path() / "in", out()); }

  testing::ScratchDir dir{"verify-split"};
  GenerateReport report;
  MemberCounters counters;
  LaneSettings settings;
  std::size_t planned = 0, children = 0;
};

TEST_F(VerifySplitTest, ranges_and_children_pass_with_every_row_once) {
  EXPECT_GT(planned, 3u) << "files above the target were cut";
  EXPECT_GE(children, planned / 2) << "and most lanes split again";
  const VerifyReport r = check();
  EXPECT_TRUE(r.ok()) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_EQ(r.rows, report.rows);
  EXPECT_EQ(r.output_lines, report.rows);
  EXPECT_EQ(r.duplicates, 0u);
  EXPECT_TRUE(fs::exists(out() / "data" / "split-00001~1.1.e1.jsonl"));
  EXPECT_TRUE(fs::exists(out() / "data" / "split-00001~1.1~1.1.e1.jsonl"));
}

TEST_F(VerifySplitTest, a_child_never_read_leaves_its_rows_missing) {
  const fs::path child = out() / "data" / "split-00001~1.1~1.1.e1.jsonl";
  const std::string lines = slurp(child);
  ASSERT_FALSE(lines.empty());
  fs::remove(child);
  const VerifyReport r = check();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.missing, static_cast<std::uint64_t>(std::count(lines.begin(), lines.end(), '\n')));
}

TEST_F(VerifySplitTest, a_range_read_twice_counts_its_rows_as_duplicates) {
  const fs::path parent = out() / "data" / "split-00002.e1.jsonl";
  const std::string lines = slurp(parent);
  fs::copy_file(parent, out() / "data" / "split-00002.e2.jsonl");  // a takeover that replayed it
  const VerifyReport r = check();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.duplicates, static_cast<std::uint64_t>(std::count(lines.begin(), lines.end(), '\n')));
}

TEST(GenerateTest, the_same_seed_gives_the_same_bytes_and_sizes_are_skewed) {
  testing::ScratchDir dir("gen");
  GenerateOptions g;
  g.files = 40;
  g.total_bytes = 400'000;
  g.seed = 5;
  g.output = dir.path() / "a";
  GenerateReport ra = generate(g);
  g.output = dir.path() / "b";
  generate(g);
  g.output = dir.path() / "c";
  g.seed = 6;
  generate(g);
  const Listing a = list_input(dir.path() / "a");
  const Listing b = list_input(dir.path() / "b");
  const Listing c = list_input(dir.path() / "c");
  ASSERT_EQ(a.files.size(), 40u);
  EXPECT_EQ(ra.bytes, a.total_bytes);
  bool differs = false;
  for (std::size_t i = 0; i < a.files.size(); ++i) {
    EXPECT_EQ(slurp(a.dir / a.files[i].name), slurp(b.dir / b.files[i].name));
    differs = differs || slurp(a.dir / a.files[i].name) != slurp(c.dir / c.files[i].name);
  }
  EXPECT_TRUE(differs) << "another seed, other bytes";
  EXPECT_NEAR(static_cast<double>(a.total_bytes), 400'000.0, 40'000.0);
  std::vector<std::uint64_t> sizes;
  for (const auto& f : a.files) sizes.push_back(f.bytes);
  std::sort(sizes.begin(), sizes.end());
  EXPECT_GT(sizes.back(), 3 * sizes[sizes.size() / 2]) << "heavy tail";
}

TEST(GenerateTest, planted_malformed_rows_are_exactly_what_the_reader_rejects) {
  testing::ScratchDir dir("gen-bad");
  GenerateOptions g;
  g.output = dir.path();
  g.files = 3;
  g.total_bytes = 30'000;
  g.seed = 2;
  g.malformed = 7;
  GenerateReport rep = generate(g);
  std::uint64_t rows = 0, bad = 0;
  const Listing l = list_input(dir.path());
  for (const auto& f : l.files) {
    MappedFile m(l.dir / f.name);
    CsvFile csv(m.data());
    CsvRow row;
    while (csv.next(row)) (row.malformed ? bad : rows)++;
  }
  EXPECT_EQ(bad, 7u);
  EXPECT_EQ(rep.malformed, 7u);
  EXPECT_EQ(rows, rep.rows);
}

}  // namespace
}  // namespace fb
