// SplitSource and Lane: the user code that processes granted splits, as the Driver runs it.
//
// A SplitSource opens one Lane per split this member is granted. A lane reads its split in
// bounded steps and hands what it reads to the pipeline's sink; the Driver asks it for its
// durable progress (what the sink has made durable, never more) on the commit interval and at
// the end of the split, and commits that progress through the fence. A lane can be asked to
// drain (the leader moved the split, or the process is shutting down): it stops intake at a safe
// boundary, finishes the tail, and reports its final durable progress, or declines.
//
// The contract the Driver keeps, which is all a lane may rely on:
//  * Every call on one Lane (step, durable_progress, drain, close) comes from one thread at a
//    time, never concurrently; consecutive calls may come from different worker threads.
//  * close() is called exactly once, last; the lane is destroyed right after.
//  * After the split is lost (another member owns it now), the lane gets no call but close():
//    what it wrote since its last commit will be replayed by the next owner.
//  * A step in progress is never interrupted, but LaneContext::stop says when the lane should
//    give up early (loss, crash or shutdown); a long step should check it.
//
// Delivery is at-least-once: a lane resumes from the last committed progress, so rows past it
// that a previous owner had already written are written again. Sinks must tolerate replays, or
// be fenced (etlc/sink_fence.hpp, DriverOptions::sink_fence): then every row is written once.
//
// A lane stops writing the moment its member's session may have lapsed: the Driver checks
// before every step(), durable_progress() and commit, and a lane that writes to its sink inside
// step() checks LaneContext::live right before the sink commit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "etlc/split.hpp"

namespace etlc {

// Everything a lane needs to start: the split, its tenancy and where to resume.
struct LaneContext {
  SplitSpec spec;
  // The split's ownership epoch for this tenancy: unique per (split, owner tenancy), growing.
  // A sink that writes per-tenancy output (a file per epoch) names it with this.
  std::uint64_t epoch = 0;
  // The durable progress to resume from (watermark 0 and empty state for a fresh split).
  SplitProgress resume;
  // The member (instance id) that owns the split.
  std::string instance_id;
  // Requested when the lane must stop as soon as it can (loss, crash, shutdown deadline).
  std::stop_token stop;
  // True while the member session this tenancy belongs to is provably live by the member's clock
  // (Coordinator::session_live). Once false, false for good: write nothing more and return from
  // the step (the Driver then closes the lane as lost). Cheap (one clock read); callable from
  // the lane's calls only. Null when the lane is opened outside a Driver.
  std::function<bool()> live;
};

// What one bounded step did.
struct StepResult {
  enum class Status : std::uint8_t {
    more,          // there is more to read: step again
    end_of_split,  // everything was read and handed to the sink: the split is done
    poison,        // the split cannot be processed (reason says why): consume an attempt
    fenced,        // the sink refused a batch: its fence stands at a newer epoch (sink_fence.hpp)
  };
  Status status = Status::more;
  std::string reason;  // for poison: shown in logs and stored as the split's last error

  static StepResult more() { return {Status::more, {}}; }
  static StepResult end() { return {Status::end_of_split, {}}; }
  static StepResult poisoned(std::string why) { return {Status::poison, std::move(why)}; }
  static StepResult fenced(std::string why) { return {Status::fenced, std::move(why)}; }
};

// What a lane gives up when it splits itself (Lane::split): the unread tail of its range, as the
// descriptor of a new split and that split's weight. The descriptor is opaque to the library,
// like every planned descriptor; the new split is opened by this same SplitSource.
struct SplitResidual {
  std::string descriptor;    // at most kMaxDescriptorBytes
  std::uint64_t weight = 0;  // in the planned weights' units

  friend bool operator==(const SplitResidual&, const SplitResidual&) = default;
};

// Why a lane ends (the argument of Lane::close).
enum class LaneEnd : std::uint8_t {
  completed,  // end of split, and the completion was committed
  drained,    // drained and released to the next owner with its final progress committed
  lost,       // the split was lost (fenced, revoked by force, session gone or lapsed): discard
  failed,     // the lane reported poison (or threw) and the split was failed
  shutdown,   // the member is shutting down; the split was released
  aborted,    // the process is crashing (test and demo hook): nothing was committed or released
};

std::string_view to_string(LaneEnd end) noexcept;

// One split being processed. See the contract at the top of this file.
class Lane {
 public:
  virtual ~Lane() = default;

  // Reads a bounded amount of the split (bounded in time and memory: the Driver commits and
  // reacts to revocations only between steps) and hands it to the sink. Throwing counts as
  // poison with the exception's message.
  virtual StepResult step() = 0;

  // The progress the sink has made durable: everything at or below it survives a crash of this
  // process. A lane whose sink flushes on demand flushes (and fsyncs) here. Must never go below
  // the resume progress or a previous answer. Throwing counts as poison.
  virtual SplitProgress durable_progress() = 0;

  // Asked to give the split up: stop intake at a safe boundary, make the tail durable and return
  // the final durable progress, or return nullopt to decline (the release is then forced and the
  // uncommitted tail is replayed by the next owner). The default stops between two steps, which
  // is a safe boundary for a lane that hands records over synchronously.
  virtual std::optional<SplitProgress> drain() { return durable_progress(); }

  // Optional (dynamic splitting, docs/work-assignment.md "Splitting a split under way"): asked to
  // give the unread tail of the split to another lane, cut at or after `keep` (0 < keep < 1) of
  // the work this lane has not read yet. A lane that can: picks a cut beyond everything it has
  // read and handed to its sink, shrinks its own range to end there, and returns the rest. From
  // then on durable_progress() must carry the new end in its state (SplitProgress::state, even
  // when nothing else is new), so a lane resumed from it stops at the cut; the Driver commits
  // that progress in the same fenced write that creates the residual's split, before the next
  // step() (so write the new end to a sink in step(), never in split()). If that write never lands
  // (the split is lost first), the next owner resumes from the progress before the cut and reads
  // the whole range: nothing is lost. A lane whose sink keeps its progress (SinkFence) must not cut
  // while a batch may still land there (an unknown outcome not settled yet): that batch would
  // carry the old end, and a lane resumed from the sink's progress would read past the cut.
  // Settle it first (read the sink's progress) or decline. The default declines (nullopt), as
  // does a lane too near its end to cut. Throwing declines too.
  virtual std::optional<SplitResidual> split(double keep) {
    (void)keep;
    return std::nullopt;
  }

  // Called once, last. `end` says why; after `lost` or `aborted` nothing more will be committed
  // for this tenancy, so the lane may drop buffered output.
  virtual void close(LaneEnd end) { (void)end; }
};

// Opens lanes. One per Driver, shared by its worker threads.
class SplitSource {
 public:
  virtual ~SplitSource() = default;

  // Opens a lane for a granted split. Called from worker threads, possibly concurrently for
  // different splits (never twice at once for the same split). Throwing counts as poison: the
  // split is failed with the exception's message.
  virtual std::unique_ptr<Lane> open(const LaneContext& context) = 0;
};

}  // namespace etlc
