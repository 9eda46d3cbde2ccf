// See nats_watch.hpp.
#include "store/nats/nats_watch.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "etlc/clock.hpp"

namespace etlc::nats_detail {

namespace {

// How long the watch thread blocks in NextMsg before re-checking for shutdown; stop() also wakes
// it at once.
constexpr std::int64_t kNextWaitMs = 1000;
// Per-wait bound inside list(); the overall bound is op_timeout_ms of inactivity.
constexpr std::int64_t kListWaitMs = 250;

using SubMsgPtr = MsgPtr;

}  // namespace

// ---------------------------------------------------------------------------------------------
SnapshotBoundary::SnapshotBoundary(Core& core, std::string_view prefix, std::string what)
    : core_(core),
      filter_(core.subject_prefix() + Core::watch_filter(prefix)),
      what_(std::move(what)),
      boundary_(read()) {}

std::uint64_t SnapshotBoundary::read() {
  return core_.last_sequence_matching(filter_, what_);
}

bool SnapshotBoundary::reached(std::uint64_t revision) {
  if (revision < boundary_) return false;
  if (rounds_ >= kRounds) return true;
  ++rounds_;
  const std::uint64_t passed = boundary_;
  boundary_ = read();
  return boundary_ <= passed || boundary_ <= revision;
}

// ---------------------------------------------------------------------------------------------
KeyConsumer::KeyConsumer(Core& core, std::string_view prefix, std::string_view what) : core_(core) {
  core.require_connected(what);
  std::string filter = core.subject_prefix() + Core::watch_filter(prefix);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Ordered = true;  // nats.c re-creates the consumer at the right sequence after a gap
  so.Stream = core.stream().c_str();
  // Deliver all, not "last per subject": under concurrent writes, a last-per-subject consumer
  // (nats-server 2.9.10) reported nothing pending while keys whose last message had been
  // replaced mid-snapshot were still to come, so the snapshot missed live keys (36 of 200 in
  // ASnapshotTakenUnderWriteLoadHasEveryLiveKey). The bucket keeps `history` values per key
  // (default 1), so this delivers about as much; the snapshot keeps the latest per key.
  so.Config.DeliverPolicy = js_DeliverAll;
  jsOptions jo = core.request_options();
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_SubscribeSync(&sub_, core.js(), filter.c_str(), &jo, &so, &jerr);
  if (s != NATS_OK) {
    NatsFailure f = NatsFailure::capture(s, jerr, core.redactor());
    if (sub_ != nullptr) natsSubscription_Destroy(sub_);
    sub_ = nullptr;
    throw_failure(f, OpKind::read, what);
  }
  // Our own queues are bounded (max_pending); never let nats.c drop messages (slow consumer).
  natsSubscription_SetPendingLimits(sub_, -1, -1);
}

KeyConsumer::~KeyConsumer() {
  stop();
  if (sub_ != nullptr) natsSubscription_Destroy(sub_);
}

void KeyConsumer::stop() {
  MutexLock lock(stop_mu_);
  if (stopped_ || sub_ == nullptr) return;
  stopped_ = true;
  natsSubscription_Unsubscribe(sub_);
}

natsStatus KeyConsumer::next(StreamRecord& out, std::int64_t timeout_ms) {
  natsMsg* raw = nullptr;
  natsStatus s = natsSubscription_NextMsg(&raw, sub_, timeout_ms > 0 ? timeout_ms : 1);
  SubMsgPtr msg(raw);
  if (s != NATS_OK) return s;
  const char* subject = natsMsg_GetSubject(msg.get());
  const std::string& pre = core_.subject_prefix();
  if (subject == nullptr || std::strlen(subject) <= pre.size() ||
      std::strncmp(subject, pre.data(), pre.size()) != 0) {
    return NATS_ERR;
  }
  jsMsgMetaData* meta = nullptr;
  s = natsMsg_GetMetaData(&meta, msg.get());
  if (s != NATS_OK) return s;
  out.revision = meta->Sequence.Stream;
  out.pending = meta->NumPending;
  jsMsgMetaData_Destroy(meta);
  out.key.assign(subject + pre.size());
  const char* op = nullptr;
  out.tombstone = natsMsgHeader_Get(msg.get(), "KV-Operation", &op) == NATS_OK && op != nullptr &&
                  (std::strcmp(op, "DEL") == 0 || std::strcmp(op, "PURGE") == 0);
  out.previous = previous_revision(msg.get());
  out.value.clear();
  if (!out.tombstone) {
    const char* data = natsMsg_GetData(msg.get());
    int len = natsMsg_GetDataLength(msg.get());
    if (data != nullptr && len > 0) out.value.assign(data, static_cast<std::size_t>(len));
  }
  last_revision_ = out.revision;
  return NATS_OK;
}

bool KeyConsumer::drained() {
  jsConsumerInfo* info = nullptr;
  jsOptions jo = core_.request_options();
  jsErrCode jerr = static_cast<jsErrCode>(0);
  if (natsSubscription_GetConsumerInfo(&info, sub_, &jo, &jerr) != NATS_OK || info == nullptr) {
    return false;
  }
  bool drained = info->NumPending == 0 &&
                 (info->Delivered.Consumer == 0 || info->Delivered.Stream == last_revision_);
  jsConsumerInfo_Destroy(info);
  return drained;
}

// ---------------------------------------------------------------------------------------------
WatchState::WatchState(std::shared_ptr<Core> core, std::string prefix, WatchOptions options)
    : core_(std::move(core)), prefix_(std::move(prefix)), options_(std::move(options)) {}

WatchState::~WatchState() {
  shutdown();
}

void WatchState::start() {
  const std::string what = fmt::format("watch of prefix '{}'", prefix_);
  boundary_.emplace(*core_, prefix_, what);  // read before the consumer starts
  auto consumer = std::make_shared<KeyConsumer>(*core_, prefix_, what);
  // Nothing to deliver (an empty range): caught up at once, without waiting for a message.
  bool empty = boundary_->empty();
  bool stop_now = false;
  {
    MutexLock lock(mu_);
    consumer_ = consumer;
    stop_now = broken_ || stopping_;  // broken (store closed) while the consumer was created
  }
  if (stop_now) consumer->stop();
  if (empty) on_caught_up();
  thread_ = std::thread([this] { run(); });
}

void WatchState::run() {
  std::shared_ptr<KeyConsumer> consumer;
  {
    MutexLock lock(mu_);
    consumer = consumer_;
  }
  for (;;) {
    StreamRecord record;
    natsStatus s = consumer->next(record, kNextWaitMs);
    bool caught_up = false;
    {
      MutexLock lock(mu_);
      if (stopping_ || broken_) return;
      caught_up = caught_up_;
    }
    if (s == NATS_TIMEOUT) {
      // Normally the snapshot ends with a message that has nothing pending; if the server
      // removed the pending messages instead (an operator purge), ask it.
      if (!caught_up && consumer->drained()) on_caught_up();
      continue;
    }
    if (s != NATS_OK) {
      NatsFailure f = NatsFailure::capture(s, static_cast<jsErrCode>(0), core_->redactor());
      fail(fmt::format("watch of prefix '{}': the consumer failed: {}", prefix_, f.describe()));
      return;
    }
    on_record(record);
    if (!caught_up) {
      bool complete = false;
      try {
        complete = boundary_->reached(record.revision);
      } catch (const StoreError& e) {
        fail(e.what());
        return;
      }
      if (complete) on_caught_up();
    }
  }
}

void WatchState::on_record(StreamRecord& r) {
  if (r.tombstone) {
    core_->delete_markers().insert(r.revision);
    core_->marker_hints().note(r.key, r.revision);
  } else {
    core_->live_revisions().insert(r.revision);
  }
  auto seen = last_seen_.find(r.key);
  const std::uint64_t known = seen == last_seen_.end() ? 0 : seen->second;
  if (seen == last_seen_.end()) {
    last_seen_.emplace(r.key, r.revision);
  } else {
    seen->second = r.revision;
  }
  bool notify = false;
  bool stop = false;
  {
    MutexLock lock(mu_);
    if (broken_ || stopping_) return;
    if (!caught_up_) {
      // Snapshot phase: keep only the latest state per key; delete markers just drop the key.
      if (r.tombstone) {
        snapshot_.erase(r.key);
        return;
      }
      snapshot_[r.key] = WatchEvent{WatchEvent::Kind::put, r.key, std::move(r.value), r.revision};
      // The snapshot plus the caught_up marker must fit in max_pending.
      if (snapshot_.size() + 1 <= options_.max_pending) return;
      notify = stop =
          break_locked(fmt::format("watch of prefix '{}': the snapshot exceeds max_pending ({})",
                                   prefix_, options_.max_pending));
    } else if (r.previous && *r.previous != known && !options_.latest_only) {
      // The writer replaced revision *previous, which this watch never received: the server
      // dropped it (one value per key) before the watch read it. Never continue with a gap.
      notify = stop = break_locked(fmt::format(
          "watch of prefix '{}': key '{}' went from revision {} to {} through revision {} that "
          "the server dropped before this watch read it (the watch fell behind); re-watch",
          prefix_, r.key, known, r.revision, *r.previous));
    } else if (queue_.size() >= options_.max_pending) {
      notify = stop = break_locked(
          fmt::format("watch of prefix '{}': more than max_pending ({}) events unpolled", prefix_,
                      options_.max_pending));
    } else {
      if (r.tombstone) {
        queue_.push_back(WatchEvent{WatchEvent::Kind::erase, r.key, {}, r.revision});
      } else {
        queue_.push_back(WatchEvent{WatchEvent::Kind::put, r.key, std::move(r.value), r.revision});
      }
      notify = true;
    }
  }
  if (stop) stop_consumer();
  if (notify) notify_consumer();
}

void WatchState::on_caught_up() {
  {
    MutexLock lock(mu_);
    if (broken_ || stopping_ || caught_up_) return;
    caught_up_ = true;
    for (auto& [key, event] : snapshot_) queue_.push_back(std::move(event));
    snapshot_.clear();
    queue_.push_back(WatchEvent{WatchEvent::Kind::caught_up, {}, {}, 0});
  }
  notify_consumer();
}

bool WatchState::break_locked(std::string reason) {
  if (broken_) return false;
  broken_ = true;
  reason_ = std::move(reason);
  snapshot_.clear();
  core_->count_broken_watch();
  return true;
}

void WatchState::stop_consumer() {
  std::shared_ptr<KeyConsumer> consumer;
  {
    MutexLock lock(mu_);
    consumer = consumer_;
  }
  if (consumer) consumer->stop();
}

void WatchState::fail(std::string reason) {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    if (!break_locked(std::move(reason))) return;
  }
  stop_consumer();
  notify_consumer();
}

bool WatchState::broken() const {
  MutexLock lock(mu_);
  return broken_;
}

void WatchState::notify_consumer() {
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

std::size_t WatchState::poll(std::vector<WatchEvent>& out, std::size_t max_events) {
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

void WatchState::shutdown() {
  {
    MutexLock lock(mu_);
    if (stopping_ && !consumer_ && !thread_.joinable()) return;
    stopping_ = true;
    while (notifying_ != 0) idle_cv_.wait(mu_);
  }
  stop_consumer();
  if (thread_.joinable()) thread_.join();
  MutexLock lock(mu_);
  consumer_.reset();
}

NatsWatch::NatsWatch(std::shared_ptr<WatchState> state, std::shared_ptr<Core> core)
    : state_(std::move(state)), core_(std::move(core)) {}

NatsWatch::~NatsWatch() {
  core_->unregister_watch(state_.get());
  state_->shutdown();
}

std::size_t NatsWatch::poll(std::vector<WatchEvent>& out, std::size_t max_events) {
  return state_->poll(out, max_events);
}

// ---------------------------------------------------------------------------------------------
std::vector<Entry> list_from_consumer(Core& core, std::string_view prefix) {
  std::string what = fmt::format("list of prefix '{}'", prefix);
  SnapshotBoundary boundary(core, prefix, what);  // read before the consumer starts
  if (boundary.empty()) return {};
  KeyConsumer consumer(core, prefix, what);
  std::map<std::string, Entry> live;
  const auto idle_limit = std::chrono::milliseconds(core.options().op_timeout_ms);
  auto last_progress = SystemClock::instance().now();
  for (;;) {
    StreamRecord r;
    natsStatus s = consumer.next(r, kListWaitMs);
    if (s == NATS_TIMEOUT) {
      if (consumer.drained()) break;
      if (SystemClock::instance().now() - last_progress >= idle_limit) {
        throw StoreError(StoreErrc::unavailable,
                         fmt::format("{}: no progress within op_timeout_ms ({})", what,
                                     core.options().op_timeout_ms));
      }
      core.require_connected(what);
      continue;
    }
    if (s != NATS_OK) {
      throw_failure(NatsFailure::capture(s, static_cast<jsErrCode>(0), core.redactor()),
                    OpKind::read, what);
    }
    last_progress = SystemClock::instance().now();
    if (r.tombstone) {
      core.delete_markers().insert(r.revision);
      core.marker_hints().note(r.key, r.revision);
      live.erase(r.key);
    } else {
      core.live_revisions().insert(r.revision);
      live[r.key] = Entry{r.key, std::move(r.value), r.revision};
    }
    if (boundary.reached(r.revision)) break;
  }
  std::vector<Entry> out;
  out.reserve(live.size());
  for (auto& [key, e] : live) out.push_back(std::move(e));
  return out;
}

}  // namespace etlc::nats_detail
