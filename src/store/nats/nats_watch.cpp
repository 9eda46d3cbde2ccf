// See nats_watch.hpp.
#include "store/nats/nats_watch.hpp"

#include <fmt/format.h>

#include <chrono>

#include "etlc/clock.hpp"

namespace etlc::nats_detail {

namespace {

// How long the watch thread blocks in kvWatcher_Next before re-checking for shutdown;
// kvWatcher_Stop also wakes it at once.
constexpr std::int64_t kNextWaitMs = 1000;
// Per-wait bound inside list(); the overall bound is op_timeout_ms of inactivity.
constexpr std::int64_t kListWaitMs = 250;

WatcherPtr open_watcher(Core& core, std::string_view prefix, std::string_view what) {
  core.require_connected(what);
  std::string filter = Core::watch_filter(prefix);
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  // Never IgnoreDeletes: nats.c 3.4.1 returns spurious timeouts with it on buckets with many
  // delete markers (upstream #916). Delete markers are filtered here instead.
  wo.IgnoreDeletes = false;
  kvWatcher* raw = nullptr;
  natsStatus s = kvStore_Watch(&raw, core.kv(), filter.c_str(), &wo);
  WatcherPtr w(raw);
  if (s != NATS_OK) {
    throw_failure(NatsFailure::capture(s, static_cast<jsErrCode>(0), core.redactor()), OpKind::read,
                  what);
  }
  return w;
}

bool is_delete(kvOperation op) {
  return op == kvOp_Delete || op == kvOp_Purge;
}

std::string entry_value(kvEntry* e) {
  const void* data = kvEntry_Value(e);
  int len = kvEntry_ValueLen(e);
  if (data == nullptr || len <= 0) return {};
  return std::string(static_cast<const char*>(data), static_cast<std::size_t>(len));
}

}  // namespace

WatchState::WatchState(std::shared_ptr<Core> core, std::string prefix, WatchOptions options)
    : core_(std::move(core)), prefix_(std::move(prefix)), options_(std::move(options)) {}

WatchState::~WatchState() {
  shutdown();
}

void WatchState::start() {
  WatcherPtr w = open_watcher(*core_, prefix_, fmt::format("watch of prefix '{}'", prefix_));
  std::lock_guard lock(mu_);
  watcher_ = w.release();
  if (broken_ || stopping_) {  // broken (store closed) while the watcher was being created
    kvWatcher_Stop(watcher_);
    watcher_stopped_ = true;
  }
  thread_ = std::thread([this] { run(); });
}

void WatchState::run() {
  for (;;) {
    kvEntry* raw = nullptr;
    natsStatus s = kvWatcher_Next(&raw, watcher_, kNextWaitMs);
    EntryPtr entry(raw);
    if (s == NATS_TIMEOUT) {
      std::lock_guard lock(mu_);
      if (stopping_ || broken_) return;
      continue;
    }
    if (s != NATS_OK) {
      NatsFailure f = NatsFailure::capture(s, static_cast<jsErrCode>(0), core_->redactor());
      fail(fmt::format("watch of prefix '{}': nats.c watcher failed: {}", prefix_, f.describe()));
      return;
    }
    if (!entry) {
      on_caught_up();
    } else {
      on_entry(entry.get());
    }
    std::lock_guard lock(mu_);
    if (stopping_ || broken_) return;
  }
}

void WatchState::on_entry(kvEntry* e) {
  kvOperation op = kvEntry_Operation(e);
  const char* key_c = kvEntry_Key(e);
  std::string key = key_c == nullptr ? std::string() : std::string(key_c);
  std::uint64_t revision = kvEntry_Revision(e);
  if (key.size() < prefix_.size() || key.compare(0, prefix_.size(), prefix_) != 0) return;
  if (op == kvOp_Put) {
    core_->live_revisions().insert(revision);
  } else if (is_delete(op)) {
    core_->delete_markers().insert(revision);
  }
  bool notify = false;
  {
    std::lock_guard lock(mu_);
    if (broken_ || stopping_) return;
    if (!caught_up_) {
      // Snapshot phase: keep only the latest state per key; delete markers just drop the key.
      if (is_delete(op)) {
        snapshot_.erase(key);
        return;
      }
      snapshot_[key] = WatchEvent{WatchEvent::Kind::put, key, entry_value(e), revision};
      // The snapshot plus the caught_up marker must fit in max_pending.
      if (snapshot_.size() + 1 <= options_.max_pending) return;
      notify =
          break_locked(fmt::format("watch of prefix '{}': the snapshot exceeds max_pending "
                                   "({})",
                                   prefix_, options_.max_pending));
    } else if (queue_.size() >= options_.max_pending) {
      notify = break_locked(
          fmt::format("watch of prefix '{}': more than max_pending ({}) events unpolled", prefix_,
                      options_.max_pending));
    } else {
      if (is_delete(op)) {
        queue_.push_back(WatchEvent{WatchEvent::Kind::erase, key, {}, revision});
      } else {
        queue_.push_back(WatchEvent{WatchEvent::Kind::put, key, entry_value(e), revision});
      }
      notify = true;
    }
  }
  if (notify) notify_consumer();
}

void WatchState::on_caught_up() {
  {
    std::lock_guard lock(mu_);
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
  if (watcher_ != nullptr && !watcher_stopped_) {
    kvWatcher_Stop(watcher_);
    watcher_stopped_ = true;
  }
  core_->count_broken_watch();
  return true;
}

void WatchState::fail(std::string reason) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    if (!break_locked(std::move(reason))) return;
  }
  notify_consumer();
}

bool WatchState::broken() const {
  std::lock_guard lock(mu_);
  return broken_;
}

void WatchState::notify_consumer() {
  if (!options_.notify) return;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    ++notifying_;
  }
  options_.notify();
  std::lock_guard lock(mu_);
  if (--notifying_ == 0) idle_cv_.notify_all();
}

std::size_t WatchState::poll(std::vector<WatchEvent>& out, std::size_t max_events) {
  std::lock_guard lock(mu_);
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
    std::unique_lock lock(mu_);
    if (stopping_ && watcher_ == nullptr) return;
    stopping_ = true;
    if (watcher_ != nullptr && !watcher_stopped_) {
      kvWatcher_Stop(watcher_);
      watcher_stopped_ = true;
    }
    idle_cv_.wait(lock, [&] { return notifying_ == 0; });
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  if (watcher_ != nullptr) kvWatcher_Destroy(watcher_);
  watcher_ = nullptr;
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

std::vector<Entry> list_from_watch(Core& core, std::string_view prefix) {
  std::string what = fmt::format("list of prefix '{}'", prefix);
  WatcherPtr w = open_watcher(core, prefix, what);
  std::map<std::string, Entry> live;
  const auto idle_limit = std::chrono::milliseconds(core.options().op_timeout_ms);
  auto last_progress = SystemClock::instance().now();
  for (;;) {
    kvEntry* raw = nullptr;
    natsStatus s = kvWatcher_Next(&raw, w.get(), kListWaitMs);
    EntryPtr entry(raw);
    if (s == NATS_TIMEOUT) {
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
    if (!entry) break;  // initial values done
    last_progress = SystemClock::instance().now();
    const char* key_c = kvEntry_Key(entry.get());
    if (key_c == nullptr) continue;
    std::string key(key_c);
    if (is_delete(kvEntry_Operation(entry.get()))) {
      live.erase(key);
    } else {
      std::uint64_t revision = kvEntry_Revision(entry.get());
      core.live_revisions().insert(revision);
      live[key] = Entry{key, entry_value(entry.get()), revision};
    }
  }
  std::vector<Entry> out;
  out.reserve(live.size());
  for (auto& [key, e] : live) out.push_back(std::move(e));
  return out;
}

}  // namespace etlc::nats_detail
