// MemberApi: a member of a coordinated job as its lanes and the Driver use it.
//
// One interface, three users: Coordinator implements it (etlc/coordinator.hpp), the Driver takes
// it (etlc/driver.hpp), and tests script it (tests/driver/scripted.hpp) to drive a Driver
// through grants, revocations, losses and fenced commits without a store.
//
// Tenancies: a member holds a split in one tenancy at a time, named by its epoch
// (SplitGranted::epoch, growing per split). The split operations below take the epoch the
// caller's lane was opened for: if the member no longer holds the split in that epoch (it lost
// the split and was granted it again in a newer one), the call answers fenced and writes
// nothing, so a lane that outlived its tenancy cannot write into the next one. kAnyEpoch skips
// that check; then the caller must make sure no lane of an ended tenancy calls again (a tenancy
// ends on SplitLost and on the caller's own complete, fail, release_drained). Every operation
// answers fenced as well when the split is not held at all.
//
// Errors: losing the fence and an unreachable store are outcomes (CommitResult), never
// exceptions. A caller bug throws UsageError (etlc/errors.hpp): a progress watermark below the
// last durable one, an operation the member's state does not allow (start() twice).
//
// Thread safety: every method but start() may be called from any thread, concurrently (the split
// operations for different splits; see commit() for one split).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "etlc/events.hpp"
#include "etlc/split.hpp"
#include "etlc/split_source.hpp"

namespace etlc {

enum class CommitStatus : std::uint8_t {
  durable,    // written; the store holds it
  fenced,     // nothing was written: another member owns the split now. Stop its lane.
  retryable,  // the store could not be reached; nothing is known to be written. Retry later.
};

struct CommitResult {
  CommitStatus status = CommitStatus::retryable;
  std::string detail;  // why, for logs
  bool durable() const noexcept { return status == CommitStatus::durable; }
};

std::string_view to_string(CommitStatus s) noexcept;

// Passed as the `epoch` of a split operation: act on whatever tenancy this member holds the
// split in now, without checking it is the caller's. (Epochs start at 1.)
inline constexpr std::uint64_t kAnyEpoch = 0;

class MemberApi {
 public:
  virtual ~MemberApi() = default;

  // --- the member's life (the Driver calls these) ---

  // Joins the job and starts the member's own work (Coordinator: its control thread). At most
  // once; Driver::run() calls it before anything else (Driver::step() does not). May throw:
  // ConfigError for a configuration the job refuses (another fingerprint), anything else when
  // the member cannot start (the store unreachable past its startup wait).
  virtual void start() = 0;
  // The next event, waiting up to `timeout` for one (a member without a thread of its own may
  // return at once). Never blocks longer than `timeout`.
  virtual std::optional<Event> wait_event(std::chrono::milliseconds timeout) = 0;
  // Graceful exit: releases every split (no attempts consumed) and leaves. Idempotent. Blocks
  // until done (each store operation bounded by the store's timeout).
  virtual void shutdown() = 0;
  // Stops as if the process had crashed: nothing released, nothing written, so peers must expire
  // the session (tests and demos).
  virtual void abandon() = 0;
  // This member's stable instance id (CoordinatorConfig::instance_id).
  virtual std::string instance_id() const = 0;
  // The member's lane budget: how many splits it holds at most (CoordinatorConfig::
  // max_in_flight, 1..kMaxLanes). The Driver sizes its worker pool by it.
  virtual std::uint32_t max_in_flight() const = 0;
  // Whether the member session `session` (SplitGranted::session) is still provably live by the
  // member's own monotonic clock. Once false, false for good for that session (a rejoin opens a
  // new one). A lane asks right before each write to its sink and stops as lost when it is
  // false, without waiting for SplitLost; the Driver asks before every lane call and commit, so
  // it must be cheap (no I/O, no lock a store call holds) and never block.
  virtual bool session_live(std::uint64_t session) const = 0;

  // --- split operations (the lanes' writes, fenced by epoch: see the top of this file) ---

  // Commits the progress of a split this member holds. Watermarks never go back: one below the
  // last durable one throws UsageError. Commits of one split must not run concurrently with each
  // other (different splits may).
  virtual CommitResult commit(std::string_view split_id, const SplitProgress& progress,
                              std::uint64_t epoch) = 0;
  // Terminal commit: the split is completed with `final_progress` and released.
  virtual CommitResult complete(std::string_view split_id, const SplitProgress& final_progress,
                                std::uint64_t epoch) = 0;
  // Poison evidence: the split cannot be processed. Consumes a delivery attempt and releases the
  // split; at max_attempts it is quarantined.
  virtual CommitResult fail(std::string_view split_id, std::string_view reason,
                            std::uint64_t epoch) = 0;
  // Ends a cooperative drain (RevokeRequested) after its final commit: releases the split,
  // replay-free, without consuming an attempt.
  virtual CommitResult release_drained(std::string_view split_id, std::uint64_t epoch) = 0;
  // Dynamic splitting: makes `residual`, which the split's lane cut from its range (Lane::split),
  // a split of its own, and commits `progress` (the lane's durable progress after the cut, whose
  // state carries the new end) in the same fenced write. The residual's records are created
  // first, unclaimable, and become claimable only once this write names them, so every row is
  // read by this split or by the residual's, whatever fails where. Retry a retryable answer with
  // the same residual (and the progress now durable) before any other commit of the split: a
  // commit or completion that carried the cut without the residual would lose its rows. Throws
  // UsageError for a residual that cannot be a split (descriptor too large, progress going back,
  // the split's cut limit reached); the split must then be failed, not completed.
  virtual CommitResult split(std::string_view split_id, const SplitProgress& progress,
                             const SplitResidual& residual, std::uint64_t epoch);
  // Refuses a revocation: the release is forced now (SplitLost{revoked} follows). Ignored when
  // the split is not held, not being revoked, or (epoch != kAnyEpoch) held in another epoch than
  // RevokeRequested::epoch named, so a late answer cannot force a newer tenancy out.
  virtual void decline_revoke(std::string_view split_id, std::uint64_t epoch) = 0;
};

}  // namespace etlc
