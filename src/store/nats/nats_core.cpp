// Core: connection, bucket creation/adoption, the two request shapes (leader read, guarded
// publish) and the watch registry. See nats_core.hpp and etlc/nats_store.hpp.
#include "store/nats/nats_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include "etlc/clock.hpp"
#include "log.hpp"
#include "store/nats/hint_reader.hpp"

namespace etlc::nats_detail {

namespace {

constexpr std::size_t kLiveRevisionCapacity = std::size_t{1} << 17;
constexpr std::size_t kDeleteMarkerCapacity = std::size_t{1} << 14;
constexpr std::size_t kMarkerHintCapacity = std::size_t{1} << 14;  // keys
// The stream's per-message limit counts headers as well as the value: kMaxStoredValueBytes
// (etlc/store.hpp) leaves room for ours (expected sequence, KV-Operation) above kMaxValueBytes,
// and refuses any message larger than a member reads.
constexpr std::int64_t kBucketMaxValueBytes = static_cast<std::int64_t>(kMaxStoredValueBytes);
constexpr auto kSetupRetryPause = std::chrono::milliseconds(50);
// Consecutive "subjects overlap" answers to our create before we call it a foreign stream.
constexpr int kMaxSubjectOverlaps = 5;
// The subject the readiness publish targets (never written: see wait_until_accepting).
constexpr std::string_view kReadinessKey = "_etlc_ready";

constexpr std::string_view kOperationHeader = "KV-Operation";
constexpr std::string_view kExpectedLastSubjectSeqHeader = "Nats-Expected-Last-Subject-Sequence";
constexpr std::string_view kMsgIdHeader = "Nats-Msg-Id";
// "duplicate message id is in process": another write with the same id is being proposed.
constexpr int kDuplicateInProcessErr = 10158;

Clock::time_point now() {
  return SystemClock::instance().now();
}

std::vector<std::string> secrets_of(const NatsStoreOptions& o) {
  std::vector<std::string> secrets{o.password, o.token};
  return secrets;
}

// Which credentials a connection presented, naming what is not secret (the user, the file's
// path) and never a password, a token or the file's content.
std::string credentials_text(const NatsStoreOptions& o) {
  if (!o.user.empty()) return fmt::format("user/password (user '{}')", o.user);
  if (!o.token.empty()) return "token (options.token)";
  if (!o.credentials_file.empty()) {
    return fmt::format("credentials_file '{}'", o.credentials_file);
  }
  for (const std::string& url : o.servers) {
    if (auto user = url_user(url)) {
      return user->second ? fmt::format("user/password in the server URL (user '{}')", user->first)
                          : "a token in the server URL";
    }
  }
  return "no credentials (none of user/password, token, credentials_file or URL credentials "
         "was given)";
}

std::string servers_text(const NatsStoreOptions& o) {
  std::string out;
  for (const auto& s : o.servers) {
    if (!out.empty()) out += ", ";
    out += redact_url(s);
  }
  return out;
}

std::optional<std::uint64_t> parse_header_u64(natsMsg* msg, std::string_view header) {
  const char* text = nullptr;
  if (natsMsgHeader_Get(msg, header.data(), &text) != NATS_OK || text == nullptr) {
    return std::nullopt;
  }
  const char* end = text + std::strlen(text);
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text, end, v);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

// Parses the N of nats-server's "wrong last sequence: N"; 0 if absent.
std::uint64_t parse_last_sequence(std::string_view text) {
  constexpr std::string_view kMarker = "wrong last sequence: ";
  auto pos = text.find(kMarker);
  if (pos == std::string_view::npos) return 0;
  text.remove_prefix(pos + kMarker.size());
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  (void)ptr;
  return ec == std::errc() ? value : 0;
}

bool setup_retryable(const NatsFailure& f) {
  return f.status == NATS_TIMEOUT || f.status == NATS_NO_RESPONDERS ||
         f.js_code == JSClusterNotAvailErr || f.js_code == JSClusterNotLeaderErr ||
         f.js_code == JSStreamOfflineErr;
}

bool js_disabled(const NatsFailure& f) {
  return f.js_code == JSNotEnabledErr || f.js_code == JSNotEnabledForAccountErr;
}

// Throws ConfigError naming the connection option nats.c refused.
void check_option(natsStatus s, std::string_view option, const Redactor& redactor) {
  if (s == NATS_OK) return;
  NatsFailure f = NatsFailure::capture(s, static_cast<jsErrCode>(0), redactor);
  throw ConfigError(fmt::format("{}: nats.c rejected it: {}", option, f.describe()));
}

// Servers, name, timeouts and the reconnect policy.
void set_connection_options(natsOptions* raw, const NatsStoreOptions& o, const std::string& bucket,
                            const Redactor& redactor) {
  auto check = [&](natsStatus s, std::string_view option) { check_option(s, option, redactor); };
  std::vector<const char*> urls;
  for (const auto& url : o.servers) urls.push_back(url.c_str());
  // SetServers, not SetURL: nats.c 3.4.1's SetURL does not take a list.
  check(natsOptions_SetServers(raw, urls.data(), static_cast<int>(urls.size())), "servers");
  std::string name = o.connection_name.empty() ? "etlc:" + bucket : o.connection_name;
  check(natsOptions_SetName(raw, name.c_str()), "connection_name");
  check(natsOptions_SetTimeout(raw, o.connect_timeout_ms), "connect_timeout_ms");
  check(natsOptions_SetAllowReconnect(raw, true), "max_reconnect_attempts");
  check(natsOptions_SetMaxReconnect(raw, o.max_reconnect_attempts), "max_reconnect_attempts");
  check(natsOptions_SetReconnectWait(raw, o.reconnect_wait_ms), "reconnect_wait_ms");
  // Requests in flight when the connection drops fail at once (as unknown outcomes) instead of
  // waiting for their timeout. A tiny reconnect buffer makes a request that slips past
  // require_connected() during an outage fail (NATS_INSUFFICIENT_BUFFER, nothing sent) rather
  // than sit in an 8 MB buffer and be applied long after the caller gave up on it.
  check(natsOptions_SetFailRequestsOnDisconnect(raw, true), "reconnect policy");
  check(natsOptions_SetReconnectBufSize(raw, 1), "reconnect policy");
  // Key watches hold one core subscription per key. nats.c gives every asynchronous
  // subscription a thread of its own unless delivery goes through the library's shared pool;
  // their callbacks only queue a read, so the pool (one thread by default) serves them all.
  check(natsOptions_UseGlobalMessageDelivery(raw, true), "message delivery");
}

// Credentials and TLS.
void set_security_options(natsOptions* raw, const NatsStoreOptions& o, const Redactor& redactor) {
  auto check = [&](natsStatus s, std::string_view option) { check_option(s, option, redactor); };
  if (!o.user.empty()) {
    check(natsOptions_SetUserInfo(raw, o.user.c_str(), o.password.c_str()), "user/password");
  }
  if (!o.token.empty()) check(natsOptions_SetToken(raw, o.token.c_str()), "token");
  if (!o.credentials_file.empty()) {
    check(natsOptions_SetUserCredentialsFromFiles(raw, o.credentials_file.c_str(), nullptr),
          "credentials_file");
  }
  const NatsTlsOptions& tls = o.tls;
  const bool tls_scheme =
      std::any_of(o.servers.begin(), o.servers.end(),
                  [](const std::string& url) { return url.starts_with("tls://"); });
  bool use_tls = tls.required || tls_scheme || !tls.ca_file.empty() || !tls.cert_file.empty();
  if (!use_tls) return;
  check(natsOptions_SetSecure(raw, true), "tls.required");
  if (!tls.ca_file.empty()) {
    check(natsOptions_LoadCATrustedCertificates(raw, tls.ca_file.c_str()), "tls.ca_file");
  }
  if (!tls.cert_file.empty()) {
    check(natsOptions_LoadCertificatesChain(raw, tls.cert_file.c_str(), tls.key_file.c_str()),
          "tls.cert_file/tls.key_file");
  }
}

// natsConnection_Connect failed with `s` (`f`): bad credentials and TLS setup are configuration
// errors; anything else is the servers being unavailable.
[[noreturn]] void throw_connect_failure(natsStatus s, const NatsFailure& f,
                                        const NatsStoreOptions& o) {
  std::string where = fmt::format("connecting to [{}]", servers_text(o));
  switch (s) {
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_NOT_PERMITTED:
      throw ConfigError(fmt::format("{}: authentication failed with {}: {}", where,
                                    credentials_text(o), f.describe()));
    case NATS_SSL_ERROR:
    case NATS_SECURE_CONNECTION_WANTED:
    case NATS_SECURE_CONNECTION_REQUIRED:
      throw ConfigError(fmt::format(
          "{}: TLS setup failed (check tls.required, tls.ca_file, tls.cert_file/key_file and "
          "the URL scheme): {}",
          where, f.describe()));
    default:
      throw StoreError(StoreErrc::unavailable, fmt::format("{}: {}", where, f.describe()));
  }
}

// The bucket did not become usable within connect_timeout_ms; `f` is the last failure seen.
[[noreturn]] void throw_not_ready(const NatsFailure& f, std::string_view what,
                                  std::int64_t connect_timeout_ms) {
  // A server without JetStream has no responder for the JetStream API at all.
  if (f.status == NATS_NO_RESPONDERS) {
    throw StoreError(StoreErrc::incompatible,
                     fmt::format("{}: nothing answers the JetStream API within "
                                 "connect_timeout_ms ({}); is JetStream enabled (-js)?",
                                 what, connect_timeout_ms));
  }
  throw StoreError(StoreErrc::unavailable,
                   fmt::format("{}: not ready within connect_timeout_ms ({}): {}", what,
                               connect_timeout_ms, f.describe()));
}

}  // namespace

Core::Core(NatsStoreOptions options)
    : options_((options.validate(), std::move(options))),
      bucket_(options_.bucket_name()),
      stream_("KV_" + bucket_),
      subject_prefix_("$KV." + bucket_ + "."),
      redactor_(secrets_of(options_)),
      live_revisions_(kLiveRevisionCapacity),
      delete_markers_(kDeleteMarkerCapacity),
      marker_hints_(kMarkerHintCapacity) {}

Core::~Core() {
  close();
  js_.reset();
  if (nc_ != nullptr) natsConnection_Destroy(nc_);
  nc_ = nullptr;
}

void Core::open() {
  connect();
  ensure_bucket();
}

jsOptions Core::request_options() const {
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = options_.op_timeout_ms;
  return jo;
}

void Core::purge_subject(std::string_view key, std::string_view what) {
  require_connected(what);
  const std::string subj = subject(key);
  jsOptions jo = request_options();
  jo.Stream.Purge.Subject = subj.c_str();
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_PurgeStream(js_.get(), stream_.c_str(), &jo, &jerr);
  if (s != NATS_OK) throw_failure(NatsFailure::capture(s, jerr, redactor_), OpKind::write, what);
}

std::string Core::subject(std::string_view key) const {
  std::string s = subject_prefix_;
  s.append(key);
  return s;
}

std::string Core::watch_filter(std::string_view prefix) {
  std::string filter(prefix);
  filter += '>';
  return filter;
}

void Core::connect() {
  natsOptions* raw = nullptr;
  if (natsOptions_Create(&raw) != NATS_OK) {
    throw StoreError(StoreErrc::unavailable, "nats.c could not allocate connection options");
  }
  OptionsPtr opts(raw);
  set_connection_options(raw, options_, bucket_, redactor_);
  set_security_options(raw, options_, redactor_);

  events_ = std::make_shared<ConnectionEvents>();
  events_->core = weak_from_this();
  void* token = register_events(events_);
  {
    MutexLock lock(close_mu_);
    events_token_ = token;  // close() unregisters it, also when connecting fails below
  }
  check_option(natsOptions_SetDisconnectedCB(raw, &Core::on_disconnected, token), "callbacks",
               redactor_);
  check_option(natsOptions_SetReconnectedCB(raw, &Core::on_reconnected, token), "callbacks",
               redactor_);
  check_option(natsOptions_SetClosedCB(raw, &Core::on_closed, token), "callbacks", redactor_);
  check_option(natsOptions_SetErrorHandler(raw, &Core::on_async_error, token), "callbacks",
               redactor_);

  natsStatus s = natsConnection_Connect(&nc_, raw);
  if (s == NATS_OK) return;
  NatsFailure f = NatsFailure::capture(s, static_cast<jsErrCode>(0), redactor_);
  nc_ = nullptr;
  throw_connect_failure(s, f, options_);
}

void Core::ensure_bucket() {
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = options_.op_timeout_ms;
  jsCtx* js = nullptr;
  if (natsConnection_JetStream(&js, nc_, &jo) != NATS_OK) {
    throw StoreError(StoreErrc::unavailable, "nats.c could not create a JetStream context");
  }
  js_.reset(js);

  auto deadline = now() + std::chrono::milliseconds(options_.connect_timeout_ms);
  std::string what = fmt::format("bucket '{}'", bucket_);
  int overlaps = 0;
  bool holds_messages = false;
  for (;;) {
    jsStreamInfo* raw_info = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    jsOptions ro = request_options();
    natsStatus s = js_GetStreamInfo(&raw_info, js_.get(), stream_.c_str(), &ro, &jerr);
    StreamInfoPtr info(raw_info);
    if (s == NATS_OK && info && info->Config != nullptr) {
      check_compatible(*info);
      // A stream that has stored a message has its message store (see wait_until_accepting).
      holds_messages = info->State.LastSeq > 0;
      break;
    }
    NatsFailure f = NatsFailure::capture(s, jerr, redactor_);
    if (js_disabled(f)) {
      throw StoreError(StoreErrc::incompatible,
                       fmt::format("{}: JetStream is not enabled for this account or server "
                                   "(start nats-server with -js): {}",
                                   what, f.describe()));
    }
    const bool missing = s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr;
    if (missing && !options_.create_bucket) {
      throw StoreError(StoreErrc::not_found,
                       fmt::format("{} does not exist (not created: create_bucket is off)", what));
    }
    if (missing) {
      std::optional<NatsFailure> retry = create_bucket(what, deadline, overlaps);
      if (!retry) break;
      f = std::move(*retry);
    } else if (!setup_retryable(f)) {
      throw_failure(f, OpKind::read, what);
    }
    if (now() >= deadline) throw_not_ready(f, what, options_.connect_timeout_ms);
    std::this_thread::sleep_for(kSetupRetryPause);
  }

  if (options_.replicas > 1) wait_for_stream_leader();
  // A job's bucket holds messages from its first member's probe on, so only a new bucket costs
  // the readiness publish, and read-only tools (etlc status) on a live job never publish.
  if (!holds_messages) wait_until_accepting();
}

std::optional<NatsFailure> Core::create_bucket(std::string_view what, Clock::time_point deadline,
                                               int& overlaps) {
  kvConfig cfg;
  kvConfig_Init(&cfg);
  cfg.Bucket = bucket_.c_str();
  cfg.Description = "etl-coordination job records";
  cfg.History = static_cast<std::uint8_t>(options_.history);
  cfg.MaxValueSize = static_cast<std::int32_t>(kBucketMaxValueBytes);
  cfg.TTL = 0;
  cfg.StorageType = js_FileStorage;
  cfg.Replicas = options_.replicas;
  kvStore* created = nullptr;
  natsStatus cs = js_CreateKeyValue(&created, js_.get(), &cfg);
  KvPtr created_kv(created);
  if (cs == NATS_OK) return std::nullopt;
  NatsFailure cf = NatsFailure::capture(cs, static_cast<jsErrCode>(0), redactor_);
  // Another member may have created it at the same time (possibly differently): re-read.
  // nats-server 2.9 answers a create that races another create of the same stream either
  // "already in use" or "subjects overlap"; the latter also means a stream of another name
  // captures our subjects, which no re-read resolves, hence the bound.
  const bool overlap = cf.detail.find("subjects overlap") != std::string::npos;
  overlaps = overlap ? overlaps + 1 : 0;
  if (overlaps > kMaxSubjectOverlaps || (overlap && now() >= deadline)) {
    throw StoreError(StoreErrc::incompatible,
                     fmt::format("{}: another stream already captures the subjects '{}>': {}", what,
                                 subject_prefix_, cf.describe()));
  }
  if (!overlap && cf.detail.find("already in use") == std::string::npos && !setup_retryable(cf)) {
    StoreErrc code = cf.detail.find("replicas") != std::string::npos ||
                             cf.detail.find("insufficient resources") != std::string::npos
                         ? StoreErrc::incompatible
                         : StoreErrc::unavailable;
    throw StoreError(code, fmt::format("{}: creating it failed: {}", what, cf.describe()));
  }
  return cf;
}

void Core::wait_until_accepting() {
  // Its own bound: the stream may have taken most of the first one to appear or elect a leader.
  auto deadline = now() + std::chrono::milliseconds(options_.connect_timeout_ms);
  // A publish that cannot land: its expected last sequence is one no key can have. The stream
  // answers it (10071, nothing written) only once it subscribes to its subjects, which it does
  // after its message store exists; before that nobody answers (no responders).
  const std::string subj = subject(kReadinessKey);
  const std::string expected = std::to_string(std::numeric_limits<std::int64_t>::max());
  const std::string what =
      fmt::format("bucket '{}': waiting until the stream accepts messages", bucket_);
  for (;;) {
    auto [s, jerr, ack] = send_guarded(subj, {}, expected, false, {}, what);
    if (jerr == JSStreamWrongLastSequenceErr) return;
    if (s == NATS_OK) {
      // The stream ignored the guard: no fencing can work on it. Remove the message (best
      // effort; the error below is what matters) and refuse the bucket.
      const std::uint64_t written = ack ? ack->Sequence : 0;
      try {
        if (written > 0) publish(kReadinessKey, {}, written, true, what);
      } catch (const StoreError&) {  // NOLINT(bugprone-empty-catch): see above
      }
      throw StoreError(StoreErrc::incompatible,
                       fmt::format("{}: the stream stored a publish whose "
                                   "Nats-Expected-Last-Subject-Sequence did not match; it does "
                                   "not enforce the guards fencing needs",
                                   what));
    }
    NatsFailure f = NatsFailure::capture(s, jerr, redactor_);
    if (!setup_retryable(f)) throw_failure(f, OpKind::write, what);
    if (now() >= deadline) {
      throw StoreError(StoreErrc::unavailable,
                       fmt::format("{}: not within connect_timeout_ms ({}): {}", what,
                                   options_.connect_timeout_ms, f.describe()));
    }
    std::this_thread::sleep_for(kSetupRetryPause);
  }
}

void Core::check_compatible(const jsStreamInfo& info) const {
  const jsStreamConfig& c = *info.Config;
  auto fail = [&](const std::string& why) {
    throw StoreError(
        StoreErrc::incompatible,
        fmt::format("bucket '{}' exists with incompatible settings: {}", bucket_, why));
  };
  if (c.MaxMsgsPerSubject != options_.history) {
    fail(
        fmt::format("history is {}, options.history is {}", c.MaxMsgsPerSubject, options_.history));
  }
  if (c.Replicas != options_.replicas) {
    fail(fmt::format("replicas is {}, options.replicas is {}", c.Replicas, options_.replicas));
  }
  if (c.Storage != js_FileStorage) fail("storage is memory, the protocol needs file storage");
  if (c.MaxAge != 0) {
    fail(fmt::format("ttl (stream MaxAge) is {} ns; expiry deletes keys without a watch event",
                     c.MaxAge));
  }
  if (c.MaxMsgSize >= 0 && c.MaxMsgSize < kBucketMaxValueBytes) {
    fail(fmt::format("max value size is {} bytes, below the {} this store needs", c.MaxMsgSize,
                     kBucketMaxValueBytes));
  }
  if ((c.MaxMsgs > 0 || c.MaxBytes > 0) && c.Discard == js_DiscardOld) {
    fail("a message or byte limit with discard=old would silently drop live keys");
  }
  if (c.Duplicates < 1'000'000'000) {
    fail(
        fmt::format("the duplicate window is {} ns; CAS on replicated buckets relies on message "
                    "ids and needs at least 1 s",
                    c.Duplicates));
  }
  if (c.Sealed) fail("the stream is sealed (read-only)");
  if (c.Mirror != nullptr) fail("the stream is a mirror (not writable)");
  std::string wanted = subject_prefix_ + ">";
  bool has_subject = false;
  for (int i = 0; i < c.SubjectsLen; ++i) {
    if (c.Subjects[i] != nullptr && wanted == c.Subjects[i]) has_subject = true;
  }
  if (!has_subject) fail(fmt::format("the stream does not capture '{}'", wanted));
}

void Core::wait_for_stream_leader() {
  auto deadline = now() + std::chrono::milliseconds(options_.connect_timeout_ms);
  std::string last;
  for (;;) {
    jsStreamInfo* raw_info = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    jsOptions ro = request_options();
    natsStatus s = js_GetStreamInfo(&raw_info, js_.get(), stream_.c_str(), &ro, &jerr);
    StreamInfoPtr info(raw_info);
    if (s == NATS_OK && info && info->Cluster != nullptr && info->Cluster->Leader != nullptr &&
        info->Cluster->Leader[0] != '\0') {
      return;
    }
    last = s == NATS_OK ? "no leader elected yet"
                        : NatsFailure::capture(s, jerr, redactor_).describe();
    if (now() >= deadline) {
      throw StoreError(StoreErrc::unavailable,
                       fmt::format("bucket '{}': no stream leader within connect_timeout_ms ({}): "
                                   "{}",
                                   bucket_, options_.connect_timeout_ms, last));
    }
    std::this_thread::sleep_for(kSetupRetryPause);
  }
}

void Core::close() {
  MutexLock lock(close_mu_);
  if (closed_.exchange(true)) return;
  break_watches("the store was closed");
  {
    MutexLock reader_lock(reader_mu_);
    reader_stopped_ = true;  // no key watch starts it again
  }
  if (nc_ != nullptr) {
    natsConnection_Close(nc_);
    if (!events_->wait_closed(std::chrono::milliseconds(options_.op_timeout_ms))) {
      etlc::log().warn("nats: bucket '{}': no closed callback from nats.c within {} ms", bucket_,
                       options_.op_timeout_ms);
    }
  }
  // After the connection: a read in flight on the reader thread fails at once instead of
  // holding the join for op_timeout_ms.
  stop_hint_reader();
  // nats.c may still deliver asynchronous errors (see connection_events.hpp): from here on they
  // find no events and do nothing.
  unregister_events(events_token_);
  events_token_ = nullptr;
}

std::shared_ptr<HintReader> Core::hint_reader() {
  MutexLock lock(reader_mu_);
  if (reader_stopped_) {
    throw StoreError(StoreErrc::closed, fmt::format("bucket '{}': store closed", bucket_));
  }
  if (!reader_) reader_ = std::make_shared<HintReader>(*this);
  return reader_;
}

void Core::stop_hint_reader() {
  std::shared_ptr<HintReader> reader;
  {
    MutexLock lock(reader_mu_);
    reader_stopped_ = true;
    reader = std::move(reader_);
  }
  if (reader) reader->stop();
}

bool Core::connected() const {
  return !closed_.load() && nc_ != nullptr &&
         natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED;
}

NatsStoreStats Core::stats() const {
  NatsStoreStats s;
  if (events_ != nullptr) {
    s.disconnects = events_->disconnects.load();
    s.reconnects = events_->reconnects.load();
    s.async_errors = events_->async_errors.load();
  }
  s.watches_broken = watches_broken_.load();
  s.guard_reads = guard_reads_.load();
  s.publishes = publishes_.load();
  s.key_watches_opened = key_counters_.opened.load();
  s.key_watches_broken = key_counters_.broken.load();
  s.key_hints = key_counters_.hints.load();
  s.key_reads = key_counters_.reads.load();
  s.key_events = key_counters_.events.load();
  return s;
}

void Core::require_connected(std::string_view what) const {
  if (closed_.load()) throw StoreError(StoreErrc::closed, fmt::format("{}: store closed", what));
  natsConnStatus st = natsConnection_Status(nc_);
  if (st == NATS_CONN_STATUS_CONNECTED) return;
  if (st == NATS_CONN_STATUS_CLOSED) {
    throw StoreError(StoreErrc::closed,
                     fmt::format("{}: the NATS connection is closed (reconnect attempts "
                                 "exhausted); open a new store",
                                 what));
  }
  throw StoreError(StoreErrc::unavailable,
                   fmt::format("{}: not connected to NATS (reconnecting); nothing was sent", what));
}

std::uint64_t Core::last_sequence_matching(const std::string& filter, std::string_view what) {
  require_connected(what);
  natsMsg* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsOptions jo = request_options();
  natsStatus s = js_GetLastMsg(&raw, js_.get(), stream_.c_str(), filter.c_str(), &jo, &jerr);
  MsgPtr msg(raw);
  if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return 0;
  if (s != NATS_OK) throw_failure(NatsFailure::capture(s, jerr, redactor_), OpKind::read, what);
  return natsMsg_GetSequence(msg.get());
}

LastMessage Core::read_last(std::string_view key, std::string_view what) {
  require_connected(what);
  std::string subj = subject(key);
  natsMsg* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsOptions jo = request_options();
  // js_GetLastMsg uses $JS.API.STREAM.MSG.GET, which only the stream leader answers.
  natsStatus s = js_GetLastMsg(&raw, js_.get(), stream_.c_str(), subj.c_str(), &jo, &jerr);
  MsgPtr msg(raw);
  if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return LastMessage{};
  if (s != NATS_OK) {
    throw_failure(NatsFailure::capture(s, jerr, redactor_), OpKind::read, what);
  }
  return remember(key, msg.get());
}

LastMessage Core::read_sequence(std::string_view key, std::uint64_t sequence,
                                std::string_view what) {
  require_connected(what);
  natsMsg* raw = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsOptions jo = request_options();
  // STREAM.MSG.GET by sequence: the stream leader again.
  natsStatus s = js_GetMsg(&raw, js_.get(), stream_.c_str(), sequence, &jo, &jerr);
  MsgPtr msg(raw);
  if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) return LastMessage{};
  if (s != NATS_OK) {
    throw_failure(NatsFailure::capture(s, jerr, redactor_), OpKind::read, what);
  }
  const char* subj = natsMsg_GetSubject(msg.get());
  if (subj == nullptr || subject(key) != subj) return LastMessage{};  // another key's message
  return remember(key, msg.get());
}

LastMessage Core::remember(std::string_view key, natsMsg* msg) {
  LastMessage out;
  out.exists = true;
  out.revision = natsMsg_GetSequence(msg);
  const char* op = nullptr;
  if (natsMsgHeader_Get(msg, kOperationHeader.data(), &op) == NATS_OK && op != nullptr) {
    out.tombstone = std::strcmp(op, "DEL") == 0 || std::strcmp(op, "PURGE") == 0;
  }
  out.previous = previous_revision(msg);
  if (out.tombstone) {
    delete_markers_.insert(out.revision);
    marker_hints_.note(key, out.revision);
  } else {
    const char* data = natsMsg_GetData(msg);
    int len = natsMsg_GetDataLength(msg);
    if (data != nullptr && len > 0) out.value.assign(data, static_cast<std::size_t>(len));
    live_revisions_.insert(out.revision);
  }
  return out;
}

MsgPtr Core::build_message(const std::string& subj, std::string_view value,
                           const std::string& expected, bool erase_marker,
                           const std::string& msg_id, std::string_view what) const {
  natsMsg* raw = nullptr;
  natsStatus s =
      natsMsg_Create(&raw, subj.c_str(), nullptr, value.data(), static_cast<int>(value.size()));
  MsgPtr msg(raw);
  // Set by hand: nats.c ignores jsPubOptions.ExpectLastSubjectSeq == 0, and 0 ("no message on
  // this subject yet") is exactly what create needs.
  if (s == NATS_OK) {
    s = natsMsgHeader_Set(msg.get(), kExpectedLastSubjectSeqHeader.data(), expected.c_str());
  }
  if (s == NATS_OK && erase_marker) {
    s = natsMsgHeader_Set(msg.get(), kOperationHeader.data(), "DEL");
  }
  if (s == NATS_OK && !msg_id.empty()) {
    s = natsMsgHeader_Set(msg.get(), kMsgIdHeader.data(), msg_id.c_str());
  }
  if (s != NATS_OK) {
    throw StoreError(
        StoreErrc::unavailable,
        fmt::format("{}: building the message failed: {}", what,
                    NatsFailure::capture(s, static_cast<jsErrCode>(0), redactor_).describe()));
  }
  return msg;
}

Core::Sent Core::send_guarded(const std::string& subj, std::string_view value,
                              const std::string& expected, bool erase_marker,
                              const std::string& msg_id, std::string_view what) {
  MsgPtr msg = build_message(subj, value, expected, erase_marker, msg_id, what);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = options_.op_timeout_ms;
  jsPubAck* raw_ack = nullptr;
  Sent out;
  publishes_.fetch_add(1, std::memory_order_relaxed);
  out.status = js_PublishMsg(&raw_ack, js_.get(), msg.get(), &po, &out.jerr);
  out.ack.reset(raw_ack);
  return out;
}

// nats-server 2.9 checks a non-zero expected last subject sequence of a replicated stream only
// against the stored state when it proposes the write, not against writes still being
// replicated, so two concurrent CAS on one key with the same expected revision can both win
// (measured: 1600 "won" increments of one R3 counter left it at 702). The message id
// "<key>@<expected>" closes that race: the server registers ids at proposal time and
// deduplicates the second writer, which we report as a conflict. Expected 0 (create) is checked
// when the write is applied, which is race-free, and needs no id.
MsgPtr Core::write_message(std::string_view key, std::string_view value, std::uint64_t expected,
                           bool erase_marker, std::string_view what) const {
  const std::string expected_text = std::to_string(expected);
  std::string msg_id;
  if (expected != 0) msg_id.append(key).append("@").append(expected_text);
  return build_message(subject(key), value, expected_text, erase_marker, msg_id, what);
}

std::optional<Published> Core::judge_reply(natsStatus status, jsErrCode jerr, const jsPubAck* ack,
                                           std::string_view error_text) {
  Published out;
  if (status == NATS_OK && ack != nullptr) {
    // A duplicate: another writer (or an earlier attempt of ours whose outcome was unknown)
    // already wrote with this (key, expected revision), so this write was not applied. The
    // sequence in the reply is that earlier write's, not necessarily the key's current revision.
    if (ack->Duplicate) return out;
    out.ok = true;
    out.revision = ack->Sequence;
    return out;
  }
  if (static_cast<int>(jerr) == kDuplicateInProcessErr) return out;
  if (jerr == JSStreamWrongLastSequenceErr) {
    out.last_revision = parse_last_sequence(error_text);
    return out;
  }
  return std::nullopt;
}

Published Core::publish(std::string_view key, std::string_view value, std::uint64_t expected,
                        bool erase_marker, std::string_view what) {
  require_connected(what);
  MsgPtr msg = write_message(key, value, expected, erase_marker, what);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = options_.op_timeout_ms;
  jsPubAck* raw_ack = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  publishes_.fetch_add(1, std::memory_order_relaxed);
  const natsStatus s = js_PublishMsg(&raw_ack, js_.get(), msg.get(), &po, &jerr);
  PubAckPtr ack(raw_ack);
  NatsFailure f = s == NATS_OK ? NatsFailure{} : NatsFailure::capture(s, jerr, redactor_);
  if (auto judged = judge_reply(s, jerr, ack.get(), f.detail)) return *judged;
  throw_failure(f, OpKind::write, what);
}

void Core::register_watch(const std::shared_ptr<RegisteredWatch>& state) {
  MutexLock lock(watches_mu_);
  watches_[state.get()] = Registration{state, disconnects_seen_};
}

void Core::unregister_watch(const RegisteredWatch* state) {
  MutexLock lock(watches_mu_);
  watches_.erase(state);
}

std::vector<std::shared_ptr<RegisteredWatch>> Core::live_watches() const {
  std::vector<std::shared_ptr<RegisteredWatch>> live;
  MutexLock lock(watches_mu_);
  for (const auto& [ptr, reg] : watches_) {
    if (auto state = reg.watch.lock()) live.push_back(std::move(state));
  }
  return live;
}

void Core::break_watches(std::string_view reason) {
  for (auto& state : live_watches()) state->fail(std::string(reason));
}

void Core::break_disconnect_sensitive_watches(std::string_view reason, bool drop) {
  std::vector<std::shared_ptr<RegisteredWatch>> doomed;
  {
    MutexLock lock(watches_mu_);
    for (const auto& [ptr, reg] : watches_) {
      if (!drop && reg.generation >= disconnects_seen_) continue;
      if (auto state = reg.watch.lock(); state && state->breaks_on_disconnect()) {
        doomed.push_back(std::move(state));
      }
    }
    if (drop) ++disconnects_seen_;
  }
  for (auto& state : doomed) state->fail(std::string(reason));  // outside: fail takes its locks
}

std::size_t Core::watcher_count() const {
  std::size_t n = 0;
  for (auto& state : live_watches()) n += state->broken() ? 0 : 1;
  return n;
}

// The callbacks: `closure` is the events' token, which names nothing once close() returned.
void Core::on_disconnected(natsConnection*, void* closure) {
  auto ev = find_events(closure);
  if (!ev) return;
  ev->disconnects.fetch_add(1);
  auto core = ev->core.lock();
  if (core && !core->closed_.load()) {
    etlc::log().warn("nats: bucket '{}': disconnected, reconnecting", core->bucket_);
    // Change hints published while we are away are lost for good.
    core->break_disconnect_sensitive_watches(
        "the NATS connection dropped: key watch hints may have been lost; re-watch", true);
  }
}

void Core::on_reconnected(natsConnection*, void* closure) {
  auto ev = find_events(closure);
  if (!ev) return;
  ev->reconnects.fetch_add(1);
  if (auto core = ev->core.lock()) {
    etlc::log().info("nats: bucket '{}': reconnected", core->bucket_);
    // Also here, in case a watch registered before the drop escaped its callback.
    core->break_disconnect_sensitive_watches(
        "the NATS connection was re-established: key watch hints may have been lost; re-watch",
        false);
  }
}

void Core::on_closed(natsConnection*, void* closure) {
  if (auto ev = find_events(closure)) ev->mark_closed();
}

void Core::on_async_error(natsConnection*, natsSubscription* sub, natsStatus err, void* closure) {
  auto ev = find_events(closure);
  if (!ev) return;  // after close(): see connection_events.hpp
  ev->async_errors.fetch_add(1);
  auto core = ev->core.lock();
  if (!core || core->closed_.load()) return;
  etlc::log().warn("nats: bucket '{}': asynchronous error: {}", core->bucket_,
                   natsStatus_GetText(err));
  // Only watches own subscriptions here. A watch whose ordered consumer stopped getting
  // heartbeats (its server died, or a long outage) or dropped messages (slow consumer) may be
  // silent or have a gap; break them all so every consumer re-watches from a fresh snapshot.
  if (sub != nullptr && (err == NATS_MISSED_HEARTBEAT || err == NATS_SLOW_CONSUMER)) {
    core->break_watches(
        fmt::format("nats.c reported {} on a watch subscription", natsStatus_GetText(err)));
  }
}

std::optional<std::uint64_t> previous_revision(natsMsg* msg) {
  return parse_header_u64(msg, kExpectedLastSubjectSeqHeader);
}

}  // namespace etlc::nats_detail
