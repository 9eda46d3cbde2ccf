// The rules the leader's assignment input and every reader of assignment records share, so the
// leader (runtime/publish.cpp), the workers (runtime/worker.cpp) and the operator's view
// (admin/job_status.cpp) cannot drift apart. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/records.hpp"

namespace etlc::core {

// An assignment record is an instruction only when written at the plan's term or later: one of
// a lower term is a deposed leader's and counts as no record at all (hold what you have).
inline bool assignment_in_force(std::uint64_t record_term, std::uint64_t plan_term) {
  return record_term >= plan_term;
}

// The lane budget the leader balances a member against: 0 when its session belongs to another
// job configuration (fingerprint), when it is cordoned, or when the budget it advertises lies
// outside 1..kMaxLanes (a forged or corrupt record, repair_rules.hpp); else its max_in_flight.
std::uint32_t lane_budget(const MemberRecord& session, std::string_view job_fingerprint,
                          bool cordoned);

}  // namespace etlc::core
