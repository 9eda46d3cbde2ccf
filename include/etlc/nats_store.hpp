// NatsStore: the KvStore backend on NATS JetStream key-value (nats.c), for production fleets.
//
// One job = one KV bucket (stream "KV_<bucket>", subjects "$KV.<bucket>.>"). docs/nats.md covers
// deployment, the bucket settings and what happens in each NATS failure; this header states the
// contract.
//
// Mapping of the primitives (see etlc/store.hpp):
//  * create  publishes the value with "Nats-Expected-Last-Subject-Sequence: 0"; if the key's last
//            message is a delete marker, it re-publishes guarded by that marker's revision (read
//            from the stream leader unless the store already knows the marker). A key whose
//            deletion this store saw (its own erase, a watch, a read) is published guarded by that
//            marker at once: one message instead of two, falling back as above if the key moved
//            since. A key that is live is a conflict (WriteResult::ok == false), never an
//            exception.
//  * update  publishes with the expected revision as the expected last subject sequence. The
//            server accepts a sequence that names a delete marker, so unless the store already
//            knows `expected` to be a live value's revision (it remembers the revisions it handed
//            out: results, gets, lists, watch puts) it first reads the key and loses without
//            sending if the key is not live at `expected`. Every write guarded by a non-zero
//            revision also carries the message id "<key>@<expected>": nats-server 2.9 checks the
//            expected sequence of a replicated (R3/R5) stream only against already-stored data,
//            so without the id two concurrent CAS with the same expected revision could both win;
//            the server deduplicates ids at proposal time and the second writer loses.
//  * erase   publishes a "KV-Operation: DEL" marker guarded the same way; expected == 0 loses
//            without sending anything.
//  * get     reads the subject's last message through the stream leader ($JS.API.STREAM.MSG.GET,
//            never "direct get", which any replica of an R3/R5 bucket may answer stale).
//  * watch   one JetStream ordered consumer (deliver all: the bucket holds `history` values per
//            key; deletes included and filtered here; not kvStore_Watch, which hides headers) and
//            one thread per watch. The snapshot is collected (latest value per key) until the
//            consumer passes the sequence of the prefix's last message, read from the stream
//            leader before the consumer starts (re-read, at most twice, while writes move it;
//            docs/decisions/0007), and delivered as one put per live key, then caught_up: delete
//            markers of the snapshot are never delivered.
//            Live DEL and PURGE markers become erase events. The bucket keeps `history` messages
//            per key (default 1), so when a key is overwritten while a watch lags that many writes
//            behind on it, the server has dropped a value the watch never read. Every message
//            NatsStore writes names the revision it replaced; the watch compares that with the last
//            revision it saw of the key and breaks (watch_broken) instead of continuing with a gap,
//            unless WatchOptions::latest_only says the consumer keeps only the latest value.
//  * watch_keys  no JetStream consumer (nats-server 2.9 gives a consumer one filter subject):
//            one core NATS subscription per key on "$KV.<bucket>.<key>" as a change *hint* (the
//            server forwards every publish there, stored or refused, possibly before the stream
//            stored it), and on each hint a leader read of the key; an event only for a revision
//            newer than the last the watch knows. Reads run on one thread per store shared by
//            all its key watches, one read per key serving every watch of it; poll never does
//            I/O. Open: subscribe, flush (the server has the interest), read each key (the
//            snapshot), caught_up, then read each key again 100 ms and 2 s later (a write routed
//            before the interest existed but stored after the snapshot read). A hint that
//            names the revision it replaces is re-read with backoff while the key still shows
//            that revision (the write may be in flight), and breaks the watch if it stays
//            undecided for ~3 s. A skipped value (the read names a previous revision the watch
//            never read) is read back by sequence when history > 1; otherwise the watch breaks
//            unless latest_only. A disconnect or reconnect breaks every key watch (hints sent
//            meanwhile are lost).
//  * list    the same consumer until the snapshot is complete, then closed (not kvStore_Keys:
//            nats.c 3.4.1 times out spuriously on large buckets).
//  * create_many  asynchronous publishes (js_PublishMsgAsync) on a JetStream context of the call's
//            own, at most NatsStoreOptions::creates_in_flight unacknowledged; each request's first
//            message is the one create sends (same guard, same headers). An acknowledgement with
//            a sequence is a create at that revision; a lost guard (the key has a live value or
//            a delete marker, a duplicate id) finishes as create does after such an answer, one
//            request after the other once the pipeline is drained; a failed or missing
//            acknowledgement (op_timeout_ms) is the error create would throw (unknown_outcome
//            when it may apply). After the first such failure, or while disconnected, nothing
//            more is sent: the rest are unavailable. Repeats of a key run after its first request
//            as single creates.
//  Revisions are the stream's sequence numbers: never 0, strictly increasing across all keys.
//
// Errors (StoreError codes):
//  * unavailable      the connection is down or reconnecting (checked before sending), the server
//                     had no responder (e.g. no stream leader during an election), a read timed
//                     out, or the server rejected the request. Nothing was applied.
//  * unknown_outcome  a write was sent and no answer came (timeout, or the connection dropped
//                     while waiting). The write may be applied later, e.g. from nats.c's reconnect
//                     buffer after a reconnect: re-read before deciding.
//  * watch_broken     a gap (above), the ordered consumer failed, the server stopped sending
//                     heartbeats to it (NATS_MISSED_HEARTBEAT) or reported a slow consumer, the
//                     pending queue hit WatchOptions::max_pending, or the store was closed; key
//                     watches also on a disconnect or reconnect, a read failing repeatedly, a
//                     full read queue or a hinted write undecided for ~3 s. Re-watch.
//  * invalid_argument key, prefix or value breaks the shared rules (checked before sending).
//  * incompatible     at construction: JetStream is not enabled, the bucket exists with settings
//                     that break the protocol (the message names the setting), or the startup
//                     probe found create/CAS/guarded delete not enforced.
//  * closed           after close(), or when nats.c gave up reconnecting
//                     (NatsStoreOptions::max_reconnect_attempts exhausted).
//  * not_found        at construction: the bucket does not exist and
//                     NatsStoreOptions::create_bucket is false.
// At construction, invalid options and credentials or TLS material the server rejects throw
// ConfigError naming the option; an unreachable server throws StoreError(unavailable).
//
// Thread safety: every method may be called concurrently from any thread; all share one NATS
// connection. Watch handles may outlive the store: destroying the store breaks them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/store.hpp"

namespace etlc {

// TLS towards the NATS servers. TLS is used when `required` is set, when any file is given, or
// when a server URL has the tls:// scheme.
struct NatsTlsOptions {
  bool required = false;
  // PEM file of the CA(s) that signed the servers' certificates. Empty: the system trust store.
  std::string ca_file;
  // Client certificate chain and private key (PEM) for servers that verify clients. Both or
  // neither.
  std::string cert_file;
  std::string key_file;
};

struct NatsStoreOptions {
  // NATS URLs, "nats://host:port" or "tls://host:port"; at least one, at most 64. nats.c tries
  // them in random order and also learns the cluster's other servers. A URL may carry
  // "user:password@"; it is redacted wherever the options are printed.
  std::vector<std::string> servers;

  // The job whose records the store holds: the bucket is bucket_for_job(job) unless `bucket` is
  // set. Non-empty, at most kMaxJobBytes bytes.
  std::string job;
  // Explicit bucket name ([A-Za-z0-9_-], 1..kMaxBucketBytes), overriding the job mapping.
  std::string bucket;

  // Copies of each value in the cluster: 1, 3 or 5. An existing bucket must match.
  int replicas = 1;

  // Values kept per key (1..64). The protocol reads only the latest; more history lets a watch
  // that falls up to history-1 writes behind on one key still receive every revision instead of
  // breaking (see "watch" above), at history times the storage. An existing bucket must match.
  int history = 1;

  // At most one of the three authentication methods below.
  std::string user;      // with password
  std::string password;  // secret: never printed
  std::string token;     // secret: never printed
  // NATS 2.0 credentials file (user JWT + NKey seed); must exist and be readable.
  std::string credentials_file;

  NatsTlsOptions tls;

  // Bound on establishing the first connection, and on waiting for a new bucket's stream leader.
  std::int64_t connect_timeout_ms = 5000;
  // Bound on each request (get, each write, watch creation, list inactivity).
  std::int64_t op_timeout_ms = 5000;
  // Creates of one create_many call published and not yet acknowledged at any moment
  // (1..kMaxCreatesInFlight). More in flight hide more round trips; each costs a pending message
  // in nats.c (its key and value) until its acknowledgement arrives.
  std::size_t creates_in_flight = 256;
  // Pause between reconnect attempts, and how many attempts before the connection is closed for
  // good (-1: never give up). A store whose connection closed throws StoreError(closed).
  std::int64_t reconnect_wait_ms = 250;
  int max_reconnect_attempts = -1;

  // Start-up wait: while no server can be reached (or the bucket's stream has no leader yet),
  // the constructor retries for at most this long, with capped backoff (250 ms doubling to 5 s)
  // and one warning per attempt, so that a member started before its NATS server (Kubernetes,
  // systemd) connects when the server comes up. 0 = one attempt. Only StoreError(unavailable)
  // is retried: rejected credentials, an incompatible or missing bucket fail at once.
  // 0 .. kMaxTimeoutMs.
  std::int64_t startup_wait_ms = 60'000;

  // Run verify_fencing() on the bucket at construction (scratch keys under "_etlc_probe.").
  bool probe_on_open = true;

  // Create the bucket when it does not exist. Tools that only look at a job turn this off, so a
  // mistyped job name is StoreError(not_found) instead of a new empty bucket.
  bool create_bucket = true;

  // Name shown by the server's monitoring for this connection. Empty: "etlc:<bucket>".
  std::string connection_name;

  static constexpr std::size_t kMaxJobBytes = 64;
  static constexpr std::size_t kMaxBucketBytes = 200;
  static constexpr std::size_t kMaxServers = 64;
  static constexpr std::int64_t kMaxTimeoutMs = 600'000;
  static constexpr std::size_t kMaxCreatesInFlight = 16384;

  // Throws ConfigError naming the first option that is invalid ("servers[1]", "replicas",
  // "tls.key_file", ...). Checks that files exist and are readable. Never includes a secret.
  void validate() const;

  // The bucket this store uses: `bucket` if set, else bucket_for_job(job).
  std::string bucket_name() const;

  // Human-readable form with secrets ("password", "token", URL credentials) replaced by "***".
  std::string to_string() const;

  // Injective mapping of a job name to a bucket name: "etlc_" followed by the job's bytes, where
  // [A-Za-z0-9-] stand for themselves and every other byte (including '_') becomes "_XX" (two
  // upper-case hex digits). Throws ConfigError if `job` is empty or longer than kMaxJobBytes.
  static std::string bucket_for_job(std::string_view job);
};

// `urls` (one server URL, or several separated by commas) with the credentials of every URL
// ("user:password@", "token@") replaced by "***", for banners and messages.
std::string redact_urls(std::string_view urls);

// Counters for monitoring and tests. Monotonic over the store's life.
struct NatsStoreStats {
  std::uint64_t disconnects = 0;
  std::uint64_t reconnects = 0;
  std::uint64_t async_errors = 0;    // errors nats.c reported asynchronously (heartbeats, ...)
  std::uint64_t watches_broken = 0;  // watches this store broke (any reason)
  std::uint64_t guard_reads = 0;     // reads made before a write to rule out a delete marker
  std::uint64_t publishes = 0;       // write messages sent (a create may send two)
  // Key watches (watch_keys): opened (returned to a caller), broken by the store (also counted
  // in watches_broken), change hints received (core messages on a watched key's subject, one
  // per publish, accepted or not), leader reads they made (snapshot, hints, confirmations,
  // retries) and put/erase events they delivered (snapshot included, caught_up not).
  std::uint64_t key_watches_opened = 0;
  std::uint64_t key_watches_broken = 0;
  std::uint64_t key_hints = 0;
  std::uint64_t key_reads = 0;
  std::uint64_t key_events = 0;
};

namespace nats_detail {
class Core;
}  // namespace nats_detail

class NatsStore final : public KvStore {
 public:
  // Connects, creates or adopts the bucket and (if options.probe_on_open) runs the fencing
  // probe. Throws ConfigError (invalid options, credentials or TLS rejected),
  // StoreError(unavailable) (no server reachable, no stream leader within connect_timeout_ms,
  // after retrying for options.startup_wait_ms) or StoreError(incompatible) (see above). Blocks
  // at most about startup_wait_ms plus connect_timeout_ms plus a few op_timeout_ms.
  explicit NatsStore(NatsStoreOptions options);
  // Same, as a shared_ptr (the form the runtime shares between members of one process).
  static std::shared_ptr<NatsStore> open(NatsStoreOptions options);

  // Breaks every live watch, then closes the connection (waiting at most op_timeout_ms).
  ~NatsStore() override;

  NatsStore(const NatsStore&) = delete;
  NatsStore& operator=(const NatsStore&) = delete;

  // KvStore: see the mapping and error list above.
  WriteResult create(std::string_view key, std::string_view value) override;
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override;
  WriteResult erase(std::string_view key, Revision expected) override;
  std::optional<Entry> get(std::string_view key) override;
  // Also throws invalid_argument for max_pending of 0 or above kMaxWatchPending.
  std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) override;
  std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys,
                                    WatchOptions options) override;
  std::vector<Entry> list(std::string_view prefix) override;
  // Pipelined asynchronous publishes (see "create_many" above).
  std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests) override;

  // Breaks every live watch of this store (poll returns what is queued, then throws
  // watch_broken) as a transport failure would; the store stays usable. For tests and for an
  // operator who wants every consumer to re-snapshot.
  void break_watches(std::string_view reason);

  // Breaks every watch and closes the connection; later calls throw StoreError(closed).
  // Idempotent.
  void close();

  // Deletes the bucket: its stream, every key and its history (etlc delete). Then closes the
  // store (later calls throw StoreError(closed)). A bucket that is already gone is not an error.
  // Members still using the bucket fail their writes until they stop or reopen it (a member
  // opening the store again creates a new, empty bucket); stop them first. Throws
  // StoreError(unavailable / unknown_outcome) when the server does not confirm the delete.
  void delete_bucket();

  const std::string& bucket() const noexcept;
  // True while the connection is established (not reconnecting, not closed).
  bool connected() const;
  NatsStoreStats stats() const;
  // Watches created and neither destroyed nor broken.
  std::size_t watcher_count() const;

 private:
  std::shared_ptr<nats_detail::Core> core_;
};

}  // namespace etlc
