// Properties of the rebuilt epoch (core/repair_rules.hpp): a split record rebuilt after damage
// lands above every epoch the split ever had, whether the rebuilder remembers the record or not.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "core/repair_rules.hpp"

namespace etlc::core {
namespace {

// One term's history of a split: claims (+1 each) and rebuilds by that term's leader, which
// remembers the last record it read (it may have missed up to a few claims since).
struct TermEvents {
  std::uint8_t rebuilds = 0;
  std::uint16_t claims = 0;
};

RC_GTEST_PROP(RepairProperties, a_rebuild_without_memory_lands_above_every_earlier_term, ()) {
  const auto terms = *rc::gen::container<std::vector<TermEvents>>(rc::gen::build<TermEvents>(
      rc::gen::set(&TermEvents::rebuilds, rc::gen::inRange<int>(0, 50)),
      rc::gen::set(&TermEvents::claims, rc::gen::inRange<int>(0, 5000))));
  RC_PRE(!terms.empty());
  std::uint64_t epoch = 0;
  std::uint64_t term = 1;
  for (const TermEvents& t : terms) {
    for (int i = 0; i < t.rebuilds; ++i) {
      const std::uint64_t missed = *rc::gen::inRange<std::uint64_t>(0, 8);
      epoch = rebuilt_epoch(epoch > missed ? epoch - missed : 0, 0, term);
      epoch += *rc::gen::inRange<std::uint64_t>(0, 8);  // the claims it did not see
    }
    epoch += t.claims;
    ++term;
  }
  // A leader of a later term that never read the record (it was garbage when it started).
  RC_ASSERT(rebuilt_epoch(0, 0, term) > epoch);
}

RC_GTEST_PROP(RepairProperties, a_rebuild_lands_above_what_it_saw_and_its_lease, ()) {
  const auto seen = *rc::gen::inRange<std::uint64_t>(0, std::uint64_t{1} << 62);
  const auto lease = *rc::gen::inRange<std::uint64_t>(0, std::uint64_t{1} << 62);
  const auto term = *rc::gen::inRange<std::uint64_t>(1, std::uint64_t{1} << 20);
  const std::uint64_t e = rebuilt_epoch(seen, lease, term);
  RC_ASSERT(e >= std::max(seen, lease) + kRebuildEpochStep);
  RC_ASSERT(e > term << 32);
}

// operator 15832: two rebuilds in term 2 reached the floor a memoryless rebuild of term 3 took.
TEST(RepairRules, two_rebuilds_in_one_term_stay_below_the_next_terms_floor) {
  const std::uint64_t first = rebuilt_epoch(0, 0, 2);
  const std::uint64_t second = rebuilt_epoch(first, 0, 2);
  EXPECT_GT(rebuilt_epoch(0, 0, 3), second);
}

}  // namespace
}  // namespace etlc::core
