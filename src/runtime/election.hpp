// Election: the way a member becomes leader. It creates job.leader (create-if-absent: one
// winner), then bumps job.plan's term by CAS before anything else: that CAS is the leader fence.
// A deposed leader's plan write loses it; its assignment records carry the old term, which
// workers ignore. Every new term is above every term seen in a leader, plan or assignment record,
// so a plan record deleted or destroyed cannot hand out a term some leader already held.
//
// A leader record of this very session that it does not act on (an election whose create had an
// unknown outcome, or whose term-taking failed half-way) is finished rather than waited out:
// nobody else can be elected while our session lives. There is no leaderless fallback: without
// a leader nothing is rebalanced and every member keeps what it holds.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/fleet_views.hpp"
#include "runtime/member_context.hpp"

namespace etlc::runtime {

struct Election {
  enum class Kind : std::uint8_t {
    none,     // someone else leads, a race was lost, or the views are not ready: not leading
    elected,  // this session leads `term`; job.leader is at `leader_rev`
    fatal,    // the plan belongs to another job configuration (message says so)
  };
  Kind kind = Kind::none;
  std::uint64_t term = 0;
  Revision leader_rev = 0;
  std::string message;
};

// Runs (or finishes) an election for the session `nonce`. Store errors propagate (the member is
// then not leading; a later step finishes the election from its own record).
Election run_election(const MemberContext& ctx, FleetViews& views, const std::string& nonce);

}  // namespace etlc::runtime
