// Planning the file backfill: listing, bin packing, descriptors, fingerprints.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "examples/temp_dir.hpp"
#include "plan.hpp"

namespace fb {
namespace {

std::vector<InputFile> files(std::initializer_list<std::pair<const char*, std::uint64_t>> l) {
  std::vector<InputFile> out;
  for (auto& [n, b] : l) out.push_back({n, b});
  return out;
}

TEST(PackTest, a_file_at_or_above_the_target_is_a_split_of_its_own) {
  auto s = pack_splits(files({{"a.csv", 100}, {"b.csv", 250}, {"c.csv", 10}}), 100);
  ASSERT_EQ(s.size(), 3u);
  for (const auto& split : s) {
    if (split.files.size() == 1 && split.files[0].bytes >= 100) continue;
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
    for (const auto& f : split.files) EXPECT_TRUE(seen.insert(f.name).second) << f.name;
    EXPECT_TRUE(std::is_sorted(split.files.begin(), split.files.end(),
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
    EXPECT_EQ(s1[i].files, s2[i].files);
  }
  EXPECT_EQ(s1[0].id, "split-00000");
  EXPECT_EQ(s1[0].files.front().name, "a");
}

TEST(DescriptorTest, round_trips_and_rejects_foreign_bytes) {
  SplitPlan s{"split-00003", {{"a.csv", 10}, {"b c.csv", 20}}, 30};
  SplitPlan back = decode_descriptor(s.id, encode_descriptor(s));
  EXPECT_EQ(back.id, s.id);
  EXPECT_EQ(back.files, s.files);
  EXPECT_EQ(back.bytes, 30u);
  EXPECT_THROW(decode_descriptor("x", "not json"), UserError);
  EXPECT_THROW(decode_descriptor("x", R"({"files":[{"name":"../etc/passwd","bytes":1}]})"),
               UserError);
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
  Listing l;
  l.files = files({{"a", 60}, {"b", 50}, {"c", 300}});
  l.total_bytes = 410;
  FilePlanner p(l, 100);
  etlc::Plan plan = p.plan({});
  EXPECT_EQ(plan.finality, etlc::PlanFinality::final);
  ASSERT_EQ(plan.splits.size(), 3u);
  std::uint64_t weight = 0;
  for (const auto& s : plan.splits) {
    weight += s.spec.weight;
    EXPECT_EQ(decode_descriptor(s.spec.id, s.spec.descriptor).bytes, s.spec.weight);
  }
  EXPECT_EQ(weight, 410u);
}

}  // namespace
}  // namespace fb
