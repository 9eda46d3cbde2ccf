#include "core/repair_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "etlc/config.hpp"

namespace etlc::core {

std::uint64_t rebuilt_epoch(std::uint64_t last_seen_epoch, std::uint64_t lease_epoch,
                            std::uint64_t term) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t term_floor = term >= (kMax >> 32) ? kMax - kRebuildEpochStep : term << 32;
  const std::uint64_t base = std::max({last_seen_epoch, lease_epoch, term_floor});
  return base > kMax - kRebuildEpochStep ? kMax : base + kRebuildEpochStep;
}

SplitRecord rebuild_from_record(const SplitRecord& last, std::uint64_t epoch) {
  SplitRecord r = last;
  r.epoch = epoch;
  r.owner.reset();
  r.owner_nonce.reset();
  return r;
}

SplitRecord rebuild_from_spec(const SplitSpec& spec, std::uint64_t epoch) {
  SplitRecord r;
  r.id = spec.id;
  r.epoch = epoch;
  r.weight = spec.weight;
  return r;
}

SplitRecord park_for_spec(const SplitRecord& record, std::string_view problem) {
  SplitRecord r = record;
  r.status = SplitStatus::quarantined;
  r.owner.reset();
  r.owner_nonce.reset();
  r.last_error = fmt::format(
      "{}{}; the leader re-plans to rewrite it and requeues the split if the planner still lists "
      "it (otherwise restore spec.{} and run `etlc requeue {}`)",
      kSpecProblemPrefix, problem, record.id, record.id);
  return r;
}

std::uint64_t seeded_epoch(std::uint64_t term, std::uint64_t lease_epoch) {
  if (term <= 1 && lease_epoch == 0) return 0;
  return rebuilt_epoch(0, lease_epoch, term);
}

SplitRecord quarantine_for_attempts(const SplitRecord& record, std::uint32_t attempts) {
  SplitRecord r = record;
  r.status = SplitStatus::quarantined;
  r.attempts = attempts;
  r.owner.reset();
  r.owner_nonce.reset();
  if (r.last_error && r.last_error->rfind(kSpecProblemPrefix, 0) == 0) {
    r.last_error = fmt::format("quarantined after {} delivery attempts", attempts);
  }
  return r;
}

bool parked_for_spec(const SplitRecord& record) {
  return record.status == SplitStatus::quarantined && record.last_error &&
         record.last_error->rfind(kSpecProblemPrefix, 0) == 0;
}

PeerBounds bound_peer(const MemberRecord& rec, std::chrono::milliseconds own_lease) {
  PeerBounds b;
  b.lanes_refused = rec.max_in_flight < 1 || rec.max_in_flight > kMaxLanes;
  b.lanes = b.lanes_refused ? 0 : rec.max_in_flight;
  const std::chrono::milliseconds low = own_lease / 4;
  const std::chrono::milliseconds high = own_lease * 4;
  const auto advertised = std::chrono::milliseconds(static_cast<std::int64_t>(
      std::min<std::uint64_t>(rec.lease_ms, std::numeric_limits<std::int64_t>::max() / 2)));
  b.lease = std::clamp(advertised, low, high);
  b.lease_clamped = b.lease != advertised;
  return b;
}

}  // namespace etlc::core
