// The completion verdict of a plan, from its finality and its tallies. Pure; thread-safe.
//
//   open plan                                  => running (an open plan never completes)
//   final plan, completed == planned           => complete (a final plan of 0 splits is complete)
//   final plan, completed + quarantined == planned and quarantined > 0
//                                              => stalled (quarantine blocks completion: a
//                                                 success over unprocessed data would hide loss)
//   otherwise                                  => running
//
// Inconsistent tallies (completed + quarantined > planned, computed without overflow) are a bug
// in whoever counted, for open and final plans alike: ConfigError ("invalid arguments"), never a
// verdict — declaring anything over counts that cannot be right would be a guess.
#pragma once

#include <cstdint>

#include "core/records.hpp"

namespace etlc::core {

Verdict completion_verdict(Finality finality, std::uint64_t planned, std::uint64_t completed,
                           std::uint64_t quarantined);

// The same over a plan record's tallies (planned = split_count).
inline Verdict completion_verdict(const PlanRecord& plan) {
  return completion_verdict(plan.finality, plan.split_count, plan.completed, plan.quarantined);
}

}  // namespace etlc::core
