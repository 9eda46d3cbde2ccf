// KvStore: the only I/O seam of the coordination protocol.
//
// Seven primitives and one pipelined batch, nothing more, so that any store with per-key
// compare-and-swap can back a job
// (NATS JetStream KV, memory; etcd- or Redis-class stores could be added). docs/store-contract.md
// states what a backend must guarantee; tests/store_conformance/ checks it.
//
// Contract summary:
//  * Revisions are assigned by the store, are never 0, and strictly increase per key over the
//    key's whole history, across deletes and re-creates (no ABA). A delete has a revision too.
//  * Losing a race (the key exists, the revision moved) is an outcome (WriteResult::ok == false),
//    never an exception.
//  * Failures throw StoreError: `unavailable` (nothing applied; retry), `unknown_outcome` (a
//    write was sent and may or may not apply, possibly later: re-read before deciding),
//    `watch_broken` (re-watch), `invalid_argument` (fix the caller), `incompatible` (the store
//    cannot be trusted with fencing), `closed`.
//  * Keys: tokens of [A-Za-z0-9_=/-] joined by single '.', no empty token, at most kMaxKeyBytes.
//    Prefixes (watch, list) are "" (everything) or a valid key followed by '.'.
//  * Key watches (watch_keys) follow a small set of exact keys, with the prefix watch's rules.
//  * Values: arbitrary bytes, at most kMaxValueBytes written (see kMaxStoredValueBytes for reads).
//
// Thread safety: every KvStore method may be called concurrently from any thread. A Watch is
// used by one thread at a time; its notify callback may run on any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "etlc/errors.hpp"

namespace etlc {

using Revision = std::uint64_t;

inline constexpr std::size_t kMaxKeyBytes = 1024;
// The value limits, the one place every layer takes them from:
//  * kMaxValueBytes: the largest value a KvStore accepts (validate_value); record encoders
//    refuse more.
//  * kMaxStoredValueBytes: the largest value a reader must accept. A backend may hold values up
//    to it written by tools outside this library (a NATS bucket is created with this
//    max_msg_size; the server counts a message's headers against it, our own writes keep
//    kValueHeaderAllowanceBytes for theirs, a foreign publish may carry none), and it refuses
//    anything larger, so nothing a member cannot read fits in the store. Record decoders accept
//    values up to it.
inline constexpr std::size_t kMaxValueBytes = 512 * 1024;
inline constexpr std::size_t kValueHeaderAllowanceBytes = 4096;
inline constexpr std::size_t kMaxStoredValueBytes = kMaxValueBytes + kValueHeaderAllowanceBytes;
// Upper bound of WatchOptions::max_pending.
inline constexpr std::size_t kMaxWatchPending = std::size_t{1} << 22;
// Upper bound of the keys one watch_keys call follows.
inline constexpr std::size_t kMaxWatchKeys = 64;
// Upper bound of the requests of one create_many call.
inline constexpr std::size_t kMaxBatchRequests = 65536;

enum class StoreErrc : std::uint8_t {
  unavailable,       // not reachable / no answer; nothing was applied. Retryable.
  unknown_outcome,   // a write may or may not have been applied (possibly later). Re-read.
  watch_broken,      // the watch ended (overflow, transport, cancelled by the store). Re-watch.
  invalid_argument,  // key, prefix or value breaks the contract's rules. Caller bug.
  incompatible,      // the store does not enforce the contract, or is configured incompatibly.
  closed,            // the store was shut down.
  not_found,         // at open: the store's container (a NATS bucket) does not exist and the
                     // options say not to create it (read-only tools). Not retryable.
};

std::string_view to_string(StoreErrc code) noexcept;

class StoreError : public Error {
 public:
  StoreError(StoreErrc code, const std::string& message);
  StoreErrc code() const noexcept { return code_; }
  // True for errors a caller may retry after backing off (unavailable, unknown_outcome,
  // watch_broken). An unknown_outcome must be resolved by a re-read before a retry.
  bool retryable() const noexcept;

 private:
  StoreErrc code_;
};

struct Entry {
  std::string key;
  std::string value;
  Revision revision = 0;
};

// Result of a conditional write. ok == false means the condition did not hold and nothing was
// written.
struct WriteResult {
  bool ok = false;
  // ok: the revision this write created (for erase, the revision of the delete itself).
  // !ok: the key's current revision when the backend learnt it cheaply, else 0 (unknown or
  // absent). Never use a conflict's revision as proof of anything: re-read.
  Revision revision = 0;

  explicit operator bool() const noexcept { return ok; }
};

struct WatchEvent {
  enum class Kind : std::uint8_t { put, erase, caught_up };
  Kind kind = Kind::put;
  std::string key;        // empty for caught_up
  std::string value;      // put only
  Revision revision = 0;  // put: the new revision; erase: the delete's revision; caught_up: 0
};

// A live prefix watch: first one `put` per live key under the prefix (the snapshot, no deleted
// keys), then exactly one `caught_up`, then every later put and erase of a key under the prefix,
// in per-key revision order. Events for different keys may interleave in any order consistent
// with each key's own order. With WatchOptions::latest_only, a backend may skip a key's
// intermediate values (puts and erases) after caught_up, never its latest one.
//
// Destroying the handle cancels the watch; the notify callback does not run after the destructor
// has returned. Not thread-safe: one consumer thread at a time.
class Watch {
 public:
  virtual ~Watch() = default;

  // Appends at most max_events pending events to `out`, oldest first, and returns how many.
  // Never blocks. Throws StoreError(watch_broken) once the watch has broken, after every event
  // delivered before the break was returned; every later call throws too.
  virtual std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) = 0;
};

struct WatchOptions {
  // Called when new events are ready or the watch broke. May run on any thread, possibly while
  // the store holds internal locks: it must be cheap, must not block and must not call back into
  // the store or the Watch. May be empty (the consumer polls on its own schedule).
  std::function<void()> notify;
  // Events that may wait unpolled; one more breaks the watch (watch_broken) instead of growing
  // without bound. A consumer that re-watches gets a fresh snapshot. At most kMaxWatchPending.
  std::size_t max_pending = std::size_t{1} << 20;
  // The consumer keeps only each key's latest state (every etlc view does), so a backend that
  // lost a key's intermediate values (a bucket keeping one value per key, overwritten while the
  // watch lagged) may go on from the newer value instead of breaking the watch (watch_broken).
  // Per-key order still holds and the latest value is always delivered. Backends that deliver
  // every value ignore it.
  bool latest_only = false;
};

namespace detail {
// What a CreateRequest may view: anything convertible to std::string_view but a std::string
// that dies at the end of the full expression (a prvalue or an xvalue).
template <class S>
concept ViewableArgument = std::is_convertible_v<S, std::string_view> &&
    !(std::is_same_v<std::remove_cvref_t<S>, std::string> && !std::is_lvalue_reference_v<S>);
}  // namespace detail

// One create of a create_many batch. The views must stay valid for the call, so a request cannot
// be built from a temporary std::string (CreateRequest{k, "v" + k} would view a string that dies
// at the end of the statement): keep the strings alive beside the batch and view them.
struct CreateRequest {
  CreateRequest() = default;
  template <detail::ViewableArgument K, detail::ViewableArgument V>
  constexpr CreateRequest(K&& k, V&& v) : key(std::forward<K>(k)), value(std::forward<V>(v)) {}

  std::string_view key;
  std::string_view value;
};

// What became of one request of a batch: `result` when the store answered (ok: created at
// result.revision; !ok: the key existed), else `error`, the code a single create would have
// thrown (unavailable: nothing applied; unknown_outcome: may apply, re-read before deciding).
struct CreateOutcome {
  WriteResult result;
  std::optional<StoreErrc> error;
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Creates `key` if it is absent (never written, or deleted). ok == false if it exists.
  virtual WriteResult create(std::string_view key, std::string_view value) = 0;

  // Compare-and-swap: writes `value` iff the key is live at exactly `expected` revision.
  // ok == false if the key moved, was deleted, or never existed. expected == 0 never matches.
  virtual WriteResult update(std::string_view key, std::string_view value, Revision expected) = 0;

  // Guarded delete: deletes `key` iff it is live at exactly `expected`. ok == false otherwise
  // (including an absent key). expected == 0 never matches.
  virtual WriteResult erase(std::string_view key, Revision expected) = 0;

  // Point read: the live value and revision, or nullopt if absent or deleted. Reads that decide
  // anything must be served by an up-to-date replica (backends must not answer stale).
  virtual std::optional<Entry> get(std::string_view key) = 0;

  // Starts a watch of every key under `prefix` (see Watch). Throws unavailable if the watch
  // cannot be established.
  virtual std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) = 0;

  // Point-in-time listing of the live keys under `prefix`, sorted by key. Never under-reports:
  // every key that was live for the whole call is included.
  virtual std::vector<Entry> list(std::string_view prefix) = 0;

  // Starts a watch of exactly `keys` (1..kMaxWatchKeys distinct valid keys, any order): the
  // Watch contract with the snapshot and the later events limited to those keys, so a key
  // created, deleted and re-created around the moment the watch opens is seen in its latest
  // state and every change after it. Its cost to the store does not depend on how many other
  // keys there are or how often they change. Throws invalid_argument for a bad key set,
  // unavailable if the watch cannot be established.
  virtual std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys,
                                            WatchOptions options) = 0;

  // Creates every request's key if absent, as create() would, possibly pipelined (a backend may
  // have up to its own bound of requests in flight). Returns one outcome per request, in request
  // order; a failed request never stops the others. Requests on the same key are answered in
  // order. At most kMaxBatchRequests requests (invalid_argument otherwise, before anything is
  // sent); invalid keys or values are rejected the same way. Throws closed once the store is
  // closed. The default sends the creates one after the other.
  virtual std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests);
};

// The key-set rules of watch_keys; throws StoreError(invalid_argument) naming the rule.
void validate_watch_keys(std::span<const std::string> keys);
// The batch rules of create_many (count, keys, values); throws StoreError(invalid_argument).
void validate_create_batch(std::span<const CreateRequest> requests);

// Validation shared by every backend, so that a key the NATS backend would reject is rejected
// by the memory store too. Each throws StoreError(invalid_argument) naming the rule.
void validate_key(std::string_view key);
void validate_prefix(std::string_view prefix);
void validate_value(std::string_view key, std::string_view value);

// Startup probe: proves on `store` that create-if-absent, compare-and-swap and guarded delete are
// enforced, on the scratch key `<scratch_prefix>probe` (or, while another prober uses that one, a
// random key under the prefix), which it deletes again. Give each prober a prefix of its own
// that survives its restarts (the member uses one per instance id): a store that keeps delete
// markers then holds at most one per prefix. Returns the key it used. Throws
// StoreError(incompatible) naming the primitive that was not enforced; lets transport errors
// (unavailable, unknown_outcome) propagate. Thread-safe as far as the store is.
std::string verify_fencing(KvStore& store, std::string_view scratch_prefix);

}  // namespace etlc
