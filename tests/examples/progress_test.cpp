// The file backfill's live line: the job's percent done and ETA from the leader's job.progress.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "progress.hpp"

namespace fb {
namespace {

TEST(ProgressLine, job_text_shows_the_percent_done_and_the_eta_or_says_what_is_unknown) {
  EXPECT_EQ(job_text(JobWeightSample{}), " | job ? ETA unknown") << "before the first record";
  EXPECT_EQ(job_text(JobWeightSample{true, 0.421, 65.2}), " | job 42% ETA 1m05s");
  EXPECT_EQ(job_text(JobWeightSample{true, 0.5, -1}), " | job 50% ETA unknown") << "no rate";
  EXPECT_EQ(job_text(JobWeightSample{true, 1.0, 0}), " | job 100% ETA 0ms");
}

TEST(ProgressLine, human_duration_picks_its_unit) {
  EXPECT_EQ(human_duration(0.25), "250ms");
  EXPECT_EQ(human_duration(12.4), "12s");
  EXPECT_EQ(human_duration(307), "5m07s");
  EXPECT_EQ(human_duration(7380), "2h03m");
}

TEST(ProgressLine, the_plain_line_carries_the_job_part) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  ProgressDisplay display(out, /*live=*/false);
  ProgressSample s;
  s.elapsed_s = 1;
  s.splits_total = 4;
  s.job = JobWeightSample{true, 0.25, 3};
  display.update(s);
  std::rewind(out);
  char buf[512] = {};
  ASSERT_NE(std::fgets(buf, sizeof buf, out), nullptr);
  std::fclose(out);
  const std::string line = buf;
  EXPECT_EQ(line.rfind("[   1.0s] splits 0/4 | job 25% ETA 3s | ", 0), 0u) << line;
}

}  // namespace
}  // namespace fb
