// The file backfill's lanes on real files: output per split and epoch, durable progress that
// resumes exactly, torn tails, a changed input; a lane splitting itself (Lane::split), its
// residual read by a fresh lane, and takeovers after a cut.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "examples/temp_dir.hpp"
#include "generate.hpp"
#include "lane.hpp"
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

std::size_t lines(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

class LaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    in = dir.path() / "in";
    out = dir.path() / "out";
    fs::create_directories(in);
    fs::create_directories(out / "data");
    fs::create_directories(out / "rejects");
    write("a.csv", "id,name\n1,x\n2,\"y, z\"\n3,bad\"quote\n");
    write("b.csv", "id,name\r\n4,\"multi\r\nline\"\r\n5,w\r\n");
    split.id = "split-00000";
    for (const char* n : {"a.csv", "b.csv"}) {
      split.ranges.push_back(whole_file({n, fs::file_size(in / n)}));
      split.bytes += split.ranges.back().bytes();
    }
    settings.input_dir = in;
    settings.output_dir = out;
    settings.counters = &counters;
  }
  void write(const char* name, const std::string& bytes) {
    std::ofstream(in / name, std::ios::binary) << bytes;
  }
  std::unique_ptr<etlc::Lane> open(std::uint64_t epoch, etlc::SplitProgress resume = {}) {
    etlc::LaneContext ctx;
    ctx.spec = {split.id, encode_descriptor(split), split.bytes};
    ctx.epoch = epoch;
    ctx.resume = std::move(resume);
    sources.push_back(std::make_unique<FileSource>(settings));
    return sources.back()->open(ctx);
  }
  etlc::SplitProgress run_to_end(etlc::Lane& lane) {
    for (int i = 0; i < 1000; ++i) {
      if (lane.step().status == etlc::StepResult::Status::end_of_split) break;
    }
    return lane.durable_progress();
  }

  testing::ScratchDir dir{"lane"};
  fs::path in, out;
  SplitPlan split;
  MemberCounters counters;
  LaneSettings settings;
  std::vector<std::unique_ptr<FileSource>> sources;
};

TEST_F(LaneTest, a_lane_writes_one_line_per_row_and_rejects_malformed_rows) {
  auto lane = open(1);
  etlc::SplitProgress p = run_to_end(*lane);
  lane->close(etlc::LaneEnd::completed);
  EXPECT_EQ(p.watermark, split.bytes);
  EXPECT_EQ(p.state, "4 1") << "4 rows, 1 malformed";
  const std::string data = slurp(data_file(out, split.id, 1));
  EXPECT_EQ(lines(data), 4u);
  EXPECT_NE(data.find(R"({"file":"a.csv","offset":8,"row":{"id":"1","name":"x"}})"),
            std::string::npos)
      << data;
  EXPECT_NE(data.find(R"("name":"multi\r\nline")"), std::string::npos) << data;
  const std::string rejects = slurp(rejects_file(out, split.id, 1));
  EXPECT_EQ(lines(rejects), 1u);
  EXPECT_NE(rejects.find("quote inside an unquoted field"), std::string::npos);
  EXPECT_EQ(counters.splits_completed.load(), 1u);
  EXPECT_EQ(counters.rows_completed.load(), 4u);
  EXPECT_EQ(counters.rows_written.load(), 4u);
}

TEST_F(LaneTest, a_new_tenancy_resumes_after_the_committed_watermark_without_replay) {
  settings.step_bytes = 1;  // one record per step
  auto first = open(1);
  first->step();
  first->step();
  etlc::SplitProgress committed = first->durable_progress();
  first->step();  // read past the commit, never made durable
  first->close(etlc::LaneEnd::lost);
  EXPECT_EQ(committed.state, "2 0");
  EXPECT_GT(committed.watermark, 0u);
  // The weight is the split's bytes: what is durable behind the watermark is the weight done.
  EXPECT_EQ(committed.done, std::optional<std::uint64_t>(committed.watermark));
  EXPECT_EQ(lines(slurp(data_file(out, split.id, 1))), 2u) << "the uncommitted row was dropped";

  auto second = open(2, committed);
  etlc::SplitProgress p = run_to_end(*second);
  second->close(etlc::LaneEnd::completed);
  EXPECT_EQ(p.watermark, split.bytes);
  EXPECT_EQ(p.state, "4 1") << "counts continue from the committed state";
  EXPECT_EQ(p.done, std::optional<std::uint64_t>(split.bytes)) << "all of the split's weight";
  EXPECT_EQ(lines(slurp(data_file(out, split.id, 2))), 2u) << "rows 4 and 5 only";
}

TEST_F(LaneTest, resuming_at_a_file_boundary_starts_the_next_file) {
  auto lane = open(3, {split.ranges[0].bytes(), "2 1"});
  etlc::SplitProgress p = run_to_end(*lane);
  EXPECT_EQ(p.state, "4 1");
  const std::string data = slurp(data_file(out, split.id, 3));
  EXPECT_EQ(lines(data), 2u);
  EXPECT_EQ(data.find("a.csv"), std::string::npos);
}

TEST_F(LaneTest, reopening_an_epoch_file_drops_its_torn_last_line) {
  std::ofstream(data_file(out, split.id, 4), std::ios::binary)
      << "{\"file\":\"a.csv\",\"offset\":8,\"row\":{\"id\":\"1\",\"name\":\"x\"}}\n{\"file\":\"a.c";
  auto lane = open(4, {});
  run_to_end(*lane);
  const std::string data = slurp(data_file(out, split.id, 4));
  EXPECT_EQ(lines(data), 5u) << "one old complete line + four new ones";
  EXPECT_EQ(data.find("{\"file\":\"a.c{"), std::string::npos);
  EXPECT_EQ(data.back(), '\n');
}

TEST_F(LaneTest, an_input_file_that_changed_since_planning_is_poison) {
  write("a.csv", "id,name\n1,x\n");  // shorter than planned
  auto lane = open(5);
  EXPECT_THROW(run_to_end(*lane), std::runtime_error);
}

TEST_F(LaneTest, a_crashed_lane_leaves_only_what_it_flushed) {
  auto lane = open(6);
  for (int i = 0; i < 10; ++i) lane->step();  // everything read, nothing flushed (1 MiB buffer)
  lane->close(etlc::LaneEnd::aborted);
  EXPECT_EQ(slurp(data_file(out, split.id, 6)), "");
  EXPECT_EQ(counters.rows_written.load(), 0u);
}

TEST(StateTest, progress_state_round_trips_and_reads_the_state_before_splitting) {
  EXPECT_EQ(encode_state({12, 3, std::nullopt}), "12 3");
  EXPECT_EQ(encode_state({12, 3, 400}), "12 3 400");
  EXPECT_EQ(decode_state("12 3 400"), (LaneState{12, 3, 400}));
  EXPECT_EQ(decode_state("4 1"), (LaneState{4, 1, std::nullopt})) << "a state without an end";
  EXPECT_EQ(decode_state(""), LaneState{});
  for (const char* bad : {"garbage", "1", "1 2 3 4", "1 -2", "1  2", "1 2 ", "1 x"}) {
    EXPECT_THROW(decode_state(bad), std::invalid_argument) << bad;
  }
}

TEST(FileNameTest, split_ids_name_files_in_the_output_directory_only) {
  EXPECT_EQ(file_name_of("split-00003"), "split-00003");
  EXPECT_EQ(file_name_of("split-00003~7.1~9.2"), "split-00003~7.1~9.2");
  EXPECT_EQ(file_name_of("../x"), "%2E.%2Fx");
  EXPECT_EQ(file_name_of("a/b c%"), "a%2Fb%20c%25");
  EXPECT_EQ(data_file("/o", "s~1.2", 5), fs::path("/o/data/s~1.2.e5.jsonl"));
  EXPECT_EQ(rejects_file("/o", "..", 5), fs::path("/o/rejects/%2E..e5.jsonl"));
}

// --- Lane::split --------------------------------------------------------------------------------

// Input with what makes cutting hard: fields spanning lines (LF and CRLF), quoted commas and
// quotes, blank lines, malformed rows. The whole input is one split; verify then says whether the
// lanes together wrote every row once.
class LaneSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    in = dir.path() / "in";
    GenerateOptions g;
    g.output = in;
    g.files = 2;
    g.total_bytes = 30'000;
    g.seed = 3;
    g.malformed = 4;
    generate(g);
    std::string z = "id,name,note\r\n";
    for (int i = 1; i <= 150; ++i) {
      z += std::to_string(i) + ",\"n, " + std::to_string(i) + "\",";
      z += i % 7 == 0 ? "\"two\r\nlines\"" : i % 13 == 0 ? "bad\"quote" : "plain";
      z += i % 11 == 0 ? "\r\n\r\n" : "\r\n";
    }
    std::ofstream(in / "z.csv", std::ios::binary) << z;
    for (const InputFile& f : list_input(in).files) {
      whole.ranges.push_back(whole_file(f));
      whole.bytes += f.bytes;
    }
    whole.id = "split-00000";
    settings.input_dir = in;
    settings.step_bytes = 700;
    settings.min_split_bytes = 500;
    settings.counters = &counters;
  }
  // A new, empty output directory for the lanes opened from now on.
  fs::path fresh_output() {
    out = dir.path() / ("out" + std::to_string(outputs++));
    fs::create_directories(out / "data");
    fs::create_directories(out / "rejects");
    settings.output_dir = out;
    return out;
  }
  std::unique_ptr<etlc::Lane> open(const std::string& id, const std::string& descriptor,
                                   std::uint64_t epoch, etlc::SplitProgress resume = {}) {
    etlc::LaneContext ctx;
    ctx.spec = {id, descriptor, decode_descriptor(id, descriptor).bytes};
    ctx.epoch = epoch;
    ctx.resume = std::move(resume);
    sources.push_back(std::make_unique<FileSource>(settings));
    return sources.back()->open(ctx);
  }
  std::unique_ptr<etlc::Lane> open_whole(std::uint64_t epoch, etlc::SplitProgress resume = {}) {
    return open(whole.id, encode_descriptor(whole), epoch, std::move(resume));
  }
  static void steps(etlc::Lane& lane, int n) {
    for (int i = 0; i < n; ++i) {
      if (lane.step().status == etlc::StepResult::Status::end_of_split) return;
    }
  }
  static etlc::SplitProgress run_to_end(etlc::Lane& lane) {
    steps(lane, 100'000);
    return lane.durable_progress();
  }
  // Every valid row exactly once, with its content.
  void expect_every_row_once() {
    const VerifyReport r = verify(in, out);
    EXPECT_TRUE(r.ok()) << (r.problems.empty() ? "" : r.problems[0]);
    EXPECT_EQ(r.missing, 0u);
    EXPECT_EQ(r.duplicates, 0u);
    EXPECT_EQ(r.output_lines, r.rows);
  }

  testing::ScratchDir dir{"lane-split"};
  fs::path in, out;
  int outputs = 0;
  SplitPlan whole;
  MemberCounters counters;
  LaneSettings settings;
  std::vector<std::unique_ptr<FileSource>> sources;
};

TEST_F(LaneSplitTest, the_lane_up_to_its_cut_and_a_fresh_lane_on_the_residual_read_every_row_once) {
  int cuts = 0, mid_file = 0;
  for (double keep : {0.05, 0.3, 0.5, 0.8, 0.97}) {
    for (int before : {0, 1, 4, 15, 40}) {
      SCOPED_TRACE("keep " + std::to_string(keep) + " after " + std::to_string(before) + " steps");
      fresh_output();
      auto parent = open_whole(1);
      steps(*parent, before);
      const std::uint64_t read = parent->durable_progress().watermark;
      const std::optional<etlc::SplitResidual> rest = parent->split(keep);
      if (!rest) {
        // Only near the end: what is left after `keep` is under the minimum.
        EXPECT_LT(static_cast<double>(whole.bytes - read) * (1 - keep),
                  static_cast<double>(settings.min_split_bytes) + 200);
        continue;
      }
      ++cuts;
      const std::uint64_t cut = whole.bytes - rest->weight;
      EXPECT_GE(static_cast<double>(cut), static_cast<double>(read) + keep * (whole.bytes - read));
      EXPECT_GE(rest->weight, settings.min_split_bytes);
      const SplitPlan child = decode_descriptor("split-00000~1.1", rest->descriptor);
      EXPECT_EQ(child.bytes, rest->weight) << "the residual's weight is its bytes";
      if (child.ranges.front().begin > 0) ++mid_file;
      EXPECT_EQ(decode_state(parent->durable_progress().state).end, cut)
          << "the cut is in the progress at once";

      const etlc::SplitProgress p = run_to_end(*parent);
      EXPECT_EQ(p.watermark, cut);
      auto second = open("split-00000~1.1", rest->descriptor, 1);
      const etlc::SplitProgress c = run_to_end(*second);
      EXPECT_EQ(c.watermark, rest->weight);
      expect_every_row_once();
    }
  }
  EXPECT_GE(cuts, 20);
  EXPECT_GE(mid_file, 15) << "most cuts fall inside a file";
}

TEST_F(LaneSplitTest, lanes_split_again_and_residuals_split_still_cover_the_input_exactly) {
  fresh_output();
  auto parent = open_whole(1);
  steps(*parent, 3);
  const auto first = parent->split(0.3);
  ASSERT_TRUE(first);
  steps(*parent, 2);
  const auto second = parent->split(0.5);
  ASSERT_TRUE(second);
  EXPECT_LT(decode_descriptor("b", second->descriptor).bytes + first->weight, whole.bytes);
  auto child = open("split-00000~1.1", first->descriptor, 1);
  steps(*child, 2);
  const auto grandchild = child->split(0.5);
  ASSERT_TRUE(grandchild);
  auto c2 = open("split-00000~1.2", second->descriptor, 1);
  auto gc = open("split-00000~1.1~1.1", grandchild->descriptor, 1);
  for (etlc::Lane* lane : {parent.get(), child.get(), c2.get(), gc.get()}) run_to_end(*lane);
  expect_every_row_once();
}

TEST_F(LaneSplitTest, a_takeover_from_the_progress_after_a_cut_stops_at_the_cut) {
  fresh_output();
  auto first = open_whole(1);
  steps(*first, 5);
  const auto rest = first->split(0.5);
  ASSERT_TRUE(rest);
  const std::uint64_t cut = whole.bytes - rest->weight;
  const etlc::SplitProgress committed = first->durable_progress();  // the cut's commit
  steps(*first, 2);                                                 // read on, never committed
  first->close(etlc::LaneEnd::lost);

  auto next = open_whole(2, committed);
  const etlc::SplitProgress p = run_to_end(*next);
  EXPECT_EQ(p.watermark, cut);
  EXPECT_EQ(decode_state(p.state).end, cut) << "the end travels on with every commit";
  EXPECT_EQ(next->split(0.5), std::nullopt) << "nothing left to give";
  run_to_end(*open("split-00000~1.1", rest->descriptor, 1));
  expect_every_row_once();
}

TEST_F(LaneSplitTest, a_cut_never_committed_leaves_the_next_owner_the_whole_range) {
  fresh_output();
  auto first = open_whole(1);
  steps(*first, 5);
  const etlc::SplitProgress committed = first->durable_progress();
  ASSERT_TRUE(first->split(0.5));
  first->close(etlc::LaneEnd::lost);  // lost before the cut's commit: no residual split exists

  auto next = open_whole(2, committed);
  const etlc::SplitProgress p = run_to_end(*next);
  EXPECT_EQ(p.watermark, whole.bytes);
  EXPECT_EQ(decode_state(p.state).end, std::nullopt);
  expect_every_row_once();
}

TEST_F(LaneSplitTest, a_lane_declines_when_too_little_is_left_or_no_record_starts_after_the_point) {
  fresh_output();
  auto lane = open_whole(1);
  for (double keep : {0.0, 1.0, -0.5, std::nan("")}) EXPECT_EQ(lane->split(keep), std::nullopt);
  settings.min_split_bytes = whole.bytes;
  auto small = open_whole(2);
  EXPECT_EQ(small->split(0.01), std::nullopt) << "the residual would be under the minimum";

  // One record of 5000 bytes after the header: no record starts past any cut point.
  std::ofstream(in / "zz.csv", std::ios::binary) << "id,v\n1," << std::string(5000, 'v') << "\n";
  SplitPlan one{"split-00009", {whole_file({"zz.csv", fs::file_size(in / "zz.csv")})}, 0};
  one.bytes = one.ranges[0].bytes();
  settings.min_split_bytes = 500;
  auto big_row = open(one.id, encode_descriptor(one), 1);
  EXPECT_EQ(big_row->split(0.5), std::nullopt);
  EXPECT_EQ(run_to_end(*big_row).watermark, one.bytes) << "declining changes nothing";
  run_to_end(*lane);
  EXPECT_EQ(lane->split(0.5), std::nullopt) << "at the end";
}

TEST_F(LaneSplitTest, a_progress_that_ends_outside_the_range_is_refused) {
  fresh_output();
  EXPECT_THROW(open_whole(1, {0, "0 0 " + std::to_string(whole.bytes + 1)}), std::runtime_error);
  EXPECT_THROW(open_whole(1, {500, "1 0 400"}), std::runtime_error) << "an end below the watermark";
}

}  // namespace
}  // namespace fb
