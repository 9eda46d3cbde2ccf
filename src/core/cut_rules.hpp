// The rules of a cut (dynamic splitting, docs/work-assignment.md "Splitting a split under way"):
// the child's id, its pending record, the parent's record after the cut, and what the leader
// does with a pending child. Pure and thread-safe.
//
// The order of writes that makes a cut safe (HeldSplits::split): the owner of the parent, in its
// tenancy at epoch E, creates spec.{child} and split.{child} (pending, cut_from {parent, E}), then
// CASes split.{parent} to name the child, with the progress that carries the parent's new end.
// The leader makes a pending child runnable only once its parent's record names it, so a child
// exists before the cut is durable, and is claimable only after.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/records.hpp"

namespace etlc::core {

// The largest n of a residual's id (two digits: kMaxChildrenPerSplit, plus the few a tenancy
// skips past its own cuts that never landed).
inline constexpr std::size_t kMaxChildNumber = 99;

// "{parent}~{epoch}.{n}": deterministic for the n-th cut (1-based) made in that tenancy, and
// unique, since an epoch names one tenancy. Throws ConfigError when n is outside
// 1..kMaxChildNumber or the id would exceed kMaxSplitIdBytes (a split cut so often that its
// descendants' ids no longer fit).
std::string child_split_id(std::string_view parent, std::uint64_t epoch, std::size_t n);

// Whether `id` ends in "~{digits}.{digits}", the form child_split_id gives. Planned ids may not
// (the leader refuses such a plan), so a residual's id never collides with a planned split's.
bool residual_id_form(std::string_view id) noexcept;

// The origin a residual's id names ("{parent}~{epoch}.{n}": the parent and the cutting tenancy);
// nullopt for an id not of that form.
std::optional<SplitOrigin> residual_origin(std::string_view id);

// A residual's record rebuilt from its spec alone (its record lost, nothing else known of it):
// runnable only if its parent's record (null: not known) names it, pending otherwise, so that it
// is claimable only once named, as a residual cut afresh (sim operator 318).
SplitRecord rebuild_residual(const SplitSpec& spec, const SplitOrigin& origin, std::uint64_t epoch,
                             const SplitRecord* parent);

// A residual cut from a parent, with its spec as read (nullopt: absent or unreadable).
struct CutSeen {
  std::string child;
  std::optional<SpecRecord> spec;
};

// A parent's record rebuilt from its spec (`rebuilt`: no progress, its planned weight) whose lost
// record had cut `cuts` (in cut order): names every one, lowers its weight by each readable
// residual's, and resumes from the parent progress the last readable cut recorded, whose state
// carries the parent's end at that cut (sim operator 23281). Cuts after the last readable one
// are named but their rows are also the parent's again (replayed, never lost). Returns how many
// cuts at the end had no usable spec.
std::size_t apply_cuts(SplitRecord& rebuilt, const std::vector<CutSeen>& cuts);

// A residual's record rebuilt with neither its record nor its spec (both damaged) while its
// parent names it: no planner lists a residual, so nothing can rewrite its descriptor. It is
// parked for its spec (`problem`), so the job ends stalled naming the record to restore.
SplitRecord park_residual_without_spec(const std::string& id, const SplitOrigin& origin,
                                       std::uint64_t epoch, std::string_view problem);

// Whether the next cut of `parent` (at most 20 digits of epoch, 2 of n) has an id that fits.
bool child_id_fits(std::string_view parent) noexcept;

// The pending record of a residual of `weight` cut from `origin`.
SplitRecord pending_child(const std::string& child, std::uint64_t weight, SplitOrigin origin);

// The parent's record after a cut: `progress` (set as a commit sets it), `child` named, and its
// weight lowered by the residual's (never below 0).
SplitRecord cut_parent(const SplitRecord& parent, const SplitProgress& progress,
                       const std::string& child, std::uint64_t residual_weight);

// What the leader does with a pending child, given its parent's record (null: not known).
enum class ChildFate : std::uint8_t {
  wait,    // the tenancy that cut it may still name it (or the parent is not known)
  flip,    // its parent's record names it: make it runnable
  orphan,  // the tenancy that cut it is over without naming it: it can never be named; delete it
};
ChildFate pending_child_fate(const SplitRecord& child, const SplitRecord* parent);

// Whether `parent` names `child` among its children.
bool names_child(const SplitRecord& parent, std::string_view child) noexcept;

}  // namespace etlc::core
