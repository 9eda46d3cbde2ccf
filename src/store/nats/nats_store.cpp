// NatsStore: the six KvStore primitives on top of Core (see etlc/nats_store.hpp).
#include "etlc/nats_store.hpp"

#include <fmt/format.h>

#include <random>

#include "log.hpp"
#include "store/nats/key_watch.hpp"
#include "store/nats/nats_core.hpp"
#include "store/nats/nats_create.hpp"
#include "store/nats/nats_watch.hpp"
#include "store/nats/startup_wait.hpp"

namespace etlc {

namespace {

using nats_detail::Core;
using nats_detail::LastMessage;
using nats_detail::Published;

std::string probe_prefix() {
  std::random_device rd;
  std::uint64_t nonce = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("_etlc_probe.{:016x}.", nonce);
}

void check_max_pending(const WatchOptions& options) {
  if (options.max_pending == 0 || options.max_pending > kMaxWatchPending) {
    throw StoreError(StoreErrc::invalid_argument,
                     fmt::format("WatchOptions::max_pending must be in [1, {}], got {}",
                                 kMaxWatchPending, options.max_pending));
  }
}

enum class GuardedWrite : std::uint8_t { update, erase };

// update and erase: a publish guarded by `expected`, which must name the key's live value. The
// server would accept a delete marker's revision as the expected last sequence (and resurrect
// the key), so a revision this process does not know as live is checked with a leader read
// first. A lost race reports the current revision only when it is a known live one.
WriteResult guarded_write(Core& core, GuardedWrite kind, std::string_view key,
                          std::string_view value, Revision expected) {
  if (expected == 0) return WriteResult{false, 0};  // never matches; nothing is sent
  const bool erase = kind == GuardedWrite::erase;
  const std::string what = fmt::format("{} '{}'", erase ? "erase" : "update", key);
  if (!core.live_revisions().contains(expected)) {
    core.count_guard_read();
    LastMessage last = core.read_last(key, what);
    if (!last.live() || last.revision != expected) {
      return WriteResult{false, last.live() ? last.revision : 0};
    }
  }
  Published p = core.publish(key, value, expected, erase, what);
  if (!p.ok) {
    const bool known = p.last_revision != 0 && core.live_revisions().contains(p.last_revision);
    return WriteResult{false, known ? p.last_revision : 0};
  }
  if (erase) {
    core.delete_markers().insert(p.revision);
    core.marker_hints().note(key, p.revision);
  } else {
    core.live_revisions().insert(p.revision);
  }
  return WriteResult{true, p.revision};
}

}  // namespace

NatsStore::NatsStore(NatsStoreOptions options)
    : core_(nats_detail::open_with_startup_wait(std::move(options))) {  // startup_wait.cpp
  if (!core_->options().probe_on_open) return;
  // A scratch key of this process alone; its delete marker is purged afterwards, so opening a
  // bucket again and again leaves nothing behind.
  const std::string key = verify_fencing(*this, probe_prefix());
  try {
    core_->purge_subject(key, "purging the probe's scratch key");
  } catch (const StoreError& e) {
    log().warn("etlc: the probe's delete marker '{}' stays in the bucket: {}", key, e.what());
  }
}

std::shared_ptr<NatsStore> NatsStore::open(NatsStoreOptions options) {
  return std::make_shared<NatsStore>(std::move(options));
}

NatsStore::~NatsStore() {
  core_->close();
}

WriteResult NatsStore::create(std::string_view key, std::string_view value) {
  validate_key(key);
  validate_value(key, value);
  return nats_detail::create_key(*core_, key, value);  // nats_create.cpp
}

WriteResult NatsStore::update(std::string_view key, std::string_view value, Revision expected) {
  validate_key(key);
  validate_value(key, value);
  return guarded_write(*core_, GuardedWrite::update, key, value, expected);
}

WriteResult NatsStore::erase(std::string_view key, Revision expected) {
  validate_key(key);
  return guarded_write(*core_, GuardedWrite::erase, key, {}, expected);
}

std::optional<Entry> NatsStore::get(std::string_view key) {
  validate_key(key);
  LastMessage last = core_->read_last(key, fmt::format("get '{}'", key));
  if (!last.live()) return std::nullopt;
  return Entry{std::string(key), std::move(last.value), last.revision};
}

std::unique_ptr<Watch> NatsStore::watch(std::string_view prefix, WatchOptions options) {
  validate_prefix(prefix);
  check_max_pending(options);
  auto state =
      std::make_shared<nats_detail::WatchState>(core_, std::string(prefix), std::move(options));
  core_->register_watch(state);  // first, so a concurrent close() breaks it too
  try {
    state->start();
  } catch (...) {
    core_->unregister_watch(state.get());
    throw;
  }
  return std::make_unique<nats_detail::NatsWatch>(std::move(state), core_);
}

std::vector<Entry> NatsStore::list(std::string_view prefix) {
  validate_prefix(prefix);
  return nats_detail::list_from_consumer(*core_, prefix);
}

void NatsStore::break_watches(std::string_view reason) {
  core_->break_watches(reason);
}

void NatsStore::close() {
  core_->close();
}

const std::string& NatsStore::bucket() const noexcept {
  return core_->bucket();
}

bool NatsStore::connected() const {
  return core_->connected();
}

NatsStoreStats NatsStore::stats() const {
  return core_->stats();
}

std::size_t NatsStore::watcher_count() const {
  return core_->watcher_count();
}

std::unique_ptr<Watch> NatsStore::watch_keys(std::span<const std::string> keys,
                                             WatchOptions options) {
  validate_watch_keys(keys);
  check_max_pending(options);
  return nats_detail::open_key_watch(core_, keys, std::move(options));
}

}  // namespace etlc
