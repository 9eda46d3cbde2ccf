// RevisionSet: a bounded memory of revisions known to be those of live values (not delete
// markers), so a CAS or guarded delete can skip the guard read (see etlc/nats_store.hpp).
//
// A revision is a stream sequence number, unique across the bucket, and the kind of message at a
// sequence never changes, so membership is a permanent fact (as long as the bucket is never
// deleted and re-created under a running store). When full, the oldest revision is forgotten;
// forgetting only costs a read later. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

#include "etlc/detail/mutex.hpp"

namespace etlc::nats_detail {

class RevisionSet {
 public:
  explicit RevisionSet(std::size_t capacity);

  void insert(std::uint64_t revision) ETLC_EXCLUDES(mu_);
  bool contains(std::uint64_t revision) const ETLC_EXCLUDES(mu_);
  std::size_t size() const ETLC_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::unordered_set<std::uint64_t> set_ ETLC_GUARDED_BY(mu_);
  std::vector<std::uint64_t> ring_ ETLC_GUARDED_BY(mu_);  // insertion order, for eviction
  std::size_t next_ ETLC_GUARDED_BY(mu_) = 0;
};

}  // namespace etlc::nats_detail
