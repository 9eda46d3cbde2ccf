// Planner: user code that enumerates a job's work as splits. It runs only on the elected leader,
// off the member's control loop, once per plan (final plans) or every replan_interval (open).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "etlc/split.hpp"

namespace etlc {

enum class PlanFinality : std::uint8_t {
  open,   // discovery job: re-planned every replan_interval; never completes
  final,  // bounded job: completes once every split has completed
};

struct PlannedSplit {
  SplitSpec spec;
  // Progress the split starts from the first time it is seeded (ignored if it already exists).
  std::optional<SplitProgress> seed_progress;
};

struct Plan {
  std::vector<PlannedSplit> splits;  // ids unique; at most 10^7
  PlanFinality finality = PlanFinality::final;
  // Opaque cursor handed back to the next plan() of an open plan (at most 64 KiB).
  std::optional<std::string> cursor;
};

struct PlanContext {
  std::uint64_t term = 0;             // the leader's term
  std::optional<std::string> cursor;  // the cursor the previous plan returned
  std::uint64_t existing_splits = 0;  // splits already planned for this job
};

class Planner {
 public:
  virtual ~Planner() = default;

  // A stable digest of the job's configuration (for example the input location and split
  // size). Every member of a job must return the same value; a member whose fingerprint differs
  // from the job's is refused at start. It also seeds the assignment's tie-breaks. Non-empty.
  virtual std::string fingerprint() const = 0;

  // Enumerates the work. Called on the leader from a background thread (never concurrently with
  // itself). Re-planning an open plan may return splits that already exist: they are kept as they
  // are. Throwing is allowed: the leader logs it and retries with backoff.
  virtual Plan plan(const PlanContext& context) = 0;
};

}  // namespace etlc
