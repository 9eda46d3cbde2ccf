// The records the protocol keeps in the store, and their codecs.
//
// Every record is strict, versioned JSON ({"v":1,...}): an unknown or missing field, a wrong
// version, a wrong type, a key/id mismatch or plain garbage is a RecordError that names the key.
// 64-bit integers are exact. Opaque byte fields (descriptor, progress state) are base64.
// Decoding never crashes on hostile input: a peer or an operator can write anything.
//
// Wire format (compact JSON, fields in this order; names are the C++ member names):
//   leader  {"v":1,"owner":id,"nonce":s,"term":u64}
//   plan    {"v":1,"fingerprint":s,"term":u64,"finality":"open"|"final","planned":bool,
//            "split_count":u64,"cursor"?:s,"completed":u64,"quarantined":u64,
//            "verdict":"running"|"complete"|"stalled"|"failed","message"?:s}
//   spec    {"v":1,"id":id,"descriptor":b64,"weight":u64,
//            "parent_progress"?:{"watermark":u64,"state":b64,"done"?:u64}}   (residuals only)
//   split   {"v":1,"id":id,"epoch":u64,"status":"runnable"|"completed"|"quarantined"|"pending",
//            "owner"?:id,"owner_nonce"?:s,"attempts":u32,"weight":u64,
//            "progress":{"watermark":u64,"state":b64,"done"?:u64},"last_error"?:s,
//            "children"?:[id,...],"cut_from"?:{"split":id,"epoch":u64}}
//            (cut_from is the origin a residual's id names; a pending record has one)
//   lease   {"v":1,"split":id,"owner":id,"nonce":s,"epoch":u64}
//   member  {"v":1,"instance":id,"nonce":s,"fingerprint":s,"max_in_flight":u32,"counter":u64,
//            "lease_ms":u64}
//   assign  {"v":1,"instance":id,"term":u64,"splits":[id,...],     (strictly increasing bytewise)
//            "split_requests"?:[{"split":id,"epoch":u64,"children":u32,"keep_ppm":u32},...]}
//            (strictly increasing by split, each one of `splits`; 0 < keep_ppm < 10^6)
//   cordon  {"v":1,"instance":id,"reason":s}
//   pause   {"v":1,"reason":s,"by":s,"since_ms":u64}
//   progress {"v":1,"term":u64,"planned":u64,"done":u64,"remaining":u64,"rate_per_s"?:u64}
// where id is a string that passes validate_id (keys.hpp), s any UTF-8 string, u64/u32 a
// non-negative JSON integer in range (no fraction, exponent or sign), b64 canonical padded
// standard base64 (core/base64.hpp) of at most kMaxDescriptorBytes / kMaxProgressStateBytes.
//
// Optional fields ("?:" above): ABSENT means nullopt. The encoder omits them; an explicit null
// is wrong_type, so every value has exactly one encoding. Duplicate object keys are malformed.
// The id check: spec/split/lease records must sit at the key of their own split id, member/
// assign/cordon records at the key of their own instance id (id_mismatch otherwise); leader and
// plan live at fixed keys and have no id check.
//
// Encoders refuse what the decoders would refuse, so a successful encode always decodes back to
// an equal record: an invalid id, a non-UTF-8 text field, an oversized opaque field or unsorted
// assignment splits throw ConfigError naming the record and field; output over kMaxValueBytes
// throws RecordError(too_large). Decoders throw only RecordError (and std::bad_alloc); inputs
// over kMaxStoredValueBytes (more than any store holds) are too_large and nesting deeper than 8
// is malformed, before parsing.
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/errors.hpp"
#include "etlc/split.hpp"

namespace etlc::core {

inline constexpr std::uint32_t kRecordVersion = 1;

enum class RecordErrc : std::uint8_t {
  malformed,      // not JSON, or not an object
  wrong_version,  // "v" missing or not kRecordVersion
  missing_field,  // a required field is absent
  unknown_field,  // a field this version does not define
  wrong_type,     // a field has the wrong JSON type or is out of range
  id_mismatch,    // the record's id does not match its key
  too_large,      // an encoded record exceeds kMaxValueBytes
};

class RecordError : public Error {
 public:
  RecordError(RecordErrc code, std::string key, const std::string& detail);
  RecordErrc code() const noexcept { return code_; }
  const std::string& key() const noexcept { return key_; }

 private:
  RecordErrc code_;
  std::string key_;
};

// leader: who leads, with which process nonce, in which term.
struct LeaderRecord {
  std::string owner;  // instance id
  std::string nonce;  // the owner's per-process nonce
  std::uint64_t term = 0;
  friend bool operator==(const LeaderRecord&, const LeaderRecord&) = default;
};

// The standby: the one member besides the leader that keeps fleet-wide views, so that it can
// lead at once when the leader dies (docs/decisions/0009). Live exactly while its owner's session
// is; taken by create-if-absent, given up by a guarded delete.
struct StandbyRecord {
  std::string owner;  // instance id
  std::string nonce;  // the owner's per-process nonce
  friend bool operator==(const StandbyRecord&, const StandbyRecord&) = default;
};

// job.progress: the job's progress as the leader last tallied it (core/remaining_work.hpp), for
// operators (`etlc status`) only: no member reads it, so it is written blindly by the leader at
// most once per progress_interval while it changes, and losing it loses nothing.
struct ProgressRecord {
  std::uint64_t term = 0;                   // the leader that wrote it
  std::uint64_t planned = 0;                // weight of every split record
  std::uint64_t done = 0;                   // weight completed, plus what other splits report done
  std::uint64_t remaining = 0;              // weight of runnable splits not yet done
  std::optional<std::uint64_t> rate_per_s;  // done weight per second, recently; unknown at first
  friend bool operator==(const ProgressRecord&, const ProgressRecord&) = default;
};

enum class Finality : std::uint8_t { open, final };
// failed: the leader gave up on the planner (CoordinatorConfig::max_planner_failures consecutive
// failures); PlanRecord::message says why. Sticky until an operator clears it (etlc resume).
enum class Verdict : std::uint8_t { running, complete, stalled, failed };

// plan: the job's plan header. `term` is the leader fence: a new leader bumps it by CAS before
// writing anything else, so a deposed leader's plan write loses.
struct PlanRecord {
  std::string fingerprint;  // the job's fingerprint (planner config); members must match it
  std::uint64_t term = 0;   // term of the leader that last wrote it
  Finality finality = Finality::open;
  bool planned = false;               // a plan has been published (specs + split records seeded)
  std::uint64_t split_count = 0;      // splits planned so far
  std::optional<std::string> cursor;  // planner cursor for open plans
  std::uint64_t completed = 0;
  std::uint64_t quarantined = 0;
  Verdict verdict = Verdict::running;
  std::optional<std::string> message;  // why the verdict is `failed` (the planner's last error)
  friend bool operator==(const PlanRecord&, const PlanRecord&) = default;
};

// spec.{split}: immutable descriptor + weight, created once by the leader (a residual's, by the
// owner that cut it).
struct SpecRecord {
  SplitSpec spec;
  // A residual's only: its parent's progress as the cut commits it, whose state carries the
  // parent's new end. A parent record rebuilt from its spec resumes from its last residual's,
  // so it stops at the cut instead of reading its residuals' rows again (sim operator 23281).
  std::optional<SplitProgress> parent_progress = std::nullopt;
  friend bool operator==(const SpecRecord&, const SpecRecord&) = default;
};

// pending: a residual cut from a split under way (dynamic splitting, docs/work-assignment.md
// "Splitting a split under way") whose parent's record does not name it yet: never claimable.
// The leader makes it runnable once the parent's record names it, or deletes it once the
// tenancy that cut it is over without naming it.
enum class SplitStatus : std::uint8_t { runnable, completed, quarantined, pending };

// Residuals one split may have cut from it, at most (the limit on `children`).
inline constexpr std::size_t kMaxChildrenPerSplit = 64;

// Where a residual came from: the split it was cut from and that split's tenancy at the cut.
struct SplitOrigin {
  std::string split;
  std::uint64_t epoch = 0;
  friend bool operator==(const SplitOrigin&, const SplitOrigin&) = default;
};

// split.{split}: THE FENCE. Every ownership change bumps `epoch` by CAS; every progress commit is
// a CAS on this record, so a stale owner can never write.
struct SplitRecord {
  std::string id;
  std::uint64_t epoch = 0;  // bumped on every claim
  SplitStatus status = SplitStatus::runnable;
  std::optional<std::string> owner;        // instance id of the owner of `epoch`, if any
  std::optional<std::string> owner_nonce;  // that owner's process nonce
  std::uint32_t attempts = 0;              // non-graceful ends so far (poison evidence)
  std::uint64_t weight = 0;
  // watermark + opaque state + done (how much of `weight` is done, in its units; a value above
  // `weight` means all of it; read one release before any release wrote it, decision 0011)
  SplitProgress progress;
  std::optional<std::string> last_error;  // the most recent fail() reason, for operators
  // The residuals cut from this split, in the order they were cut (unique, at most
  // kMaxChildrenPerSplit): written by the owner's fenced cut, so a child is named only under the
  // epoch of the tenancy that cut it.
  std::vector<std::string> children;
  std::optional<SplitOrigin> cut_from;  // set on a residual's record for its whole life
  friend bool operator==(const SplitRecord&, const SplitRecord&) = default;
};

// lease.{split}: written once at claim, deleted at release. Live exactly while its owner's
// session is.
struct LeaseRecord {
  std::string split;
  std::string owner;
  std::string nonce;
  std::uint64_t epoch = 0;
  friend bool operator==(const LeaseRecord&, const LeaseRecord&) = default;
};

// member.{instance}: the session. Renewed by CAS every lease/3 (counter increments).
struct MemberRecord {
  std::string instance;
  std::string nonce;
  std::string fingerprint;
  std::uint32_t max_in_flight = 0;
  std::uint64_t counter = 0;
  std::uint64_t lease_ms = 0;  // the member's lease duration, so observers judge it consistently
  friend bool operator==(const MemberRecord&, const MemberRecord&) = default;
};

// The leader's request that a split be cut (dynamic splitting): bound to the tenancy (epoch) and
// to the number of children its record had when asked, so a request answered is not answered
// twice.
struct SplitAsk {
  std::string split;
  std::uint64_t epoch = 0;
  std::uint32_t children = 0;
  std::uint32_t keep_ppm = 500'000;  // keep at least this much of the remaining work, per 10^6
  friend bool operator==(const SplitAsk&, const SplitAsk&) = default;
};

// assign.{instance}: the leader's instruction to one member.
struct AssignmentRecord {
  std::string instance;
  std::uint64_t term = 0;
  std::vector<std::string> splits;            // sorted, unique
  std::vector<SplitAsk> split_requests = {};  // sorted by split, unique, each one of `splits`
  friend bool operator==(const AssignmentRecord&, const AssignmentRecord&) = default;
};

// cordon.{instance}: written by an operator; the leader treats the member as having no lanes.
struct CordonRecord {
  std::string instance;
  std::string reason;
  friend bool operator==(const CordonRecord&, const CordonRecord&) = default;
};

// job.pause: written by an operator (etlc pause). While it exists the leader assigns nothing, so
// workers drain and release what they hold; deleting it (etlc resume) lets work continue from
// the committed progress. `by` and `since_ms` (Unix time in ms, the operator's clock) are for
// other operators only: no member reads a time from it.
struct PauseRecord {
  std::string reason;
  std::string by;
  std::uint64_t since_ms = 0;
  friend bool operator==(const PauseRecord&, const PauseRecord&) = default;
};

// Encoders produce compact JSON and throw RecordError(too_large) past kMaxValueBytes.
// Decoders take the key the bytes were read from (for messages and the id check).
std::string encode(const LeaderRecord& r);
std::string encode(const StandbyRecord& r);
std::string encode(const PlanRecord& r);
std::string encode(const SpecRecord& r);
std::string encode(const SplitRecord& r);
std::string encode(const LeaseRecord& r);
std::string encode(const MemberRecord& r);
std::string encode(const AssignmentRecord& r);
std::string encode(const CordonRecord& r);
std::string encode(const PauseRecord& r);
std::string encode(const ProgressRecord& r);

LeaderRecord decode_leader(std::string_view key, std::string_view bytes);
StandbyRecord decode_standby(std::string_view key, std::string_view bytes);
PlanRecord decode_plan(std::string_view key, std::string_view bytes);
SpecRecord decode_spec(std::string_view key, std::string_view bytes);
SplitRecord decode_split(std::string_view key, std::string_view bytes);
LeaseRecord decode_lease(std::string_view key, std::string_view bytes);
MemberRecord decode_member(std::string_view key, std::string_view bytes);
AssignmentRecord decode_assignment(std::string_view key, std::string_view bytes);
CordonRecord decode_cordon(std::string_view key, std::string_view bytes);
PauseRecord decode_pause(std::string_view key, std::string_view bytes);
ProgressRecord decode_progress(std::string_view key, std::string_view bytes);

std::string_view to_string(RecordErrc c) noexcept;
std::string_view to_string(SplitStatus s) noexcept;
std::string_view to_string(Finality f) noexcept;
std::string_view to_string(Verdict v) noexcept;

}  // namespace etlc::core
