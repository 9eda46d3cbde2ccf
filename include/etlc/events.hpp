// Events a member reports to user code through Coordinator::poll().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <variant>

#include "etlc/split.hpp"

namespace etlc {

// This member now owns the split: open a lane and resume from `progress`.
struct SplitGranted {
  SplitSpec spec;
  // The tenancy: unique per (split, tenancy), growing. Name it in every call for this lane, and
  // give it to a fenced sink (etlc/sink_fence.hpp) as the fencing token.
  std::uint64_t epoch = 0;
  SplitProgress progress;
  // The member session this tenancy belongs to: ask Coordinator::session_live(session) before
  // writing for it (it turns false for good once that session may have lapsed).
  std::uint64_t session = 0;
};

// The leader moved the split elsewhere: stop intake at a safe boundary, commit the final
// progress, then call release_drained(); or decline_revoke() to have it forced at once.
// If neither happens within drain_deadline, SplitLost{revoked} follows.
struct RevokeRequested {
  std::string split_id;
  std::chrono::milliseconds drain_deadline{0};
  std::uint64_t epoch = 0;  // the tenancy being revoked (SplitGranted::epoch); pass it on
};

// The leader asks this member to split a split it holds (dynamic splitting): lanes elsewhere are
// idle and this split would end last. Ask the lane (Lane::split(keep)) and, if it cuts, call
// split() with the residual; ignoring the request is always safe. The Driver does all of this.
struct SplitRequested {
  std::string split_id;
  std::uint64_t epoch = 0;  // the tenancy the request names (SplitGranted::epoch); pass it on
  double keep = 0.5;        // keep at least this fraction of the remaining work (0 < keep < 1)
};

enum class LossReason : std::uint8_t {
  fenced,           // a commit lost the fence: another member owns a newer epoch
  revoked,          // a revocation was declined or outran drain_deadline (forced)
  starved,          // this member could not renew its session in time and stopped its lanes
  session_expired,  // peers expired this member's session
  twin,             // another live process uses this instance id
  shutdown,         // the coordinator shut down before the split was released
};

// The split is gone: stop its lane at once and never commit for it again. Uncommitted work
// will be replayed by the next owner.
struct SplitLost {
  std::string split_id;
  LossReason reason = LossReason::fenced;
};

// A split reached max_attempts non-graceful ends and was parked.
struct SplitQuarantined {
  std::string split_id;
  std::uint32_t attempts = 0;
};

// Every split of a final plan completed. Drain and exit.
struct AllComplete {
  std::uint64_t completed = 0;
};

// The job cannot go on: a final plan whose remaining splits are all quarantined, or (message
// non-empty) a job whose planner failed CoordinatorConfig::max_planner_failures times in a row.
struct Stalled {
  std::uint64_t completed = 0;
  std::uint64_t quarantined = 0;
  // Empty for a quarantine stall. Otherwise why the job failed: the planner's last error and
  // what the operator can do ("etlc resume" plans again).
  std::string message;
};

// This member cannot go on (twin instance id, fingerprint mismatch, unsafe store). The message
// says why; the coordinator has stopped.
struct Fatal {
  std::string message;
};

using Event = std::variant<SplitGranted, RevokeRequested, SplitLost, SplitQuarantined, AllComplete,
                           Stalled, Fatal, SplitRequested>;

std::string_view to_string(LossReason reason) noexcept;

}  // namespace etlc
