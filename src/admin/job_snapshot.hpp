// JobSnapshot: the decoded records of one job, read by listing each key prefix once, with every
// record that cannot be read set aside as garbage instead of thrown. The operator API builds its
// views from it; nothing here interprets the protocol.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/records.hpp"
#include "etlc/admin.hpp"
#include "etlc/store.hpp"

namespace etlc::admin {

// Collects unreadable records: every one is counted, the report keeps the first
// kMaxGarbageReported by key.
class GarbageLog {
 public:
  void add(std::string key, std::string error);
  // Sorted by key and truncated to kMaxGarbageReported.
  std::vector<RecordProblem> report() const;
  std::uint64_t total() const { return total_; }

 private:
  std::vector<RecordProblem> items_;
  std::uint64_t total_ = 0;
};

template <typename Record>
struct Versioned {
  Record rec;
  Revision rev = 0;
};

struct JobSnapshot {
  std::optional<core::LeaderRecord> leader;
  std::optional<core::PlanRecord> plan;
  std::optional<core::PauseRecord> pause;
  std::optional<core::StandbyRecord> standby;
  std::optional<core::ProgressRecord> progress;
  bool progress_unreadable = false;  // job.progress exists but does not decode (see garbage)
  std::map<std::string, Versioned<core::MemberRecord>> members;  // by instance id
  std::map<std::string, core::LeaseRecord> leases;               // by split id
  std::map<std::string, core::AssignmentRecord> assigns;         // by instance id
  std::map<std::string, core::CordonRecord> cordons;             // by instance id
  std::map<std::string, core::SplitRecord> splits;               // by split id
  GarbageLog garbage;
};

// Which prefixes to read.
struct SnapshotParts {
  bool job = false;      // job.leader, job.plan, job.pause, job.standby, job.progress
  bool members = false;  // member.*
  bool leases = false;   // lease.*
  bool assigns = false;  // assign.*
  bool cordons = false;  // cordon.*
  bool splits = false;   // split.*
  bool specs = false;    // spec.* (decoded only to report the unreadable ones)
  // Every key of the bucket in one listing, reporting those outside the job's layout as garbage
  // (the parts above are taken from that one listing).
  bool everything = false;
};

// Lists the requested prefixes (one list() each, or one of the whole bucket with `everything`).
// Throws StoreError only.
JobSnapshot read_snapshot(KvStore& store, const SnapshotParts& parts);

// Public mirrors of the core enums.
SplitState to_public(core::SplitStatus s) noexcept;
PlanVerdict to_public(core::Verdict v) noexcept;
PlanFinality to_public(core::Finality f) noexcept;

// The job's progress as the leader's job.progress record states it.
WeightProgress leader_progress(const core::ProgressRecord& r);

// The pure part of JobAdmin::status(): everything but the observation durations.
JobStatus build_status(const JobSnapshot& snap);

}  // namespace etlc::admin
