// See lease_table.hpp.
#include "runtime/lease_table.hpp"

#include <algorithm>

namespace etlc::runtime {

void LeaseTable::assign(const std::string& id, Entry entry) {
  ++generation_;
  if (auto it = map_.find(id); it != map_.end() && entry.rev < it->second.rev) return;
  if (auto d = deleted_at_.find(id); d != deleted_at_.end()) {
    if (entry.rev < d->second) return;
    deleted_at_.erase(d);
  }
  if (entry.rec.owner == owner_) {
    owned_.insert(id);
  } else {
    owned_.erase(id);
  }
  map_.insert_or_assign(id, std::move(entry));
}

bool LeaseTable::drop_unless_newer(const std::string& id, Revision deleted_at) {
  ++generation_;
  if (auto it = map_.find(id); it != map_.end() && deleted_at != 0 && it->second.rev > deleted_at) {
    return false;  // a delete older than the lease held: the key was written again since
  }
  map_.erase(id);
  owned_.erase(id);
  return true;
}

void LeaseTable::erase(const std::string& id, Revision deleted_at) {
  if (!drop_unless_newer(id, deleted_at)) return;
  if (deleted_at != 0) {
    Revision& floor = deleted_at_[id];
    floor = std::max(floor, deleted_at);
  }
}

void LeaseTable::erase_if_not_newer(const std::string& id, Revision deleted_at) {
  drop_unless_newer(id, deleted_at);
}

void LeaseTable::clear() {
  ++generation_;
  map_.clear();
  owned_.clear();
  deleted_at_.clear();
}

void LeaseTable::forget(const std::string& id) {
  ++generation_;
  map_.erase(id);
  owned_.erase(id);
  deleted_at_.erase(id);
}

void LeaseTable::retain_owned() {
  ++generation_;
  std::erase_if(map_, [&](const auto& kv) { return !owned_.count(kv.first); });
  std::erase_if(deleted_at_, [&](const auto& kv) { return !owned_.count(kv.first); });
}

}  // namespace etlc::runtime
