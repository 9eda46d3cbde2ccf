// Properties of the claim rules over generated records and leases.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/claim_rules.hpp"

namespace etlc::core {
namespace {

// Small alphabets so that owner/self/nonce collisions are frequent.
rc::Gen<std::optional<std::string>> gen_maybe_name(std::string x, std::string y) {
  return rc::gen::elementOf(std::vector<std::optional<std::string>>{std::nullopt, x, y});
}

rc::Gen<SplitRecord> gen_record() {
  return rc::gen::exec([] {
    SplitRecord r;
    r.id = "s";
    r.epoch = *rc::gen::elementOf(std::vector<std::uint64_t>{0, 1, 7});
    r.status = *rc::gen::element(SplitStatus::runnable, SplitStatus::runnable,
                                 SplitStatus::completed, SplitStatus::quarantined);
    r.owner = *gen_maybe_name("a", "b");
    r.owner_nonce = *gen_maybe_name("n1", "n2");
    r.attempts = *rc::gen::elementOf(std::vector<std::uint32_t>{0, 1, 2, 3, 4, 0xffffffffu});
    return r;
  });
}

rc::Gen<std::optional<LeaseRecord>> gen_lease() {
  return rc::gen::exec([]() -> std::optional<LeaseRecord> {
    if (*rc::gen::inRange(0, 3) == 0) return std::nullopt;
    LeaseRecord l;
    l.split = "s";
    l.owner = *rc::gen::elementOf(std::vector<std::string>{"a", "b"});
    l.nonce = *rc::gen::elementOf(std::vector<std::string>{"n1", "n2"});
    l.epoch = *rc::gen::elementOf(std::vector<std::uint64_t>{0, 1, 7});
    return l;
  });
}

// A claim decision never targets a terminal split, a split with a live foreign lease, or one this
// process already holds; only takeover and reclaim consume an attempt; quarantine is exactly
// "attempts after this claim reach the cap".
RC_GTEST_PROP(ClaimRules, a_claim_never_targets_terminal_foreign_leased_or_held_splits, ()) {
  const SplitRecord record = *gen_record();
  const auto lease = *gen_lease();
  const std::string self = *rc::gen::elementOf(std::vector<std::string>{"a", "b"});
  const std::string nonce = *rc::gen::elementOf(std::vector<std::string>{"n1", "n2"});
  const auto max_attempts = *rc::gen::inRange<std::uint32_t>(1, 6);
  const ClaimDecision d = decide_claim(record, lease, self, nonce, max_attempts);

  const bool terminal = record.status != SplitStatus::runnable;
  const bool foreign = lease && lease->owner != self;
  const bool held = record.owner == self && record.owner_nonce == nonce;
  if (terminal || foreign || held) {
    RC_ASSERT(d.refusal != ClaimRefusal::none);
  }
  if (d.refusal != ClaimRefusal::none) return;

  RC_ASSERT(record.status == SplitStatus::runnable);
  RC_ASSERT(!foreign);
  RC_ASSERT(!held);
  const bool non_graceful = d.kind == ClaimKind::takeover || d.kind == ClaimKind::reclaim;
  RC_ASSERT(d.consumes_attempt == non_graceful);
  RC_ASSERT(non_graceful == record.owner.has_value());
  const std::uint32_t expected =
      d.consumes_attempt && record.attempts != 0xffffffffu ? record.attempts + 1 : record.attempts;
  RC_ASSERT(d.attempts_after == expected);
  RC_ASSERT(d.quarantine == (d.attempts_after >= max_attempts));
  RC_ASSERT(d.delete_stale_lease == (lease && lease->owner == self && lease->nonce != nonce));
  RC_ASSERT(d.adopt_own_lease == (lease && lease->owner == self && lease->nonce == nonce));
}

}  // namespace
}  // namespace etlc::core
