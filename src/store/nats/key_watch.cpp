// See key_watch.hpp.
#include "store/nats/key_watch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

namespace etlc::nats_detail {

namespace {

// Process-wide: watch ids (never reused) and the registry that turns a subscription's closure
// (a watch id) into the watch. nats.c may run a callback after the subscription was destroyed
// began (a message already handed to the delivery thread), so the closure names no memory: a
// callback whose id names nothing any more does nothing.
std::atomic<std::uint64_t> next_watch_id{1};

struct TokenRegistry {
  Mutex mu;
  std::unordered_map<std::uint64_t, std::weak_ptr<KeyWatchState>> live ETLC_GUARDED_BY(mu);
};

// Never destroyed: nats.c's delivery thread may run a callback while the process exits.
TokenRegistry& tokens() {
  static auto* const instance = new TokenRegistry();
  return *instance;
}

void register_token(std::uint64_t id, std::weak_ptr<KeyWatchState> state) {
  TokenRegistry& r = tokens();
  MutexLock lock(r.mu);
  r.live.emplace(id, std::move(state));
}

std::shared_ptr<KeyWatchState> find_token(std::uint64_t id) {
  TokenRegistry& r = tokens();
  MutexLock lock(r.mu);
  auto it = r.live.find(id);
  return it == r.live.end() ? nullptr : it->second.lock();
}

void unregister_token(std::uint64_t id) {
  std::weak_ptr<KeyWatchState> last;  // released after the lock
  TokenRegistry& r = tokens();
  MutexLock lock(r.mu);
  auto it = r.live.find(id);
  if (it == r.live.end()) return;
  last = std::move(it->second);
  r.live.erase(it);
}

// nats.c's message callback of every key subscription (on its shared delivery thread).
void on_message(natsConnection*, natsSubscription*, natsMsg* raw, void* closure) {
  MsgPtr msg(raw);
  auto state = find_token(reinterpret_cast<std::uintptr_t>(closure));
  if (!state) return;
  const char* subject = natsMsg_GetSubject(msg.get());
  if (subject == nullptr) return;
  if (auto key = state->key_of_subject(subject)) state->on_hint(*key, previous_revision(msg.get()));
}

std::unordered_map<std::string, std::uint32_t> index_keys(const std::vector<std::string>& keys) {
  std::unordered_map<std::string, std::uint32_t> index;
  for (std::size_t i = 0; i < keys.size(); ++i)
    index.emplace(keys[i], static_cast<std::uint32_t>(i));
  return index;
}

std::string describe(const std::vector<std::string>& keys) {
  if (keys.size() == 1) return fmt::format("key watch of '{}'", keys.front());
  return fmt::format("key watch of '{}' and {} more", keys.front(), keys.size() - 1);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
KeyWatchState::KeyWatchState(std::shared_ptr<Core> core, std::vector<std::string> keys,
                             WatchOptions options, std::weak_ptr<HintReader> reader)
    : core_(std::move(core)),
      keys_(std::move(keys)),
      index_(index_keys(keys_)),
      options_(std::move(options)),
      what_(describe(keys_)),
      id_(next_watch_id.fetch_add(1)),
      reader_(std::move(reader)),
      slots_(keys_.size()) {}

KeyWatchState::~KeyWatchState() {
  shutdown();
}

// The open sequence. 1. Subscribe to every key, then flush: once the server answers the PING
// that follows our SUBs it has registered them, so every publish it routes after that reaches
// us. 2. Read every key from the stream leader: the snapshot. 3. Queue it and caught_up.
// The window: a publish routed before the interest existed (on our server; in a cluster, on the
// writer's server, which learns of it over a route a moment later) sends us no hint, yet the
// stream may store it only after our snapshot read: storing is asynchronous to routing, and an
// R3 stream commits through raft first. Such a write reached the stream before our flush
// returned, so it is stored within the stream's commit latency (milliseconds; longer only
// during a leader election, when it may also be lost). 4. So every key is read again
// kConfirmDelays after the snapshot (100 ms and 2 s), which finds any such write; a write that
// takes longer still is followed by the next write to that key, whose previous revision then
// reveals the gap (latest_only: delivers the newer value). Hints that arrive meanwhile are
// read as usual; every read goes through apply(), which keeps only newer revisions per key.
void KeyWatchState::open() {
  core_->require_connected(what_);
  register_token(id_, weak_from_this());  // before the first subscription can deliver
  if (auto reader = reader_.lock()) {
    for (std::uint32_t i = 0; i < keys_.size(); ++i) {
      reader->attach(keys_[i], id_, weak_from_this(), i);
    }
  }
  subscribe_all();
  natsStatus s = natsConnection_FlushTimeout(core_->connection(), core_->options().op_timeout_ms);
  if (s != NATS_OK) {
    throw_failure(NatsFailure::capture(s, static_cast<jsErrCode>(0), core_->redactor()),
                  OpKind::read, what_ + ": confirming the subscriptions");
  }
  for (std::uint32_t i = 0; i < keys_.size(); ++i) {
    if (broken()) return;  // closed or broken meanwhile: poll reports it
    LastMessage last = core_->read_last(keys_[i], what_);
    core_->key_watch_counters().reads.fetch_add(1, std::memory_order_relaxed);
    apply(i, last, true);
  }
  finish_snapshot();
  for (auto delay : kConfirmDelays) {
    for (std::uint32_t i = 0; i < keys_.size(); ++i) {
      if (!request_read(i, delay)) {
        fail(fmt::format("{}: the store's read queue is full", what_));
        return;
      }
    }
  }
}

void KeyWatchState::subscribe_all() {
  MutexLock lock(subs_mu_);
  for (const std::string& key : keys_) {
    if (unsubscribed_) return;  // broken meanwhile
    const std::string subject = core_->subject_prefix() + key;
    natsSubscription* sub = nullptr;
    natsStatus s = natsConnection_Subscribe(&sub, core_->connection(), subject.c_str(), &on_message,
                                            reinterpret_cast<void*>(id_));
    if (s == NATS_OK) {
      subs_.push_back(sub);
      s = natsSubscription_SetPendingLimits(sub, kSubPendingMessages, kSubPendingBytes);
    }
    if (s != NATS_OK) {
      throw_failure(NatsFailure::capture(s, static_cast<jsErrCode>(0), core_->redactor()),
                    OpKind::read, fmt::format("{}: subscribing to '{}'", what_, subject));
    }
  }
}

std::optional<std::uint32_t> KeyWatchState::key_of_subject(std::string_view subject) const {
  const std::string& prefix = core_->subject_prefix();
  if (!subject.starts_with(prefix)) return std::nullopt;
  auto it = index_.find(std::string(subject.substr(prefix.size())));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void KeyWatchState::on_hint(std::uint32_t key, std::optional<std::uint64_t> expected) {
  core_->key_watch_counters().hints.fetch_add(1, std::memory_order_relaxed);
  {
    MutexLock lock(mu_);
    if (broken_ || stopping_) return;
    KeySlot& slot = slots_[key];
    if (expected) slot.awaited = std::max(slot.awaited.value_or(0), *expected);
  }
  bool queued = request_read(key, std::nullopt);
  if (queued && !expected) {
    for (auto delay : kConfirmDelays) queued = queued && request_read(key, delay);
  }
  if (!queued) fail(fmt::format("{}: the store's read queue is full", what_));
}

bool KeyWatchState::request_read(std::uint32_t key,
                                 std::optional<std::chrono::milliseconds> delay) {
  auto reader = reader_.lock();
  if (!reader) return false;
  if (!delay) return reader->request(keys_[key]);
  return reader->request_at(keys_[key], std::chrono::steady_clock::now() + *delay);
}

// ---------------------------------------------------------------------------------------------
void KeyWatchState::on_read(std::uint32_t key, const LastMessage& last, GapReader& gaps) {
  {
    MutexLock lock(mu_);
    if (broken_ || stopping_) return;
  }
  LastMessage mine = last;
  std::vector<LastMessage> missing;
  bool bridged = false;
  try {
    bridged = fill_gap(key, mine, gaps, missing);
  } catch (const StoreError& e) {
    on_read_failure(key, e);
    return;
  }
  for (LastMessage& m : missing) apply(key, m, false);
  apply(key, mine, true, bridged);
}

// After caught_up, `read` may name a previous revision the watch never read (the key was
// written more than once since its last read). A bucket keeping more than one value per key may
// still hold those values: read them back by sequence, newest first, until the chain reaches
// the last revision the watch knows. Returns them oldest first, or nothing if none are missing
// or the chain cannot be completed (then apply(read) breaks the watch: a gap). Returns whether
// it looked (false before caught_up: then apply() asks for another read if it finds a gap,
// since the snapshot may have ended meanwhile).
bool KeyWatchState::fill_gap(std::uint32_t key, const LastMessage& read, GapReader& gaps,
                             std::vector<LastMessage>& missing) {
  const auto history = static_cast<std::size_t>(core_->options().history);
  if (options_.latest_only || history <= 1 || !read.exists || !read.previous) return true;
  std::uint64_t known = 0;
  {
    MutexLock lock(mu_);
    if (broken_ || stopping_) return true;
    if (!caught_up_) return false;
    known = slots_[key].last_seen;  // after caught_up only the reader thread changes it
  }
  if (read.revision <= known || *read.previous == known) return true;
  std::vector<LastMessage> chain;
  std::optional<std::uint64_t> previous = read.previous;
  while (previous && *previous > known && chain.size() < history) {
    LastMessage m = gaps.at(*previous);
    if (!m.exists) return true;  // dropped already (more than `history` writes behind)
    previous = m.previous;
    chain.push_back(std::move(m));
  }
  if (!previous || *previous != known) return true;
  std::reverse(chain.begin(), chain.end());
  missing = std::move(chain);
  return true;
}

void KeyWatchState::on_read_failure(std::uint32_t key, const StoreError& error) {
  int failures = 0;
  {
    MutexLock lock(mu_);
    if (broken_ || stopping_) return;
    failures = ++slots_[key].failed_reads;
  }
  if (error.code() == StoreErrc::unavailable && failures <= kMaxReadRetries &&
      request_read(key, kReadRetryPause * (1 << (failures - 1)))) {
    return;
  }
  fail(fmt::format("{}: reading key '{}' failed ({} attempts): {}", what_, keys_[key], failures,
                   error.what()));
}

void KeyWatchState::apply(std::uint32_t key, LastMessage& read, bool latest, bool bridged) {
  Followup next;
  {
    MutexLock lock(mu_);
    if (broken_ || stopping_) return;
    next = apply_locked(key, read, latest, bridged);
    if (next.break_reason) next.notify = break_locked(std::move(*next.break_reason));
  }
  if (next.break_reason) {
    if (next.notify) {
      unsubscribe_all();
      notify_consumer();
    }
    return;
  }
  if (next.reread_after && !request_read(key, next.reread_after)) {
    fail(fmt::format("{}: the store's read queue is full", what_));
    return;
  }
  if (next.notify) notify_consumer();
}

KeyWatchState::Followup KeyWatchState::apply_locked(std::uint32_t key, LastMessage& read,
                                                    bool latest, bool bridged) {
  KeySlot& slot = slots_[key];
  slot.failed_reads = 0;
  Followup next;
  if (caught_up_ && !bridged && read.exists && read.revision > slot.last_seen) {
    next.reread_after = std::chrono::milliseconds(0);  // read while the snapshot ended: again
    return next;
  }
  if (read.exists && read.revision > slot.last_seen) {
    if (!caught_up_) {  // the snapshot keeps the latest state only
      slot.last_seen = read.revision;
      slot.live = !read.tombstone;
      slot.value = read.tombstone ? std::string() : std::move(read.value);
    } else {
      next.break_reason = emit_locked(key, read);
      if (next.break_reason) return next;
      next.notify = true;
    }
  }
  // Only the key's last message says whether a hinted write may still land.
  if (latest) {
    next.reread_after = await_locked(key, read.exists ? read.revision : 0, next.break_reason);
  }
  return next;
}

std::optional<std::string> KeyWatchState::emit_locked(std::uint32_t key, LastMessage& read) {
  KeySlot& slot = slots_[key];
  if (!options_.latest_only && read.previous && *read.previous != slot.last_seen) {
    return fmt::format(
        "{}: key '{}' went from revision {} to {} through revision {} that this watch never "
        "read (overwritten before the watch read it); re-watch",
        what_, keys_[key], slot.last_seen, read.revision, *read.previous);
  }
  if (queue_.size() >= options_.max_pending) {
    return fmt::format("{}: more than max_pending ({}) events unpolled", what_,
                       options_.max_pending);
  }
  slot.last_seen = read.revision;
  slot.live = !read.tombstone;
  if (read.tombstone) {
    queue_.push_back(WatchEvent{WatchEvent::Kind::erase, keys_[key], {}, read.revision});
  } else {
    queue_.push_back(
        WatchEvent{WatchEvent::Kind::put, keys_[key], std::move(read.value), read.revision});
  }
  core_->key_watch_counters().events.fetch_add(1, std::memory_order_relaxed);
  return std::nullopt;
}

// A hinted write expecting to replace revision `awaited` can still be stored while the key's
// last revision is `awaited`: read again. Once the key moved past it, it was stored or never
// will be.
std::optional<std::chrono::milliseconds> KeyWatchState::await_locked(
    std::uint32_t key, std::uint64_t last, std::optional<std::string>& reason) {
  KeySlot& slot = slots_[key];
  if (!slot.awaited) return std::nullopt;
  if (last > *slot.awaited) {
    slot.awaited.reset();
    slot.await_rereads = 0;
    return std::nullopt;
  }
  if (slot.await_rereads >= kMaxAwaitRereads) {
    reason = fmt::format(
        "{}: a write to key '{}' replacing revision {} was announced but neither stored nor "
        "refused after {} reads; re-watch",
        what_, keys_[key], *slot.awaited, kMaxAwaitRereads);
    return std::nullopt;
  }
  auto delay = std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds(std::int64_t{1} << slot.await_rereads), kAwaitBackoffCap);
  ++slot.await_rereads;
  return delay;
}

void KeyWatchState::finish_snapshot() {
  bool notify = false;
  bool stop = false;
  {
    MutexLock lock(mu_);
    if (broken_ || stopping_) return;
    const auto live = static_cast<std::size_t>(
        std::count_if(slots_.begin(), slots_.end(), [](const KeySlot& s) { return s.live; }));
    if (live + 1 > options_.max_pending) {
      notify = stop = break_locked(
          fmt::format("{}: the snapshot exceeds max_pending ({})", what_, options_.max_pending));
    } else {
      for (std::size_t i = 0; i < slots_.size(); ++i) {
        KeySlot& slot = slots_[i];
        if (!slot.live) continue;
        queue_.push_back(
            WatchEvent{WatchEvent::Kind::put, keys_[i], std::move(slot.value), slot.last_seen});
        slot.value = std::string();
      }
      core_->key_watch_counters().events.fetch_add(live, std::memory_order_relaxed);
      caught_up_ = true;
      queue_.push_back(WatchEvent{WatchEvent::Kind::caught_up, {}, {}, 0});
      notify = true;
    }
  }
  if (stop) unsubscribe_all();
  if (notify) notify_consumer();
}

// ---------------------------------------------------------------------------------------------
bool KeyWatchState::break_locked(std::string reason) {
  if (broken_) return false;
  broken_ = true;
  reason_ = std::move(reason);
  for (KeySlot& slot : slots_) slot.value = std::string();
  core_->count_broken_watch();
  core_->key_watch_counters().broken.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void KeyWatchState::fail(std::string reason) {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    if (!break_locked(std::move(reason))) return;
  }
  unsubscribe_all();
  notify_consumer();
}

bool KeyWatchState::broken() const {
  MutexLock lock(mu_);
  return broken_;
}

// A broken watch takes no more hints: its subscriptions end at once (the server forgets the
// interest); they are freed by shutdown().
void KeyWatchState::unsubscribe_all() {
  MutexLock lock(subs_mu_);
  if (unsubscribed_) return;
  unsubscribed_ = true;
  for (natsSubscription* sub : subs_) natsSubscription_Unsubscribe(sub);
}

void KeyWatchState::notify_consumer() {
  if (!options_.notify) return;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    ++notifying_;
  }
  options_.notify();
  MutexLock lock(mu_);
  if (--notifying_ == 0) idle_cv_.notify_all();
}

std::size_t KeyWatchState::poll(std::vector<WatchEvent>& out, std::size_t max_events) {
  MutexLock lock(mu_);
  std::size_t n = 0;
  while (n < max_events && !queue_.empty()) {
    out.push_back(std::move(queue_.front()));
    queue_.pop_front();
    ++n;
  }
  if (n == 0 && queue_.empty() && broken_) {
    throw StoreError(StoreErrc::watch_broken, reason_);
  }
  return n;
}

void KeyWatchState::shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    while (notifying_ != 0) idle_cv_.wait(mu_);
  }
  unregister_token(id_);  // a callback still running finds nothing
  if (auto reader = reader_.lock()) reader->detach(id_, keys_);
  unsubscribe_all();
  MutexLock lock(subs_mu_);
  for (natsSubscription* sub : subs_) natsSubscription_Destroy(sub);
  subs_.clear();
}

// ---------------------------------------------------------------------------------------------
NatsKeyWatch::NatsKeyWatch(std::shared_ptr<KeyWatchState> state, std::shared_ptr<Core> core)
    : state_(std::move(state)), core_(std::move(core)) {}

NatsKeyWatch::~NatsKeyWatch() {
  core_->unregister_watch(state_.get());
  state_->shutdown();
}

std::size_t NatsKeyWatch::poll(std::vector<WatchEvent>& out, std::size_t max_events) {
  return state_->poll(out, max_events);
}

std::unique_ptr<Watch> open_key_watch(const std::shared_ptr<Core>& core,
                                      std::span<const std::string> keys, WatchOptions options) {
  auto state =
      std::make_shared<KeyWatchState>(core, std::vector<std::string>(keys.begin(), keys.end()),
                                      std::move(options), core->hint_reader());
  core->register_watch(state);  // first, so a concurrent close() breaks it too
  try {
    state->open();
  } catch (...) {
    core->unregister_watch(state.get());
    state->shutdown();
    throw;
  }
  core->key_watch_counters().opened.fetch_add(1, std::memory_order_relaxed);
  return std::make_unique<NatsKeyWatch>(std::move(state), core);
}

}  // namespace etlc::nats_detail
