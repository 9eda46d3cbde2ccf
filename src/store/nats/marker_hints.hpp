// MarkerHints: for recently deleted keys, the revision of the delete marker this process saw
// (its own erase, or a watch event). create() over a deleted key publishes "expected last
// sequence = marker" at once: one round trip instead of two (an "expected 0" publish that fails
// on the marker, then the guarded retry).
//
// A hint is only ever a guess: a stale one makes the publish fail on the real last sequence,
// and create() falls back to its general path, so correctness never depends on it. Bounded:
// past `capacity` keys the oldest is forgotten. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "etlc/detail/mutex.hpp"

namespace etlc::nats_detail {

class MarkerHints {
 public:
  explicit MarkerHints(std::size_t capacity);

  // Records that `key`'s delete marker has `revision` (the highest seen wins).
  void note(std::string_view key, std::uint64_t revision) ETLC_EXCLUDES(mu_);
  // The last marker revision noted for `key`, or 0.
  std::uint64_t get(std::string_view key) const ETLC_EXCLUDES(mu_);
  std::size_t size() const ETLC_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::unordered_map<std::string, std::uint64_t> hints_ ETLC_GUARDED_BY(mu_);
  std::vector<std::string> ring_ ETLC_GUARDED_BY(mu_);  // keys in insertion order, for eviction
  std::size_t next_ ETLC_GUARDED_BY(mu_) = 0;
};

}  // namespace etlc::nats_detail
