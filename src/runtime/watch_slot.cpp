#include "runtime/watch_slot.hpp"

#include <fmt/format.h>

#include "core/records.hpp"
#include "log.hpp"

namespace etlc::runtime {

WatchSlot::WatchSlot(std::vector<std::string> keys) : keys_(std::move(keys)) {
  what_ = keys_.size() == 1 ? keys_.front()
                            : fmt::format("{} and {} more keys", keys_.front(), keys_.size() - 1);
}

void WatchSlot::start(KvStore& store, const std::function<void()>& notify) {
  WatchOptions opts;
  opts.notify = notify;
  opts.latest_only = true;
  watch_ = keys_.empty() ? store.watch(prefix_, std::move(opts))
                         : store.watch_keys(keys_, std::move(opts));
  caught_up_ = false;
}

void WatchSlot::reset() {
  watch_.reset();
  caught_up_ = false;
}

bool WatchSlot::drain(
    const MemberContext& ctx, const std::function<void(const WatchEvent&)>& handle,
    const std::function<void(const WatchEvent&, const std::string&)>& unreadable) {
  if (!watch_) return false;
  batch_.clear();
  std::size_t n = 0;
  try {
    n = watch_->poll(batch_, kEventsPerStep);
  } catch (const StoreError& e) {
    // poll() returns what was delivered before a break first, so a throw means nothing more is
    // pending. Re-watch: the fresh snapshot rebuilds the view.
    log().info("etlc: {}: watch on '{}' broke ({}); re-watching", ctx.instance, what_, e.what());
    reset();
    return true;
  }
  ctx.metrics.watch_events(n);
  for (const WatchEvent& e : batch_) {
    if (e.kind == WatchEvent::Kind::caught_up) {
      caught_up_ = true;
      continue;
    }
    // A value that does not decode is logged once (a watch delivers each revision once) and the
    // view stops trusting the key; healing.cpp decides what repairs it.
    std::string error;
    try {
      handle(e);
      continue;
    } catch (const core::RecordError& err) {
      error = err.what();
    } catch (const ConfigError& err) {
      error = fmt::format("record at '{}': {}", e.key, err.what());
    }
    ctx.metrics.unreadable_record();
    log().warn("etlc: {}: unreadable record: {}", ctx.instance, error);
    if (e.kind == WatchEvent::Kind::put) unreadable(e, error);
  }
  return n == kEventsPerStep;
}

}  // namespace etlc::runtime
