// Core: the shared state of one NatsStore (connection, JetStream context, bucket, watch registry).
//
// Owned through std::shared_ptr by the NatsStore and by each of its watches, so a watch that
// outlives its store still holds valid nats.c objects; close() ends all I/O. Thread-safe.
#pragma once

#include <nats/nats.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "etlc/clock.hpp"
#include "etlc/detail/mutex.hpp"
#include "etlc/nats_store.hpp"
#include "store/nats/connection_events.hpp"
#include "store/nats/marker_hints.hpp"
#include "store/nats/nats_errors.hpp"
#include "store/nats/nats_handles.hpp"
#include "store/nats/nats_redact.hpp"
#include "store/nats/revision_set.hpp"

namespace etlc::nats_detail {

class HintReader;

// What the store's watch registry does with a watch of either kind (prefix or key watch).
class RegisteredWatch {
 public:
  virtual ~RegisteredWatch() = default;
  // Breaks the watch with `reason` (the first reason wins). Safe from any thread.
  virtual void fail(std::string reason) = 0;
  virtual bool broken() const = 0;
  // True if a dropped connection may have lost the watch's events: key watches learn of
  // changes from core NATS messages, which nobody replays after a reconnect. Prefix watches
  // resume by themselves (nats.c re-creates the ordered consumer at the next sequence).
  virtual bool breaks_on_disconnect() const = 0;
};

// The last message of a key's subject, read through the stream leader.
struct LastMessage {
  bool exists = false;     // the subject has a message (a value or a delete marker)
  bool tombstone = false;  // that message is a DEL or PURGE marker
  std::uint64_t revision = 0;
  std::string value;
  // The revision the writer expected to replace (its Nats-Expected-Last-Subject-Sequence
  // header, which every NatsStore write carries); nullopt for foreign writes without it.
  std::optional<std::uint64_t> previous;

  bool live() const { return exists && !tombstone; }
};

// Outcome of one guarded publish.
struct Published {
  bool ok = false;
  std::uint64_t revision = 0;  // ok: the new message's revision
  // !ok: the subject's last revision as the server reported it (0 if it could not be parsed).
  std::uint64_t last_revision = 0;
};

class Core : public std::enable_shared_from_this<Core> {
 public:
  // Validates the options (ConfigError); does no I/O. Call open() next.
  explicit Core(NatsStoreOptions options);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // Connects and creates or adopts the bucket. Throws as NatsStore's constructor documents.
  void open() ETLC_EXCLUDES(close_mu_);
  // Breaks every watch, closes the connection, waits (bounded by op_timeout_ms) for nats.c's
  // closed callback. Callbacks nats.c delivers after it returns do nothing. Idempotent; a
  // concurrent call returns once the first one is done.
  void close() ETLC_EXCLUDES(close_mu_);

  const NatsStoreOptions& options() const { return options_; }
  const std::string& bucket() const { return bucket_; }
  const Redactor& redactor() const { return redactor_; }
  jsCtx* js() const { return js_.get(); }
  const std::string& stream() const { return stream_; }
  // "$KV.<bucket>.": the subject of key k is subject_prefix() + k.
  const std::string& subject_prefix() const { return subject_prefix_; }
  // The connection every request of this store uses: core subscriptions (key watch hints) and
  // asynchronous publishes (create_many). Valid for the Core's life.
  natsConnection* connection() const { return nc_; }
  // JetStream request options with Wait = op_timeout_ms.
  jsOptions request_options() const;
  bool connected() const;
  NatsStoreStats stats() const;

  // Throws StoreError(closed) after close() or once nats.c gave up reconnecting, and
  // StoreError(unavailable) while the connection is down or reconnecting. Called before every
  // request so that nothing is queued in nats.c's reconnect buffer while we know we are down.
  void require_connected(std::string_view what) const;

  // Removes every message of `key` from the stream (a stream purge by subject: unlike a KV
  // purge it leaves no marker). For the open-time probe's scratch key only. Throws like a write.
  void purge_subject(std::string_view key, std::string_view what);
  // One leader read of `key`'s last message. Read errors throw (unavailable/closed).
  LastMessage read_last(std::string_view key, std::string_view what);
  // One leader read of the message at stream sequence `sequence`, if it is still stored and is
  // a message of `key` (else exists == false). Read errors throw (unavailable/closed).
  LastMessage read_sequence(std::string_view key, std::uint64_t sequence, std::string_view what);
  // The stream sequence of the last message whose subject matches `filter` (a subject with
  // wildcards, e.g. subject_prefix() + watch_filter(prefix)), or 0 if none. One leader read.
  std::uint64_t last_sequence_matching(const std::string& filter, std::string_view what);
  // Publishes `value` (or a DEL marker) to `key` guarded by "expected last subject sequence ==
  // expected" (0: the subject has no message). A wrong-last-sequence reply is returned as
  // !ok; every other failure throws (see nats_errors.hpp, as a write).
  Published publish(std::string_view key, std::string_view value, std::uint64_t expected,
                    bool erase_marker, std::string_view what);
  // The message publish() sends for these arguments (subject, guard, marker and id headers), for
  // writers that send it themselves (create_many's asynchronous publishes). Throws
  // StoreError(unavailable) only if nats.c cannot build it.
  MsgPtr write_message(std::string_view key, std::string_view value, std::uint64_t expected,
                       bool erase_marker, std::string_view what) const;
  // Write messages sent outside publish() (NatsStoreStats::publishes).
  void count_publishes(std::uint64_t n) { publishes_.fetch_add(n, std::memory_order_relaxed); }

  RevisionSet& live_revisions() { return live_revisions_; }
  // Revisions known to be delete markers (from erase results, reads and watches), so create can
  // re-try over a marker without reading it first.
  RevisionSet& delete_markers() { return delete_markers_; }
  // Per key, the last delete marker seen (create's one-round-trip path; see marker_hints.hpp).
  MarkerHints& marker_hints() { return marker_hints_; }
  void count_guard_read() { guard_reads_.fetch_add(1, std::memory_order_relaxed); }
  void count_broken_watch() { watches_broken_.fetch_add(1, std::memory_order_relaxed); }
  // Key watch counters (NatsStoreStats).
  struct KeyWatchCounters {
    std::atomic<std::uint64_t> opened{0};
    std::atomic<std::uint64_t> broken{0};
    std::atomic<std::uint64_t> hints{0};
    std::atomic<std::uint64_t> reads{0};
    std::atomic<std::uint64_t> events{0};
  };
  KeyWatchCounters& key_watch_counters() { return key_counters_; }

  // The reader thread shared by every key watch of this store, started on first use. Throws
  // StoreError(closed) after close(), which stops it.
  std::shared_ptr<HintReader> hint_reader() ETLC_EXCLUDES(reader_mu_);

  // The watch registry (weak references; a watch unregisters itself when destroyed).
  void register_watch(const std::shared_ptr<RegisteredWatch>& state) ETLC_EXCLUDES(watches_mu_);
  void unregister_watch(const RegisteredWatch* state) ETLC_EXCLUDES(watches_mu_);
  // Fails every registered watch (RegisteredWatch::fail, which takes the watch's own lock).
  void break_watches(std::string_view reason) ETLC_EXCLUDES(watches_mu_);
  // Fails the watches that a dropped connection may have made lose events (key watches).
  // `drop`: the connection dropped; every such watch registered so far breaks and a new
  // generation starts. Otherwise (reconnected): only those registered before the last drop, so a
  // watch opened on the re-established connection before this callback ran is kept.
  void break_disconnect_sensitive_watches(std::string_view reason, bool drop)
      ETLC_EXCLUDES(watches_mu_);
  std::size_t watcher_count() const ETLC_EXCLUDES(watches_mu_);

  // A guarded publish's reply judged as publish() judges it: ok (not a duplicate id), or !ok for
  // a lost guard (wrong last sequence, with the last revision parsed from `error_text`; a
  // duplicate message id); nullopt for any other failure, which the caller classifies.
  static std::optional<Published> judge_reply(natsStatus status, jsErrCode jerr,
                                              const jsPubAck* ack, std::string_view error_text);

  // nats.c subject filter for a contract prefix: "" -> ">", "a.b." -> "a.b.>".
  static std::string watch_filter(std::string_view prefix);

 private:
  void connect() ETLC_EXCLUDES(close_mu_);
  void ensure_bucket();
  // One attempt to create the bucket: nullopt once created; the failure when another look is
  // worth it (a concurrent create, a transient error); throws when none is. `overlaps` counts
  // consecutive "subjects overlap" answers across attempts.
  std::optional<NatsFailure> create_bucket(std::string_view what, Clock::time_point deadline,
                                           int& overlaps);
  void check_compatible(const jsStreamInfo& info) const;
  void wait_for_stream_leader();
  // Returns once the stream answers publishes. nats-server 2.9.10 lists a stream being created
  // before its message store exists, and a message read in that window crashes the server, so
  // no read may reach a stream before this returns. Throws StoreError(unavailable) after
  // connect_timeout_ms, StoreError(incompatible) if the stream stores the guarded publish.
  void wait_until_accepting();
  // One js_PublishMsg of `value` to `subj` with the expected-last-subject-sequence header
  // `expected`, a DEL marker if `erase_marker`, and a Nats-Msg-Id if `msg_id` is not empty. The
  // raw outcome is the caller's to judge; throws StoreError only if the message cannot be built.
  struct Sent {
    natsStatus status = NATS_OK;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    PubAckPtr ack;
  };
  Sent send_guarded(const std::string& subj, std::string_view value, const std::string& expected,
                    bool erase_marker, const std::string& msg_id, std::string_view what);
  MsgPtr build_message(const std::string& subj, std::string_view value, const std::string& expected,
                       bool erase_marker, const std::string& msg_id, std::string_view what) const;
  std::string subject(std::string_view key) const;
  // A message of `key` as LastMessage; notes its revision as live or as a delete marker.
  LastMessage remember(std::string_view key, natsMsg* msg);
  std::vector<std::shared_ptr<RegisteredWatch>> live_watches() const ETLC_EXCLUDES(watches_mu_);
  void stop_hint_reader() ETLC_EXCLUDES(reader_mu_);

  static void on_disconnected(natsConnection* nc, void* closure);
  static void on_reconnected(natsConnection* nc, void* closure);
  static void on_closed(natsConnection* nc, void* closure);
  static void on_async_error(natsConnection* nc, natsSubscription* sub, natsStatus err,
                             void* closure);

  const NatsStoreOptions options_;
  const std::string bucket_;
  const std::string stream_;          // "KV_<bucket>"
  const std::string subject_prefix_;  // "$KV.<bucket>."
  const Redactor redactor_;

  // Set by connect(), before the Core is shared, and kept for the Core's life (stats() reads its
  // counters). nats.c's callbacks reach it through events_token_ (connection_events.hpp).
  std::shared_ptr<ConnectionEvents> events_;
  natsConnection* nc_ = nullptr;
  JsPtr js_;

  std::atomic<bool> closed_{false};
  // Held for the whole of close(), which calls break_watches: before watches_mu_, which is before
  // every WatchState's own mutex.
  Mutex close_mu_ ETLC_ACQUIRED_BEFORE(watches_mu_);
  // The callbacks' closure while registered; close() unregisters it (then null).
  void* events_token_ ETLC_GUARDED_BY(close_mu_) = nullptr;

  RevisionSet live_revisions_;
  RevisionSet delete_markers_;
  MarkerHints marker_hints_;
  std::atomic<std::uint64_t> guard_reads_{0};
  std::atomic<std::uint64_t> publishes_{0};
  std::atomic<std::uint64_t> watches_broken_{0};
  KeyWatchCounters key_counters_;

  mutable Mutex watches_mu_;
  struct Registration {
    std::weak_ptr<RegisteredWatch> watch;
    std::uint64_t generation = 0;  // disconnects_seen_ when it registered
  };
  std::unordered_map<const RegisteredWatch*, Registration> watches_ ETLC_GUARDED_BY(watches_mu_);
  std::uint64_t disconnects_seen_ ETLC_GUARDED_BY(watches_mu_) = 0;

  // Taken alone (never with another Core lock held).
  Mutex reader_mu_;
  std::shared_ptr<HintReader> reader_ ETLC_GUARDED_BY(reader_mu_);
  bool reader_stopped_ ETLC_GUARDED_BY(reader_mu_) = false;
};

// The revision a NatsStore write replaced, from its "Nats-Expected-Last-Subject-Sequence"
// header; nullopt when the message has none (a foreign writer) or it does not parse.
std::optional<std::uint64_t> previous_revision(natsMsg* msg);

}  // namespace etlc::nats_detail
