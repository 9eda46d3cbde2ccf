#include "core/claim_rules.hpp"

#include <limits>

namespace etlc::core {

namespace {

void check_max_attempts(std::uint32_t max_attempts) {
  if (max_attempts == 0) {
    throw ConfigError("max_attempts must be at least 1 (0 would quarantine every split)");
  }
}

std::uint32_t plus_one(std::uint32_t attempts) {
  return attempts == std::numeric_limits<std::uint32_t>::max() ? attempts : attempts + 1;
}

}  // namespace

ClaimDecision decide_claim(const SplitRecord& record, const std::optional<LeaseRecord>& lease,
                           std::string_view self_instance, std::string_view self_nonce,
                           std::uint32_t max_attempts) {
  check_max_attempts(max_attempts);
  ClaimDecision d;
  d.attempts_after = record.attempts;
  if (record.status != SplitStatus::runnable) {
    d.refusal = ClaimRefusal::terminal;
    return d;
  }
  const bool owner_is_self = record.owner && *record.owner == self_instance;
  if (owner_is_self && record.owner_nonce && *record.owner_nonce == self_nonce) {
    d.refusal = ClaimRefusal::already_held;
    return d;
  }
  if (lease) {
    if (lease->owner != self_instance) {
      d.refusal = ClaimRefusal::foreign_lease;
      return d;
    }
    if (lease->nonce == self_nonce) {
      d.adopt_own_lease = true;
    } else {
      d.delete_stale_lease = true;
    }
  }
  if (!record.owner) {
    d.kind = record.epoch == 0 ? ClaimKind::fresh : ClaimKind::released;
  } else if (owner_is_self) {
    d.kind = ClaimKind::reclaim;
  } else {
    d.kind = ClaimKind::takeover;
  }
  d.consumes_attempt = d.kind == ClaimKind::reclaim || d.kind == ClaimKind::takeover;
  if (d.consumes_attempt) d.attempts_after = plus_one(record.attempts);
  d.quarantine = d.attempts_after >= max_attempts;
  return d;
}

LeaseStep decide_lease_step(const std::optional<LeaseRecord>& lease, std::string_view self_instance,
                            std::string_view self_nonce, bool owner_live_in_view) {
  if (!lease || (lease->owner == self_instance && lease->nonce == self_nonce)) {
    return LeaseStep::proceed;
  }
  // An earlier process of this instance: its session is gone once ours exists, so its lease is
  // dead (the point read confirms). Another member's: wait while its session looks live.
  const bool ours_before = lease->owner == self_instance;
  return !ours_before && owner_live_in_view ? LeaseStep::wait : LeaseStep::clear_dead;
}

bool lease_is_orphan(const LeaseRecord& lease, const SplitRecord& record) {
  const bool names_owner = record.owner && *record.owner == lease.owner && record.owner_nonce &&
                           *record.owner_nonce == lease.nonce;
  return !names_owner;
}

ClaimPlan plan_claim(const SplitRecord& record, const ClaimFacts& facts) {
  ClaimPlan p;
  p.decision =
      decide_claim(record, std::nullopt, facts.self_instance, facts.self_nonce, facts.max_attempts);
  ClaimDecision& d = p.decision;
  if (d.refusal == ClaimRefusal::terminal) {
    p.action = ClaimAction::retry_later;
    return p;
  }
  if (d.refusal != ClaimRefusal::none && d.refusal != ClaimRefusal::already_held) return p;
  if (d.kind == ClaimKind::takeover && facts.owner_session_unsure) return p;  // skip: ask again
  const bool waived = (d.kind == ClaimKind::reclaim && facts.owner_nonce_benign) ||
                      (d.kind == ClaimKind::takeover && facts.owner_session_live);
  if (waived) {
    d.consumes_attempt = false;
    d.attempts_after = record.attempts;
    d.quarantine = false;
  }
  const bool adopt = d.refusal == ClaimRefusal::already_held;
  p.epoch = adopt ? record.epoch : record.epoch + 1;
  if (facts.spec_problem) {
    p.action = ClaimAction::park;
  } else if (adopt) {
    p.action = ClaimAction::adopt;
  } else {
    p.action = d.quarantine ? ClaimAction::quarantine : ClaimAction::claim;
  }
  return p;
}

FailDecision decide_fail(const SplitRecord& record, std::uint32_t max_attempts) {
  check_max_attempts(max_attempts);
  const std::uint32_t after = plus_one(record.attempts);
  return FailDecision{after, after >= max_attempts};
}

std::string_view to_string(ClaimKind k) noexcept {
  switch (k) {
    case ClaimKind::fresh:
      return "fresh";
    case ClaimKind::released:
      return "released";
    case ClaimKind::reclaim:
      return "reclaim";
    case ClaimKind::takeover:
      return "takeover";
  }
  return "unknown";
}

std::string_view to_string(ClaimRefusal r) noexcept {
  switch (r) {
    case ClaimRefusal::none:
      return "none";
    case ClaimRefusal::terminal:
      return "terminal";
    case ClaimRefusal::foreign_lease:
      return "foreign_lease";
    case ClaimRefusal::already_held:
      return "already_held";
  }
  return "unknown";
}

}  // namespace etlc::core
