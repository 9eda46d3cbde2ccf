// The run's trace: every step, store operation, user call, event and fault, in order.
//
// Records are cheap structs; a running 64-bit hash covers every field of every record, so two
// runs of one seed can be compared by hash (and by full content when `keep_all` is set). The last
// `tail_capacity` records are kept for violation reports. Formatting happens only on output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "sim_clock.hpp"

namespace etlc::sim {

enum class TraceKind : std::uint8_t {
  step,       // a member's control-loop step; a = when it asked to run next (virtual ns)
  write,      // a store write reached the store; key, a = revision (0: lost race), b = op
  write_err,  // a store write failed; key, a = op, b = error code
  read,       // a point read; key, a = revision returned (0: absent), b = 1 if served stale
  watch,      // watch events delivered to a member; a = count
  call,       // a user API call and its outcome; key = split, a = call kind, b = outcome
  event,      // an event the member reported; key = split (or empty), a = event index
  emit,       // records emitted by a lane; key = split, a = first record, b = count
  fault,      // a fault was injected; key = what, a/b = parameters
  phase,      // the run moved to another phase; a = phase
  note,       // anything else worth seeing in a report; key = text
};

struct TraceRecord {
  VirtualNs at = 0;
  TraceKind kind = TraceKind::note;
  std::int32_t actor = -1;  // incarnation number, -1 for the simulator itself
  std::string key;
  std::int64_t a = 0;
  std::int64_t b = 0;
};

class Trace {
 public:
  explicit Trace(std::size_t tail_capacity = 200, bool keep_all = false)
      : tail_capacity_(tail_capacity), keep_all_(keep_all) {}

  void add(VirtualNs at, TraceKind kind, std::int32_t actor, std::string_view key,
           std::int64_t a = 0, std::int64_t b = 0);

  std::uint64_t hash() const { return hash_; }
  std::uint64_t count() const { return count_; }
  const std::deque<TraceRecord>& tail() const { return tail_; }
  const std::vector<TraceRecord>& all() const { return all_; }
  bool keeps_all() const { return keep_all_; }

  // One line per record, e.g. "  12.345678s #3 write split.s007 rev=812 update".
  // `names` maps an actor number to a label ("m03#3"); an empty label prints "#n".
  static std::string format(const TraceRecord& r, const std::vector<std::string>& names);

 private:
  void mix(const void* data, std::size_t n);

  std::size_t tail_capacity_;
  bool keep_all_;
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;  // FNV-1a
  std::uint64_t count_ = 0;
  std::deque<TraceRecord> tail_;
  std::vector<TraceRecord> all_;
};

bool operator==(const TraceRecord& x, const TraceRecord& y);

}  // namespace etlc::sim
