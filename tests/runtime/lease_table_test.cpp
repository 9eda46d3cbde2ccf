// LeaseTable: the own-lease index and the rule that the view never goes back in time.
#include "runtime/lease_table.hpp"

#include <gtest/gtest.h>

namespace etlc::runtime {
namespace {

LeaseTable::Entry lease(const std::string& owner, Revision rev) {
  LeaseTable::Entry e;
  e.rec.owner = owner;
  e.rec.nonce = owner + "-n";
  e.rev = rev;
  return e;
}

TEST(LeaseTable, OwnedListsExactlyTheLeasesNamingTheOwner) {
  LeaseTable t;
  t.set_owner("me");
  t.assign("s1", lease("me", 5));
  t.assign("s2", lease("other", 6));
  t.assign("s3", lease("me", 7));
  EXPECT_EQ(t.owned(), (std::set<std::string>{"s1", "s3"}));
  t.assign("s1", lease("other", 9));  // taken over
  t.erase("s3", 10);
  EXPECT_TRUE(t.owned().empty());
  EXPECT_EQ(t.find("s1")->second.rec.owner, "other");
  EXPECT_EQ(t.find("s3"), t.end());
  t.clear();
  EXPECT_EQ(t.find("s1"), t.end());
}

TEST(LeaseTable, AnOlderEntryThanTheOneHeldIsIgnored) {
  LeaseTable t;
  t.set_owner("me");
  t.assign("s1", lease("me", 20));
  t.assign("s1", lease("other", 12));  // a stale read
  EXPECT_EQ(t.find("s1")->second.rev, 20u);
  EXPECT_EQ(t.owned().count("s1"), 1u);
  t.assign("s1", lease("other", 21));
  EXPECT_EQ(t.find("s1")->second.rec.owner, "other");
}

TEST(LeaseTable, ADeleteSeenFloorsLaterEntriesButNotNewerOnes) {
  LeaseTable t;
  t.set_owner("me");
  t.assign("s1", lease("other", 20));
  t.erase("s1", 25);
  t.assign("s1", lease("other", 20));  // a stale read resurrecting the deleted lease
  EXPECT_EQ(t.find("s1"), t.end());
  t.assign("s1", lease("me", 30));  // a new lease after the delete
  EXPECT_EQ(t.find("s1")->second.rev, 30u);
  EXPECT_EQ(t.owned().count("s1"), 1u);
  t.erase("s1");  // delete revision unknown: no floor, the next entry is taken as it comes
  t.assign("s1", lease("other", 3));
  EXPECT_EQ(t.find("s1")->second.rev, 3u);
}

TEST(LeaseTable, ADeleteOlderThanTheEntryHeldLeavesIt) {
  LeaseTable t;
  t.set_owner("me");
  t.assign("s1", lease("other", 30));  // written again after the delete below
  t.erase("s1", 25);                   // reported late (a release's own delete, applied next step)
  ASSERT_NE(t.find("s1"), t.end());
  EXPECT_EQ(t.find("s1")->second.rev, 30u);
  t.erase("s1", 31);
  EXPECT_EQ(t.find("s1"), t.end());
}

TEST(LeaseTable, AnUnfollowedDeleteKeepsNoFloorAndSparesANewerEntry) {
  LeaseTable t;
  t.set_owner("me");
  t.assign("s1", lease("me", 10));
  t.erase_if_not_newer("s1", 12);
  EXPECT_EQ(t.find("s1"), t.end());
  t.assign("s1", lease("other", 11));  // no floor: taken as it comes (nobody follows the key)
  EXPECT_EQ(t.find("s1")->second.rev, 11u);
  t.erase_if_not_newer("s1", 9);  // older than the entry: kept
  EXPECT_EQ(t.find("s1")->second.rev, 11u);
}

TEST(LeaseTable, EveryMutationChangesTheGeneration) {
  LeaseTable t;
  t.set_owner("me");
  std::uint64_t g = t.generation();
  auto changed = [&] {
    const bool moved = t.generation() != g;
    g = t.generation();
    return moved;
  };
  t.assign("s1", lease("me", 5));
  EXPECT_TRUE(changed());
  t.erase("s1", 6);
  EXPECT_TRUE(changed());
  t.forget("s1");
  EXPECT_TRUE(changed());
  t.retain_owned();
  EXPECT_TRUE(changed());
  t.erase_if_not_newer("s1", 7);
  EXPECT_TRUE(changed());
  t.clear();
  EXPECT_TRUE(changed());
  EXPECT_FALSE(changed());
}

}  // namespace
}  // namespace etlc::runtime
