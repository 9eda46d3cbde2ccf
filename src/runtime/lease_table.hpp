// LeaseTable: a member's view of lease.* (split id -> lease record and revision), with an index
// of the splits whose lease names this member's instance, so the per-step sweep of its own
// leases costs O(own leases) rather than O(every lease in the job).
//
// The view never goes back in time: revisions only grow, so an entry older than the one held, or
// than a delete the view saw, comes from a stale read and is ignored (a stale read once put an
// older lease revision over a fresh one and the member's own orphaned lease was never given back:
// sim seed 21364). Not thread-safe (the member's control loop owns it).
#pragma once

#include <cstdint>
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
  // Sets the entry unless it is older than the one held or than a delete seen (a stale read).
  void assign(const std::string& id, Entry entry);
  // Drops the entry; `deleted_at` (the delete's revision, if known) floors later assigns, and a
  // delete older than the entry held leaves it (the key was written again since).
  void erase(const std::string& id, Revision deleted_at = 0);
  // Drops the entry unless it is newer than `deleted_at`, and keeps no floor (for a key nobody
  // follows: a floor would outlive the split's interest, one per split ever released).
  void erase_if_not_newer(const std::string& id, Revision deleted_at);
  void clear();
  // Drops the entry and its delete floor (the split is no longer followed).
  void forget(const std::string& id);
  // Drops every entry but the owner instance's (and the delete floors of the others).
  void retain_owned();
  // Split ids whose lease names the owner instance (any nonce), sorted.
  const std::set<std::string>& owned() const { return owned_; }
  // Changes whenever an entry or a delete floor may have (every mutating call bumps it).
  std::uint64_t generation() const { return generation_; }

 private:
  // Drops the entry unless `deleted_at` is known (non-zero) and older than it; false if kept.
  bool drop_unless_newer(const std::string& id, Revision deleted_at);

  std::string owner_;
  Map map_;
  std::set<std::string> owned_;
  std::uint64_t generation_ = 1;
  std::unordered_map<std::string, Revision> deleted_at_;  // at most one per split
};

}  // namespace etlc::runtime
