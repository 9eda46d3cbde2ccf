// The file backfill's lanes on real files: output per split and epoch, durable progress that
// resumes exactly, torn tails, a changed input.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "examples/temp_dir.hpp"
#include "lane.hpp"
#include "plan.hpp"

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
      split.files.push_back({n, fs::file_size(in / n)});
      split.bytes += split.files.back().bytes;
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
  auto lane = open(3, {split.files[0].bytes, "2 1"});
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

TEST(CountsTest, progress_state_round_trips) {
  std::uint64_t r = 9, m = 9;
  decode_counts(encode_counts(12, 3), r, m);
  EXPECT_EQ(r, 12u);
  EXPECT_EQ(m, 3u);
  decode_counts("", r, m);
  EXPECT_EQ(r, 0u);
  EXPECT_THROW(decode_counts("garbage", r, m), std::invalid_argument);
}

}  // namespace
}  // namespace fb
