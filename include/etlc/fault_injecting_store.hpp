// FaultInjectingStore: a KvStore decorator that injects failures into any other KvStore and
// records what passed through it.
//
// Faults are a cross-cutting concern, so they wrap a store instead of living in every backend:
// the same faults apply to a MemoryStore in unit tests and the simulator, and to a NatsStore in
// integration tests (see docs/store-contract.md, "Fault injection").
//
// With no fault armed the decorator is transparent: it passes every call to the inner store and
// returns its answers unchanged (the conformance suite runs against it to prove that).
//
// Faults, armed by test code:
//  * fail_next(n, code): the next n operations (any KvStore call; each request of a create_many
//    batch counts as one operation) throw StoreError(code) without reaching the inner store.
//  * unknown_outcome_next(n, apply): the next n writes (create, update, erase) throw
//    StoreError(unknown_outcome). With apply == true the write first reaches the inner store (it
//    "landed", whatever its result); with apply == false it does not. Each request of a
//    create_many batch counts as one write.
//    A pending fail_next is consumed before a pending unknown_outcome_next. Calls with invalid
//    arguments throw invalid_argument and consume no fault.
//  * Watches created through the decorator, prefix and key watches alike, can be held back
//    (hold_watch_events), released in steps (release_held) and broken (break_watches).
//
// create_many: a batch takes one armed fault per request, in request order, as that many single
// creates would, and reports it in the request's outcome: a failed request (fail_next with
// unavailable or unknown_outcome, or a dropped unknown outcome) is not sent; an applied unknown
// outcome is sent and its answer replaced by unknown_outcome. Every request still to be sent
// goes to the inner store in ONE create_many call, in request order, so the inner store's
// pipelining is kept (a batch is not turned into single creates). A fail_next armed with any
// other code (closed, incompatible, ...) is what a single call would throw: it takes one fault
// and the whole batch throws it before anything is sent. Each request is one op-log record of
// kind create_many.
//
// Determinism: there are no internal threads, timers or random draws. Given the same sequence of
// calls from one thread (and a deterministic inner store such as MemoryStore), the results, the
// events and the op log are the same on every run; randomness belongs to the caller.
//
// Ownership: shares ownership of the inner store (KvStoreWrapper), which never changes.
//
// Thread safety: every method may be called concurrently from any thread. Fault counters are
// consumed atomically (two concurrent calls never both take the last armed fault). Inner calls run
// without the decorator's lock held, so concurrent operations stay concurrent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "etlc/detail/mutex.hpp"
#include "etlc/kv_store_wrapper.hpp"
#include "etlc/store.hpp"

namespace etlc {

namespace detail {
struct FaultWatchControl;
}  // namespace detail

enum class OpKind : std::uint8_t {
  create,
  update,
  erase,
  get,
  watch,
  list,
  watch_keys,
  create_many
};
inline constexpr std::size_t kOpKindCount = 8;
std::string_view to_string(OpKind kind) noexcept;

// What the caller of an operation saw.
enum class OpOutcome : std::uint8_t {
  ok,        // write applied, get found the key, watch/list answered
  conflict,  // a conditional write lost its race (nothing written)
  absent,    // get found no live key
  error,     // the call threw StoreError (OpRecord::error says which)
};
std::string_view to_string(OpOutcome outcome) noexcept;

struct OpRecord {
  std::uint64_t seq = 0;  // 1-based order in which operations entered the decorator
  OpKind kind = OpKind::get;
  // The key (of a create_many request too), the prefix for watch and list, the keys joined by
  // ',' for watch_keys.
  std::string key;
  OpOutcome outcome = OpOutcome::ok;
  StoreErrc error = StoreErrc::unavailable;  // meaningful only when outcome == error
  // ok/landed write: the revision it created; conflict: the revision the inner store reported;
  // get: the entry's revision; otherwise 0.
  Revision revision = 0;
  bool injected = false;  // the error was injected by this decorator
  bool landed = false;    // a write changed the inner store (ok, or an applied unknown outcome)
};

class FaultInjectingStore final : public KvStoreWrapper {
 public:
  static constexpr std::size_t kDefaultOpLogCapacity = 10'000;
  static constexpr std::size_t kAll = std::numeric_limits<std::size_t>::max();

  // `inner` must not be null (UsageError). The op log keeps the last `op_log_capacity` records
  // (0 disables it; counters still count).
  explicit FaultInjectingStore(std::shared_ptr<KvStore> inner,
                               std::size_t op_log_capacity = kDefaultOpLogCapacity);
  ~FaultInjectingStore() override;

  FaultInjectingStore(const FaultInjectingStore&) = delete;
  FaultInjectingStore& operator=(const FaultInjectingStore&) = delete;

  // KvStore: the inner store's behaviour, plus armed faults. Arguments are validated here first
  // (invalid_argument), so an invalid call never consumes a fault.
  WriteResult create(std::string_view key, std::string_view value) override ETLC_EXCLUDES(mu_);
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override
      ETLC_EXCLUDES(mu_);
  WriteResult erase(std::string_view key, Revision expected) override ETLC_EXCLUDES(mu_);
  std::optional<Entry> get(std::string_view key) override ETLC_EXCLUDES(mu_);
  // The returned Watch honours hold_watch_events/release_held/break_watches (below). Its notify
  // callback runs when the inner watch notifies, and after release_held released events into it,
  // after hold_watch_events(false) and after break_watches(). Destroying it waits for callbacks
  // in flight, as for any Watch.
  std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) override
      ETLC_EXCLUDES(mu_);
  std::vector<Entry> list(std::string_view prefix) override ETLC_EXCLUDES(mu_);
  // A key watch, with the same holding and breaking as a prefix watch.
  std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys,
                                    WatchOptions options) override ETLC_EXCLUDES(mu_);
  // Faults per request (see the top of this file); one inner create_many for the rest.
  std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests) override
      ETLC_EXCLUDES(mu_);

  // --- faults -----------------------------------------------------------------------------------

  // The next `n` operations throw StoreError(code) without reaching the inner store. Replaces any
  // pending count.
  void fail_next(std::size_t n, StoreErrc code = StoreErrc::unavailable) ETLC_EXCLUDES(mu_);
  // The next `n` writes throw StoreError(unknown_outcome); with `apply` they reach the inner store
  // first. Replaces any pending count.
  void unknown_outcome_next(std::size_t n, bool apply) ETLC_EXCLUDES(mu_);
  // Disarms fail_next and unknown_outcome_next (watch holding is unchanged).
  void clear_faults() ETLC_EXCLUDES(mu_);
  std::size_t failures_pending() const ETLC_EXCLUDES(mu_);
  std::size_t unknown_outcomes_pending() const ETLC_EXCLUDES(mu_);

  // While on, events of every watch created through this decorator (existing and future) stay
  // out of poll's reach: they wait, in order, in the inner watch's queue, which keeps its own
  // max_pending bound (a watch held too long overflows and breaks, as it would in production).
  // Events released before stay visible. A break of the inner watch (overflow) is held like an
  // event: poll reports it once the events before it were released and returned, or after
  // holding stops. Turning holding off makes every waiting event visible again and notifies every
  // watch.
  void hold_watch_events(bool hold) ETLC_EXCLUDES(mu_);
  bool holding_watch_events() const ETLC_EXCLUDES(mu_);
  // While holding: moves up to `max_per_watch` waiting events of each live watch, oldest first,
  // to where its poll can see them (at most max_pending visible per watch), and notifies each
  // watch that got events. Watches are visited in creation order. Returns how many events were
  // released in total. A no-op (returns 0) when not holding.
  std::size_t release_held(std::size_t max_per_watch = kAll) ETLC_EXCLUDES(mu_);
  // Breaks every live watch created through this decorator, now: its next poll throws
  // StoreError(watch_broken) and every later poll too. Events not yet returned by poll (held,
  // released or still in the inner queue) are discarded, as a dropped connection loses them;
  // the consumer recovers by re-watching, which yields a fresh snapshot. Each broken watch is
  // notified. Watches created afterwards are unaffected.
  void break_watches() ETLC_EXCLUDES(mu_);
  // Live watches created through this decorator (not destroyed, not broken by break_watches).
  std::size_t watch_count() const ETLC_EXCLUDES(mu_);

  // --- observation -------------------------------------------------------------------------------

  // The last records (up to the capacity), oldest first.
  std::vector<OpRecord> op_log() const ETLC_EXCLUDES(mu_);
  void clear_op_log() ETLC_EXCLUDES(mu_);
  // Calls of `kind` made through this decorator since construction, whatever their outcome
  // (including injected failures and invalid arguments). Never reset.
  std::uint64_t op_count(OpKind kind) const ETLC_EXCLUDES(mu_);

 private:
  enum class FaultKind : std::uint8_t { none, fail, unknown_drop, unknown_apply };
  struct Fault {
    FaultKind kind = FaultKind::none;
    StoreErrc code = StoreErrc::unavailable;
  };

  // Counts the call, validates its arguments, then takes an armed fault. Records and throws
  // invalid arguments, injected failures and dropped unknown outcomes; otherwise returns the
  // call's seq and the fault still to apply (none, or unknown_apply for a write).
  std::uint64_t admit(OpKind kind, std::string_view key, bool is_write,
                      const std::function<void()>& validate, Fault& fault) ETLC_EXCLUDES(mu_);
  // Runs an inner call; records and rethrows a StoreError it throws. (ETLC_EXCLUDES(mu_) is on
  // its definition: a template's attribute cannot name a member declared below it.)
  template <typename Call>
  std::invoke_result_t<Call&> call_inner(std::uint64_t seq, OpKind kind, std::string_view key,
                                         Call&& call);
  WriteResult write_op(OpKind kind, std::string_view key, const std::function<void()>& validate,
                       const std::function<WriteResult()>& call) ETLC_EXCLUDES(mu_);
  // Wraps an inner watch opened by `open` (given the options to pass on) in a FaultWatch and
  // registers it; `what` names the watch in records and errors.
  std::unique_ptr<Watch> open_watch(std::uint64_t seq, OpKind kind, const std::string& what,
                                    WatchOptions options,
                                    const std::function<std::unique_ptr<Watch>(WatchOptions)>& open)
      ETLC_EXCLUDES(mu_);
  // Takes the armed faults of a batch of `n` requests, one per request in order; throws (and
  // records) a fail_next code that cannot be a request's outcome.
  std::vector<Fault> take_batch_faults(std::uint64_t seq, std::size_t n) ETLC_EXCLUDES(mu_);
  // A batch request's outcome and op-log record; `answer` is the inner store's, null when the
  // request was not sent.
  CreateOutcome settle_request(std::uint64_t seq, std::string_view key, const Fault& fault,
                               const CreateOutcome* answer) ETLC_EXCLUDES(mu_);
  void record(OpRecord rec) ETLC_EXCLUDES(mu_);
  void record_error(std::uint64_t seq, OpKind kind, std::string_view key, StoreErrc code,
                    bool injected) ETLC_EXCLUDES(mu_);
  std::vector<std::shared_ptr<detail::FaultWatchControl>> live_watches() const ETLC_EXCLUDES(mu_);

  const std::size_t op_log_capacity_;

  // Before any watch's own mutex (watch() takes one inside it to register the watch); never
  // held while calling the inner store.
  mutable Mutex mu_;
  std::uint64_t next_seq_ ETLC_GUARDED_BY(mu_) = 1;
  std::size_t fail_pending_ ETLC_GUARDED_BY(mu_) = 0;
  StoreErrc fail_code_ ETLC_GUARDED_BY(mu_) = StoreErrc::unavailable;
  std::size_t unknown_pending_ ETLC_GUARDED_BY(mu_) = 0;
  bool unknown_apply_ ETLC_GUARDED_BY(mu_) = false;
  bool hold_ ETLC_GUARDED_BY(mu_) = false;
  std::array<std::uint64_t, kOpKindCount> counts_ ETLC_GUARDED_BY(mu_){};
  std::deque<OpRecord> log_ ETLC_GUARDED_BY(mu_);
  // Creation order.
  std::vector<std::weak_ptr<detail::FaultWatchControl>> watches_ ETLC_GUARDED_BY(mu_);
  std::size_t watches_pruned_at_ ETLC_GUARDED_BY(mu_) = 0;
};

}  // namespace etlc
