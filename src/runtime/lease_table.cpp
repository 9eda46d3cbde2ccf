// See lease_table.hpp.
#include "runtime/lease_table.hpp"

namespace etlc::runtime {

void LeaseTable::assign(const std::string& id, Entry entry) {
  if (entry.rec.owner == owner_) {
    owned_.insert(id);
  } else {
    owned_.erase(id);
  }
  map_.insert_or_assign(id, std::move(entry));
}

void LeaseTable::erase(const std::string& id) {
  map_.erase(id);
  owned_.erase(id);
}

void LeaseTable::clear() {
  map_.clear();
  owned_.clear();
}

}  // namespace etlc::runtime
