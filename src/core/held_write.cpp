#include "core/held_write.hpp"

#include <algorithm>

#include "core/cut_rules.hpp"

namespace etlc::core {

namespace {
// The write's value where it changed the field from base, else the store's.
template <class T>
void take(T& out, const T& base, const T& next, const T& seen) {
  out = next == base ? seen : next;
}
}  // namespace

SplitRecord rebase_write(const SplitRecord& base, const SplitRecord& next,
                         const SplitRecord& seen) {
  SplitRecord out = seen;
  take(out.epoch, base.epoch, next.epoch, seen.epoch);
  take(out.status, base.status, next.status, seen.status);
  take(out.owner, base.owner, next.owner, seen.owner);
  take(out.owner_nonce, base.owner_nonce, next.owner_nonce, seen.owner_nonce);
  take(out.attempts, base.attempts, next.attempts, seen.attempts);
  take(out.weight, base.weight, next.weight, seen.weight);
  take(out.last_error, base.last_error, next.last_error, seen.last_error);
  take(out.children, base.children, next.children, seen.children);
  take(out.cut_from, base.cut_from, next.cut_from, seen.cut_from);
  // Progress in two parts: a commit that reports no `done` carries the one it was built on, which
  // must not overwrite a newer `done` of a commit of ours that landed unseen.
  if (next.progress.watermark != base.progress.watermark ||
      next.progress.state != base.progress.state) {
    out.progress.watermark = next.progress.watermark;
    out.progress.state = next.progress.state;
  }
  take(out.progress.done, base.progress.done, next.progress.done, seen.progress.done);
  // A cut of ours landed unseen (its outcome was unknown): whatever this write is, it keeps the
  // residuals the cut named (above), and the progress that carries the new end unless ahead.
  const bool cut_unseen =
      seen.children.size() > next.children.size() &&
      std::equal(next.children.begin(), next.children.end(), seen.children.begin());
  if (cut_unseen && seen.progress.watermark >= out.progress.watermark) out.progress = seen.progress;
  return out;
}

ConflictResolution resolve_held_conflict(const SplitRecord& base, const SplitRecord& next,
                                         const SplitRecord& seen, std::uint64_t epoch,
                                         std::string_view instance,
                                         const std::optional<std::string>& nonce) {
  if (seen == next) return {ConflictVerdict::landed, next};
  if (seen.epoch != epoch || seen.owner != instance || seen.owner_nonce != nonce) {
    return {ConflictVerdict::fenced, seen};
  }
  SplitRecord moved = rebase_write(base, next, seen);
  const bool names_ours = std::all_of(moved.children.begin(), moved.children.end(),
                                      [&](const std::string& c) { return names_child(seen, c); });
  // A later commit of ours carries more progress: progress never goes back, and a write that
  // changed nothing else has nothing left to write.
  if (seen.progress.watermark > moved.progress.watermark && names_ours) {
    moved.progress = seen.progress;
    if (moved == seen) return {ConflictVerdict::superseded, seen};
  }
  if (moved == seen) return {ConflictVerdict::landed, seen};
  return {ConflictVerdict::retry, std::move(moved)};
}

}  // namespace etlc::core
