// See nats_create.hpp.
#include "store/nats/nats_create.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>

namespace etlc::nats_detail {

namespace {

// A create retries while the key's delete marker keeps changing under it (concurrent deletes
// of re-created keys); each retry follows a write by someone else.
constexpr int kMaxCreateAttempts = 8;

// After a publish guarded by `expected` failed with `failed`: the create's result when it is
// decided (the key is live), else nullopt with `expected` set to the guard of the next attempt.
std::optional<WriteResult> judge_failed(Core& core, std::string_view key, std::uint64_t& expected,
                                        const Published& failed, std::string_view what) {
  // The subject has a message: a live value (we lose) or a delete marker (re-try guarded by
  // the marker's revision, so a concurrent create still wins exactly once).
  const std::uint64_t last = failed.last_revision;
  if (last != 0 && core.live_revisions().contains(last)) return WriteResult{false, last};
  if (last != 0 && last != expected && core.delete_markers().contains(last)) {
    expected = last;  // a known delete marker: re-try over it without a read
    return std::nullopt;
  }
  core.count_guard_read();
  LastMessage current = core.read_last(key, what);
  if (current.live()) return WriteResult{false, current.revision};
  expected = current.exists ? current.revision : 0;
  return std::nullopt;
}

// Publishes guarded by `expected` until the create is decided, at most `attempts` times.
WriteResult create_attempts(Core& core, std::string_view key, std::string_view value,
                            std::uint64_t expected, int attempts, const std::string& what) {
  for (int attempt = 0; attempt < attempts; ++attempt) {
    Published p = core.publish(key, value, expected, false, what);
    if (p.ok) {
      core.live_revisions().insert(p.revision);
      return WriteResult{true, p.revision};
    }
    if (auto decided = judge_failed(core, key, expected, p, what)) return *decided;
  }
  throw StoreError(StoreErrc::unavailable,
                   fmt::format("{}: the key was deleted and re-created concurrently {} times; "
                               "nothing was written, retry",
                               what, kMaxCreateAttempts));
}

}  // namespace

WriteResult create_key(Core& core, std::string_view key, std::string_view value) {
  // Over a delete marker this process saw, publish guarded by it at once (one round trip); a
  // stale hint fails on the real last sequence and takes the general path.
  return create_attempts(core, key, value, core.marker_hints().get(key), kMaxCreateAttempts,
                         fmt::format("create '{}'", key));
}

WriteResult finish_create(Core& core, std::string_view key, std::string_view value,
                          std::uint64_t expected, const Published& failed) {
  const std::string what = fmt::format("create '{}'", key);
  if (auto decided = judge_failed(core, key, expected, failed, what)) return *decided;
  // The failed publish was the first of the kMaxCreateAttempts a create makes.
  return create_attempts(core, key, value, expected, kMaxCreateAttempts - 1, what);
}

}  // namespace etlc::nats_detail
