// Repair rules: how a member rebuilds what a stray writer destroyed, and the bounds it holds a
// peer's advertised session to. Pure decisions; the runtime executes them (healing.cpp).
//
// The protocol never deletes a plan or split record and never writes a record that does not
// decode, so an unreadable or missing one is damage done from outside (an operator, a foreign
// tool, a newer library). Whatever the store holds, a job either makes progress or ends in a
// named state (docs/architecture.md, "No store state stalls a job"). The rules here:
//
//  * A split record is rebuilt at an epoch far above every epoch its tenancies can have reached,
//    so whoever still holds the old record is fenced on its next write, and a sink that fences on
//    the epoch (docs/exactly-once.md) sees it move up. Its progress is the last one the rebuilder
//    saw: never ahead of what was durable, so the rows after it are replayed, never lost.
//  * A split whose spec cannot be read is parked (quarantined, attempts unchanged) with a reason
//    that names the record and the repair; the leader requeues it once a re-plan rewrote the spec.
//    The claimer first erases the unreadable value at the revision it read, which proves the
//    damage current (a stale read must not park a split whose spec was repaired).
//  * A peer's session is judged within bounds derived from the observer's own configuration: a
//    lane budget outside 1..kMaxLanes gets no lanes, and the lease it advertises is clamped to
//    [own lease / 4, own lease x 4], so a forged record cannot hold work for a day.
//
// All functions are pure and thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/records.hpp"
#include "etlc/split.hpp"

namespace etlc::core {

// How far above anything seen a rebuilt epoch lands: more claims than this cannot have happened
// unseen between the rebuilder's last look and the damage. Small against a term's 2^32 epochs, so
// that the rebuilds and claims of one term (fewer than 2^16 rebuilds of one split) stay below the
// next term's floor, which a rebuild without memory relies on (decision 0008, amendment 2).
inline constexpr std::uint64_t kRebuildEpochStep = std::uint64_t{1} << 16;

// The epoch of a rebuilt split record: kRebuildEpochStep above the largest of the epoch of the
// last readable record seen (0 if none), the epoch its lease names (0 if none) and term << 32
// (which keeps a rebuild made without any memory of the split above earlier terms' claims).
// Saturates at the largest uint64.
std::uint64_t rebuilt_epoch(std::uint64_t last_seen_epoch, std::uint64_t lease_epoch,
                            std::uint64_t term);

// The last readable record, re-issued at `epoch` with its owner cleared: status, weight,
// attempts, progress and last_error as they were.
SplitRecord rebuild_from_record(const SplitRecord& last, std::uint64_t epoch);

// A runnable record at `epoch` with no progress, from the split's spec (nothing else is known).
SplitRecord rebuild_from_spec(const SplitSpec& spec, std::uint64_t epoch);

// The reason a split parked for its spec carries (SplitRecord::last_error), and the record:
// quarantined, owner cleared, attempts and progress unchanged. `problem` names the record and
// what is wrong with it; the reason adds the repair.
inline constexpr std::string_view kSpecProblemPrefix = "spec unusable: ";
SplitRecord park_for_spec(const SplitRecord& record, std::string_view problem);
// The epoch of a split record the leader creates while seeding. In the job's first term no
// record can have existed before: 0. In a later term the planner's split may have been seeded,
// claimed and then deleted before this leader's views existed (an operator's delete nobody now
// remembers): it starts as a rebuild with no memory would, above every earlier term's epochs.
std::uint64_t seeded_epoch(std::uint64_t term, std::uint64_t lease_epoch);

// True for a record parked by park_for_spec (quarantined, reason with kSpecProblemPrefix).
bool parked_for_spec(const SplitRecord& record);

// The record quarantined by the claim that found `attempts` reach the cap: owner cleared. A
// last_error left by an earlier park (the split was requeued since) is replaced, so the
// quarantine is never taken for a park that a re-plan requeues.
SplitRecord quarantine_for_attempts(const SplitRecord& record, std::uint32_t attempts);

// What an observer grants a peer whose session record says `rec`.
struct PeerBounds {
  std::uint32_t lanes = 0;             // the lane budget to balance against (0 if refused)
  std::chrono::milliseconds lease{0};  // how long its record may stay unchanged
  bool lanes_refused = false;          // max_in_flight outside 1..kMaxLanes
  bool lease_clamped = false;          // lease_ms outside [own / 4, own x 4]
};
PeerBounds bound_peer(const MemberRecord& rec, std::chrono::milliseconds own_lease);

}  // namespace etlc::core
