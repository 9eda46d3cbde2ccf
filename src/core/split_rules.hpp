// Which splits the leader asks to split (issue 17, decision 0013; proposed protocol, of which this
// is the first part built: the pure decision, not yet called by the runtime). When lanes in the
// fleet are free and nothing is queued, the job's end waits on the splits still running; cutting
// the ones that would end last hands their unread halves to the free lanes. Bounded: at most one
// outstanding request per split, never a residual below the minimum, at most a cap of children
// per split and of dynamic splits per job. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace etlc::core {

// A runnable split under way, as the leader sees it.
struct SplitCandidate {
  std::string id;                                    // unique among candidates
  std::uint64_t remaining = 0;                       // its remaining weight (core/remaining_work)
  std::optional<std::uint64_t> pace = std::nullopt;  // weight per 1000 s (core/lane_pace), if known
  std::uint32_t children = 0;                        // residuals already cut from it
  bool requested = false;                            // a request to split it is outstanding
};

struct SplitLimits {
  std::uint64_t min_residual_weight = 1;  // >= 1: a residual (and what the parent keeps) at least
  std::uint32_t max_children_per_split = 0;
  std::uint64_t max_dynamic_splits = 0;     // per job, residuals in all
  std::uint64_t dynamic_splits_so_far = 0;  // residuals the job has already
};

// Split the named split, giving up fraction_ppm / 10^6 of its remaining work.
struct SplitRequest {
  std::string id;
  std::uint32_t fraction_ppm = 500'000;
  friend bool operator==(const SplitRequest&, const SplitRequest&) = default;
};

// The requests to make now, longest expected finish first: none while any split is queued or no
// lane is free. Each free lane not already promised to an outstanding request, within the job's
// cap, goes to one eligible candidate (not requested, under its children cap, and with at least
// twice min_residual_weight left, so both halves meet the minimum). Candidates with a known pace
// rank by remaining / pace (a stalled one, pace 0, first), ahead of those of unknown pace, which
// rank by remaining; ties by id. The result depends on the set of candidates, not their order.
// Throws ConfigError if min_residual_weight is 0 or candidate ids repeat.
std::vector<SplitRequest> split_requests(std::span<const SplitCandidate> candidates,
                                         std::uint64_t free_lanes, std::uint64_t queued,
                                         const SplitLimits& limits);

// Whether a candidate may be asked to split under `limits` (the eligibility above).
bool splittable(const SplitCandidate& c, const SplitLimits& limits) noexcept;

}  // namespace etlc::core
