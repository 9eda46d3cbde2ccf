// SimStore: the outermost decorator of a member's store stack, where the simulator's store and
// watch faults happen. One per member process (incarnation):
//
//   Member -> SimStore -> FaultInjectingStore -> RecordingStore -> MemoryStore (shared)
//
// Faults, all drawn from the simulator's seeded PRNG:
//  * operation failures (unavailable) and unknown outcomes, through the FaultInjectingStore
//    (fail_next / unknown_outcome_next): dropped, or applied before the error is returned;
//  * unknown outcomes that land LATER (a reconnect buffer): the write is queued in the World and
//    reaches the store after a delay, attributed to the call that sent it;
//  * partitions: every operation fails for a while, nothing reaches the store;
//  * a crash point: after the k-th next operation (which still lands) the process is dead and
//    every later operation fails; the World abandons the member when its current call returns;
//  * stale point reads: served from the key's history, up to History::kMaxStaleNs old;
//  * watch delivery (prefix and key watches alike): each event is delivered after a random
//    delay, preserving per-key order and the snapshot/caught_up barrier but reordering events
//    across keys; delays grow during a "slow watch" episode; watches can be broken (dropped
//    connection: undelivered events lost).
//  * create_many: the same faults drawn per request, in request order (unavailable: not sent;
//    unknown outcome: dropped, applied, or landing late); the requests still to send reach the
//    store as one batch. A partition or a dead process fails every request (unavailable); a crash
//    point inside a batch lets a drawn prefix of it land, then the process is dead.
//
// Watch events are pulled from the store after every simulated action (so their delay counts
// from when they were written), buffered here, and handed to the member's poll() once due.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "etlc/fault_injecting_store.hpp"
#include "etlc/kv_store_wrapper.hpp"
#include "history.hpp"
#include "recording_store.hpp"
#include "rng.hpp"
#include "sim_clock.hpp"
#include "trace.hpp"

namespace etlc::sim {

// Faults armed on one member's store (set by the World).
struct StoreFaults {
  bool dead = false;             // crashed: every call fails, nothing reaches the store
  std::int64_t crash_after = 0;  // > 0: the process dies after this many more operations
  bool crash_hit = false;        // the crash point was reached (the World abandons the member)
  VirtualNs partition_until = 0;
  VirtualNs stale_until = 0;
  double stale_p = 0;
  VirtualNs slow_watch_until = 0;
  VirtualNs slow_watch_max = 0;
  double op_fail = 0;
  double op_unknown = 0;
};

// A write whose outcome was reported unknown and which reaches the store later.
struct LateWrite {
  VirtualNs at = 0;
  std::uint64_t seq = 0;
  OpKind kind = OpKind::create;
  std::string key;
  std::string value;
  Revision expected = 0;
  Writer writer;
  std::shared_ptr<RecordingStore> store;
};

// What a SimStore needs from the World.
struct SimEnv {
  const VirtualTime* time = nullptr;
  Rng* rng = nullptr;  // the fault stream
  Trace* trace = nullptr;
  History* history = nullptr;
  const std::uint64_t* current_call = nullptr;
  std::function<void(LateWrite)> schedule_late;
  VirtualNs late_max = 500 * kNsPerMs;  // how late a late write may land
  // Optional: told (with this store's incarnation) when the shared store queued an event on one
  // of its watches, so a driver of thousands of members pumps only those (projection.hpp).
  std::function<void(std::int32_t)> on_queued;
};

struct SimWatchCore;

class SimStore final : public KvStoreWrapper {
 public:
  SimStore(SimEnv env, std::int32_t inc, std::string instance,
           std::function<std::string()> nonce_of, std::shared_ptr<FaultInjectingStore> fis,
           std::shared_ptr<RecordingStore> rec);
  ~SimStore() override;

  WriteResult create(std::string_view key, std::string_view value) override;
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override;
  WriteResult erase(std::string_view key, Revision expected) override;
  std::optional<Entry> get(std::string_view key) override;
  std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) override;
  std::vector<Entry> list(std::string_view prefix) override;
  std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys,
                                    WatchOptions options) override;
  std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests) override;

  StoreFaults faults;

  // Pulls pending events from the store into every live watch's delivery buffer.
  void pump();
  // The earliest delivery time after `t` of a buffered event (INT64_MAX if none).
  VirtualNs next_delivery_after(VirtualNs t) const;
  // Breaks every live watch now (its undelivered events are lost).
  void break_watches();
  std::size_t live_watches() const;
  // Operations this store saw (calls, plus polls that delivered events): a step that moved none
  // of them did no work.
  std::uint64_t activity() const { return activity_; }
  // Point reads this store answered stale (a store-contract violation the runtime may trip on).
  std::uint64_t stale_served() const { return stale_served_; }
  void note_activity() { ++activity_; }

 private:
  // Counts an operation against the crash point and the partition; throws if the process is
  // dead or cut off. Returns true if this operation is the crash point (it lands, then throws).
  bool admit(OpKind kind, std::string_view key);
  void after_crash_point(OpKind kind, std::string_view key);
  WriteResult write(OpKind kind, std::string_view key, std::string_view value, Revision expected);
  // Draws the fault of one batch request (the write() faults); true if it is to be sent now.
  // `error` gets the code its outcome reports (none: the store's answer).
  bool draw_batch_fault(const CreateRequest& request, std::optional<StoreErrc>& error);
  // The end of a batch that reached its crash point: a drawn prefix lands, then death.
  std::vector<CreateOutcome> crash_in_batch(std::span<const CreateRequest> requests);
  // Registers a watch opened by `open` (given the options to pass on) with the delivery faults.
  std::unique_ptr<Watch> open_watch(
      const std::string& what, const WatchOptions& options,
      const std::function<std::unique_ptr<Watch>(WatchOptions)>& open);
  Writer writer() const;
  VirtualNs watch_delay();

  SimEnv env_;
  const std::int32_t inc_;
  const std::string instance_;
  std::function<std::string()> nonce_of_;
  FaultInjectingStore& fis_;  // the inner store (KvStoreWrapper), to arm its faults
  std::shared_ptr<RecordingStore> rec_;
  std::vector<std::weak_ptr<SimWatchCore>> watches_;
  // Set by any of this store's watches when the store queued an event (pump skips clean stores).
  std::shared_ptr<bool> any_dirty_ = std::make_shared<bool>(true);
  std::uint64_t activity_ = 0;
  std::uint64_t stale_served_ = 0;
};

}  // namespace etlc::sim
