// LeaseTable: a member's view of lease.* (split id -> lease record and revision), with an index
// of the splits whose lease names this member's instance, so the per-step sweep of its own
// leases costs O(own leases) rather than O(every lease in the job). Not thread-safe (the
// member's control loop owns it).
#pragma once

#include <set>
#include <string>
#include <unordered_map>

#include "core/records.hpp"
#include "etlc/store.hpp"

namespace etlc::runtime {

class LeaseTable {
 public:
  struct Entry {
    core::LeaseRecord rec;
    Revision rev = 0;
  };
  using Map = std::unordered_map<std::string, Entry>;

  // The instance whose leases owned() lists. Set once, before any entry.
  void set_owner(std::string instance) { owner_ = std::move(instance); }

  Map::const_iterator find(const std::string& id) const { return map_.find(id); }
  Map::const_iterator end() const { return map_.end(); }
  void assign(const std::string& id, Entry entry);
  void erase(const std::string& id);
  void clear();
  // Split ids whose lease names the owner instance (any nonce), sorted.
  const std::set<std::string>& owned() const { return owned_; }

 private:
  std::string owner_;
  Map map_;
  std::set<std::string> owned_;
};

}  // namespace etlc::runtime
