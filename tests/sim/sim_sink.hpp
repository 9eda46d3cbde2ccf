// SimSink: the simulated sink database, a second store beside the coordination store, written
// through the split's epoch as a fencing token (include/etlc/sink_fence.hpp), with faults of its
// own, and the lane protocol that uses it.
//
// Per split the sink holds a fence row (the epoch it stands at, the sink's watermark), and per
// record of the planned splits how many times it was written. A residual (dynamic splitting) has
// a fence row of its own; its watermark counts from the first record of its range. Every operation
// is one transaction, atomic like a database transaction under the fence row's lock (the simulator
// runs one call at a time):
//   open(epoch)            stored epoch <= epoch: raise it, return the watermark; else refused
//   write(epoch, first, n) stored epoch == epoch and watermark == first: records first..first+n
//                          written once more, watermark += n; else refused (newer epoch) or
//                          mismatch (the watermark it holds)
//   read()                 the fence row
// Faults (during the fault phase): a transaction fails (nothing applied, the caller is told), or
// its outcome is unknown: dropped, applied, or applied late (up to 0.5 s later, re-evaluated when
// it lands, as a COMMIT still in flight when the client gave up would be).
//
// The lane protocol (SinkLane, driven by the World's lane actions): open before the first record
// and resume from the larger of the granted and the sink's watermark; write each batch; after an
// unknown outcome read the fence row before anything else (our watermark there = it landed);
// a refusal ends the lane (the World reports the split failed, which the coordination store must
// answer `fenced`).
//
// Invariants checked here (History::fail):
//   7  exactly-once sink: no record is ever written twice; at the end of a run that completes,
//      every record of every completed split was written exactly once; a write never lands above
//      the epoch the sink was opened at; a sink refusal implies the coordination store knows a
//      newer owner (the failure it leads to is answered `fenced`, never `durable`).
// With `unsafe` (a test hook) the sink checks no fence: zombies then write records twice and
// invariant 7 must catch it (SimChecker.SinkWritesWithoutTheFenceAreCaught).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "history.hpp"
#include "rng.hpp"
#include "scenario.hpp"
#include "sim_clock.hpp"
#include "trace.hpp"

namespace etlc::sim {

struct SinkStats {
  std::uint64_t opens = 0, writes = 0, records = 0;  // applied
  std::uint64_t refused = 0;                         // opens and writes refused by the fence
  std::uint64_t failed = 0, unknown = 0, late = 0;   // injected faults (late: unknown, landed late)
  std::uint64_t settled_landed = 0;                  // unknown outcomes a re-read found landed
  std::uint64_t sink_resumes = 0;                    // grants resumed above the granted watermark
  std::uint64_t lapsed_lanes = 0;                    // lanes stopped because their session lapsed
  std::uint64_t zombie_refusals = 0;                 // refusals answered `fenced` by the store
};

// One lane's side of the protocol.
struct SinkLane {
  bool opened = false;
  bool unsettled = false;          // the last write's outcome is unknown
  std::uint64_t unsettled_to = 0;  // ... it would have moved the watermark here
  bool refused = false;            // the sink refused: the lane is over (report it failed)
  std::uint64_t session = 0;       // SplitGranted::session
  std::string nonce;               // the member's session nonce when the split was granted
  std::string split;               // the split's id: its fence row
  std::size_t base = 0;            // the planned split whose records it writes ...
  std::uint64_t lo = 0;            // ... from this one on (watermark 0)
  // The lane's progress state (its end, once cut), written with every batch as a sink keeps its
  // progress; an open that resumes at the sink's watermark hands back the state stored with it.
  std::string state;
  std::optional<std::string> resumed_state;
};

class SimSink {
 public:
  enum class Status : std::uint8_t { ok, refused, mismatch, failed, unknown };

  SimSink(const RunParams& params, const VirtualTime& time, Trace& trace, History& history);

  void set_faults(bool on) { faults_on_ = on; }
  Rng& rng() { return rng_; }
  const SinkStats& stats() const { return stats_; }

  // One lane action's worth of sink work for `count` records at `next` (the lane's next record):
  // opens the sink if needed (then `next` may move up to the sink's watermark), settles an
  // unknown outcome, writes. Returns the lane's next record afterwards; `lane.refused` is set
  // when the fence refused (nothing written).
  std::uint64_t emit(std::int32_t inc, std::uint64_t epoch, SinkLane& lane, std::uint64_t next,
                     std::uint64_t count);
  // How far the lane's row may reach, counting writes whose outcome is not settled yet: a cut
  // must lie at or beyond it.
  std::uint64_t reach(const SinkLane& lane) const;
  // The lane's split failed after a refusal: `fenced` answers are expected; `durable` is a
  // violation (the sink was ahead of every grant, which this simulation never causes).
  void on_refusal_answer(const std::string& split, std::uint64_t epoch, bool durable);
  // The end of a run: every completed split's records written exactly once.
  void check_final(const History& history);
  void count_lapsed_lane() { ++stats_.lapsed_lanes; }

 private:
  struct Row {
    std::uint64_t epoch = 0;
    std::uint64_t watermark = 0;
    std::size_t base = 0;
    std::uint64_t lo = 0;
    std::string state;  // the progress state of the last batch
  };
  struct Late {
    VirtualNs at = 0;
    std::int32_t inc = -1;
    std::string split;
    std::uint64_t epoch = 0, first = 0, count = 0;
    std::string state;
  };

  // A transaction's fate under the fault model: applied now, failed, dropped, or late.
  enum class Fate : std::uint8_t { apply, fail, drop, late, apply_unknown };
  Fate fate();
  void land_due();  // applies late writes whose time has come, in order
  Status apply_open(const SinkLane& lane, std::uint64_t epoch, std::uint64_t& watermark);
  Status apply_write(std::int32_t inc, const std::string& split, std::uint64_t epoch,
                     std::uint64_t first, std::uint64_t count, const std::string& state,
                     std::uint64_t& stored);
  Status open(std::int32_t inc, const SinkLane& lane, std::uint64_t epoch,
              std::uint64_t& watermark);
  Status write(std::int32_t inc, const SinkLane& lane, std::uint64_t epoch, std::uint64_t first,
               std::uint64_t count, std::uint64_t& stored);
  void note(std::int32_t inc, const std::string& what);

  const RunParams& p_;
  const VirtualTime& time_;
  Trace& trace_;
  History& history_;
  Rng rng_;
  bool faults_on_ = true;
  std::map<std::string, Row> rows_;
  std::vector<std::vector<std::uint32_t>> copies_;  // per planned split, per record
  std::vector<Late> late_;
  SinkStats stats_;
};

}  // namespace etlc::sim
