// See revision_set.hpp.
#include "store/nats/revision_set.hpp"

namespace etlc::nats_detail {

RevisionSet::RevisionSet(std::size_t capacity) : ring_(capacity == 0 ? 1 : capacity, 0) {
  set_.reserve(ring_.size());
}

void RevisionSet::insert(std::uint64_t revision) {
  if (revision == 0) return;
  MutexLock lock(mu_);
  if (!set_.insert(revision).second) return;
  std::uint64_t& slot = ring_[next_];
  if (slot != 0) set_.erase(slot);
  slot = revision;
  next_ = (next_ + 1) % ring_.size();
}

bool RevisionSet::contains(std::uint64_t revision) const {
  MutexLock lock(mu_);
  return set_.count(revision) != 0;
}

std::size_t RevisionSet::size() const {
  MutexLock lock(mu_);
  return set_.size();
}

}  // namespace etlc::nats_detail
