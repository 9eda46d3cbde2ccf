#include "sim_store.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace etlc::sim {

namespace {
constexpr std::int64_t kErrUnknownDropped = 6;
constexpr std::int64_t kErrUnknownApplied = 7;
constexpr std::int64_t kErrUnknownLate = 8;
constexpr std::int64_t kErrCrashed = 9;
constexpr VirtualNs kNever = std::numeric_limits<VirtualNs>::max();
}  // namespace

// The shared state of one watch: owned by the handle the member holds, seen (weakly) by the
// SimStore so the World can pump and break it.
struct SimWatchCore {
  std::unique_ptr<Watch> inner;
  std::shared_ptr<bool> dirty = std::make_shared<bool>(true);
  // Pending deliveries, ordered by (deliver_at, arrival sequence).
  std::map<std::pair<VirtualNs, std::uint64_t>, WatchEvent> buffer;
  std::unordered_map<std::string, VirtualNs> last_at;  // per key: order is preserved
  VirtualNs floor = 0;   // nothing is delivered before the caught_up marker that precedes it
  VirtualNs max_at = 0;  // the latest delivery time so far (the caught_up barrier)
  std::uint64_t seq = 0;
  bool inner_broken = false;  // the store broke the watch: report it once the buffer drained
  VirtualNs break_at = 0;     // ... and no earlier than this
  bool broken = false;        // dropped by the simulator: every poll throws
};

namespace {

class SimWatch final : public Watch {
 public:
  SimWatch(std::shared_ptr<SimWatchCore> core, SimStore& owner, const SimEnv& env, std::int32_t inc)
      : core_(std::move(core)), owner_(owner), env_(env), inc_(inc) {}

  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) override {
    if (core_->broken) throw StoreError(StoreErrc::watch_broken, "watch dropped (simulated)");
    owner_.pump();
    const VirtualNs now = env_.time->now();
    std::size_t n = 0;
    while (n < max_events && !core_->buffer.empty() && core_->buffer.begin()->first.first <= now) {
      out.push_back(std::move(core_->buffer.begin()->second));
      core_->buffer.erase(core_->buffer.begin());
      ++n;
    }
    if (n > 0) {
      owner_.note_activity();
      env_.trace->add(now, TraceKind::watch, inc_, {}, static_cast<std::int64_t>(n));
    }
    if (n == 0 && core_->inner_broken && core_->buffer.empty() && now >= core_->break_at) {
      core_->broken = true;
      throw StoreError(StoreErrc::watch_broken, "watch broken by the store");
    }
    return n;
  }

 private:
  std::shared_ptr<SimWatchCore> core_;
  SimStore& owner_;
  const SimEnv& env_;
  std::int32_t inc_;
};

}  // namespace

SimStore::SimStore(SimEnv env, std::int32_t inc, std::string instance,
                   std::function<std::string()> nonce_of, std::shared_ptr<FaultInjectingStore> fis,
                   std::shared_ptr<RecordingStore> rec)
    : KvStoreWrapper(fis),
      env_(std::move(env)),
      inc_(inc),
      instance_(std::move(instance)),
      nonce_of_(std::move(nonce_of)),
      fis_(*fis),
      rec_(std::move(rec)) {}

SimStore::~SimStore() = default;

Writer SimStore::writer() const {
  return Writer{inc_, instance_, nonce_of_ ? nonce_of_() : std::string(), *env_.current_call};
}

bool SimStore::admit(OpKind kind, std::string_view key) {
  ++activity_;
  const VirtualNs now = env_.time->now();
  if (faults.dead) {
    env_.trace->add(now, TraceKind::write_err, inc_, key, static_cast<std::int64_t>(kind),
                    kErrCrashed);
    throw StoreError(StoreErrc::unavailable, "process crashed (simulated)");
  }
  if (now < faults.partition_until) {
    env_.trace->add(now, TraceKind::write_err, inc_, key, static_cast<std::int64_t>(kind),
                    static_cast<std::int64_t>(StoreErrc::unavailable));
    throw StoreError(StoreErrc::unavailable, "partitioned from the store (simulated)");
  }
  if (faults.crash_after > 0 && --faults.crash_after == 0) return true;
  return false;
}

void SimStore::after_crash_point(OpKind kind, std::string_view key) {
  faults.dead = true;
  faults.crash_hit = true;
  env_.trace->add(env_.time->now(), TraceKind::fault, inc_,
                  fmt::format("crash-point-after {}", key), static_cast<std::int64_t>(kind), 0);
  throw StoreError(StoreErrc::unavailable, "process crashed (simulated)");
}

WriteResult SimStore::write(OpKind kind, std::string_view key, std::string_view value,
                            Revision expected) {
  const bool crash_point = admit(kind, key);
  rec_->context = writer();
  auto forward = [&]() -> WriteResult {
    switch (kind) {
      case OpKind::create:
        return KvStoreWrapper::create(key, value);
      case OpKind::update:
        return KvStoreWrapper::update(key, value, expected);
      default:
        return KvStoreWrapper::erase(key, expected);
    }
  };
  if (crash_point) {
    try {
      forward();
    } catch (const StoreError&) {
    }
    after_crash_point(kind, key);
  }
  const double roll = faults.op_fail + faults.op_unknown > 0 ? env_.rng->unit() : 1.0;
  const VirtualNs now = env_.time->now();
  if (roll < faults.op_fail) {
    fis_.fail_next(1, StoreErrc::unavailable);
    env_.trace->add(now, TraceKind::write_err, inc_, key, static_cast<std::int64_t>(kind),
                    static_cast<std::int64_t>(StoreErrc::unavailable));
    return forward();  // throws
  }
  if (roll < faults.op_fail + faults.op_unknown) {
    const std::uint64_t mode = env_.rng->below(3);
    if (mode == 2) {
      LateWrite lw;
      lw.at = now + env_.rng->range(1, env_.late_max);
      lw.kind = kind;
      lw.key = std::string(key);
      lw.value = std::string(value);
      lw.expected = expected;
      lw.writer = rec_->context;
      lw.store = rec_;
      env_.trace->add(now, TraceKind::write_err, inc_, key, static_cast<std::int64_t>(kind),
                      kErrUnknownLate);
      env_.schedule_late(std::move(lw));
      throw StoreError(StoreErrc::unknown_outcome, "write outcome unknown (simulated, lands late)");
    }
    fis_.unknown_outcome_next(1, mode == 1);
    env_.trace->add(now, TraceKind::write_err, inc_, key, static_cast<std::int64_t>(kind),
                    mode == 1 ? kErrUnknownApplied : kErrUnknownDropped);
    return forward();  // throws unknown_outcome (after applying, for mode 1)
  }
  return forward();
}

WriteResult SimStore::create(std::string_view key, std::string_view value) {
  return write(OpKind::create, key, value, 0);
}

WriteResult SimStore::update(std::string_view key, std::string_view value, Revision expected) {
  return write(OpKind::update, key, value, expected);
}

WriteResult SimStore::erase(std::string_view key, Revision expected) {
  return write(OpKind::erase, key, {}, expected);
}

std::optional<Entry> SimStore::get(std::string_view key) {
  const bool crash_point = admit(OpKind::get, key);
  const VirtualNs now = env_.time->now();
  if (crash_point) after_crash_point(OpKind::get, key);
  if (faults.op_fail > 0 && env_.rng->chance(faults.op_fail)) {
    fis_.fail_next(1, StoreErrc::unavailable);
    env_.trace->add(now, TraceKind::write_err, inc_, key, static_cast<std::int64_t>(OpKind::get),
                    static_cast<std::int64_t>(StoreErrc::unavailable));
    return KvStoreWrapper::get(key);  // throws
  }
  if (now < faults.stale_until && env_.rng->chance(faults.stale_p)) {
    const VirtualNs age = env_.rng->range(kNsPerMs, History::kMaxStaleNs);
    auto e = env_.history->value_at(key, now - age);
    ++stale_served_;
    env_.trace->add(now, TraceKind::read, inc_, key, e ? static_cast<std::int64_t>(e->revision) : 0,
                    1);
    return e;
  }
  auto e = KvStoreWrapper::get(key);
  env_.trace->add(now, TraceKind::read, inc_, key, e ? static_cast<std::int64_t>(e->revision) : 0,
                  0);
  return e;
}

std::vector<Entry> SimStore::list(std::string_view prefix) {
  if (admit(OpKind::list, prefix)) after_crash_point(OpKind::list, prefix);
  if (faults.op_fail > 0 && env_.rng->chance(faults.op_fail)) fis_.fail_next(1);
  return KvStoreWrapper::list(prefix);
}

std::unique_ptr<Watch> SimStore::watch(std::string_view prefix, WatchOptions options) {
  if (admit(OpKind::watch, prefix)) after_crash_point(OpKind::watch, prefix);
  if (faults.op_fail > 0 && env_.rng->chance(faults.op_fail)) fis_.fail_next(1);
  return open_watch(fmt::format("watch {}", prefix), options, [&](WatchOptions inner) {
    return KvStoreWrapper::watch(prefix, std::move(inner));
  });
}

std::unique_ptr<Watch> SimStore::watch_keys(std::span<const std::string> keys,
                                            WatchOptions options) {
  validate_watch_keys(keys);  // a caller bug is no operation: it takes no fault
  if (admit(OpKind::watch_keys, keys.front())) after_crash_point(OpKind::watch_keys, keys.front());
  if (faults.op_fail > 0 && env_.rng->chance(faults.op_fail)) fis_.fail_next(1);
  return open_watch(
      fmt::format("watch_keys {}", fmt::join(keys, ",")), options,
      [&](WatchOptions inner) { return KvStoreWrapper::watch_keys(keys, std::move(inner)); });
}

std::unique_ptr<Watch> SimStore::open_watch(
    const std::string& what, const WatchOptions& options,
    const std::function<std::unique_ptr<Watch>(WatchOptions)>& open) {
  auto core = std::make_shared<SimWatchCore>();
  WatchOptions inner_opts;
  inner_opts.max_pending = options.max_pending;
  inner_opts.latest_only = options.latest_only;
  // The member's own notify is not used: the World wakes members when events become due.
  std::weak_ptr<bool> dirty = core->dirty;
  std::weak_ptr<bool> any = any_dirty_;
  inner_opts.notify = [dirty, any, queued = env_.on_queued, inc = inc_] {
    if (auto d = dirty.lock()) *d = true;
    if (auto a = any.lock()) *a = true;
    if (queued) queued(inc);
  };
  core->inner = open(std::move(inner_opts));
  env_.trace->add(env_.time->now(), TraceKind::note, inc_, what);
  watches_.erase(std::remove_if(watches_.begin(), watches_.end(),
                                [](const std::weak_ptr<SimWatchCore>& w) { return w.expired(); }),
                 watches_.end());
  watches_.push_back(core);
  auto handle = std::make_unique<SimWatch>(core, *this, env_, inc_);
  *any_dirty_ = true;  // the snapshot
  pump();
  return handle;
}

// --- create_many ------------------------------------------------------------------------------

bool SimStore::draw_batch_fault(const CreateRequest& request, std::optional<StoreErrc>& error) {
  constexpr auto kKind = static_cast<std::int64_t>(OpKind::create_many);
  error.reset();
  const double roll = faults.op_fail + faults.op_unknown > 0 ? env_.rng->unit() : 1.0;
  const VirtualNs now = env_.time->now();
  if (roll < faults.op_fail) {
    env_.trace->add(now, TraceKind::write_err, inc_, request.key, kKind,
                    static_cast<std::int64_t>(StoreErrc::unavailable));
    error = StoreErrc::unavailable;
    return false;
  }
  if (roll >= faults.op_fail + faults.op_unknown) return true;
  error = StoreErrc::unknown_outcome;
  const std::uint64_t mode = env_.rng->below(3);
  if (mode == 2) {
    LateWrite lw;
    lw.at = now + env_.rng->range(1, env_.late_max);
    lw.kind = OpKind::create;
    lw.key = std::string(request.key);
    lw.value = std::string(request.value);
    lw.writer = rec_->context;
    lw.store = rec_;
    env_.trace->add(now, TraceKind::write_err, inc_, request.key, kKind, kErrUnknownLate);
    env_.schedule_late(std::move(lw));
    return false;
  }
  env_.trace->add(now, TraceKind::write_err, inc_, request.key, kKind,
                  mode == 1 ? kErrUnknownApplied : kErrUnknownDropped);
  return mode == 1;  // applied: sent, its answer lost
}

std::vector<CreateOutcome> SimStore::crash_in_batch(std::span<const CreateRequest> requests) {
  const std::size_t landed = env_.rng->below(requests.size() + 1);
  if (landed > 0) KvStoreWrapper::create_many(requests.first(landed));
  faults.dead = true;
  faults.crash_hit = true;
  env_.trace->add(env_.time->now(), TraceKind::fault, inc_,
                  fmt::format("crash-point-after {} of a batch of {}", landed, requests.size()),
                  static_cast<std::int64_t>(OpKind::create_many), 0);
  return std::vector<CreateOutcome>(requests.size(),
                                    CreateOutcome{WriteResult{}, StoreErrc::unavailable});
}

std::vector<CreateOutcome> SimStore::create_many(std::span<const CreateRequest> requests) {
  validate_create_batch(requests);
  if (requests.empty()) return {};
  ++activity_;
  const VirtualNs now = env_.time->now();
  if (faults.dead || now < faults.partition_until) {  // nothing reaches the store
    env_.trace->add(now, TraceKind::write_err, inc_, requests.front().key,
                    static_cast<std::int64_t>(OpKind::create_many),
                    faults.dead ? kErrCrashed : static_cast<std::int64_t>(StoreErrc::unavailable));
    return std::vector<CreateOutcome>(requests.size(),
                                      CreateOutcome{WriteResult{}, StoreErrc::unavailable});
  }
  rec_->context = writer();
  if (faults.crash_after > 0 && --faults.crash_after == 0) return crash_in_batch(requests);
  std::vector<CreateOutcome> out(requests.size());
  std::vector<CreateRequest> sent;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (draw_batch_fault(requests[i], out[i].error)) {
      sent.push_back(requests[i]);
      where.push_back(i);
    }
  }
  if (sent.empty()) return out;
  const std::vector<CreateOutcome> answers = KvStoreWrapper::create_many(sent);
  for (std::size_t j = 0; j < answers.size() && j < where.size(); ++j) {
    CreateOutcome& o = out[where[j]];
    if (!o.error) o = answers[j];  // an applied unknown outcome keeps its error
  }
  return out;
}

VirtualNs SimStore::watch_delay() {
  const VirtualNs now = env_.time->now();
  if (now < faults.slow_watch_until && faults.slow_watch_max > 0) {
    return env_.rng->range(0, faults.slow_watch_max);
  }
  return env_.rng->range(20'000, 2 * kNsPerMs);  // 20 us .. 2 ms: still reorders across keys
}

void SimStore::pump() {
  if (!*any_dirty_) return;
  *any_dirty_ = false;
  const VirtualNs now = env_.time->now();
  std::vector<WatchEvent> batch;
  for (auto& weak : watches_) {
    auto core = weak.lock();
    if (!core || core->broken || core->inner_broken || !*core->dirty) continue;
    *core->dirty = false;
    batch.clear();
    try {
      core->inner->poll(batch, kMaxWatchPending);
    } catch (const StoreError&) {
      core->inner_broken = true;
      core->break_at = std::max(now + watch_delay(), core->max_at);
    }
    for (WatchEvent& e : batch) {
      VirtualNs at = std::max(now + watch_delay(), core->floor);
      if (e.kind == WatchEvent::Kind::caught_up) {
        at = std::max(at, core->max_at);
        core->floor = at;
      } else {
        auto [it, fresh] = core->last_at.try_emplace(e.key, at);
        if (!fresh) it->second = at = std::max(at, it->second);
      }
      core->max_at = std::max(core->max_at, at);
      core->buffer.emplace(std::make_pair(at, core->seq++), std::move(e));
    }
  }
}

VirtualNs SimStore::next_delivery_after(VirtualNs t) const {
  VirtualNs best = kNever;
  for (const auto& weak : watches_) {
    auto core = weak.lock();
    if (!core || core->broken) continue;
    auto it =
        core->buffer.upper_bound(std::make_pair(t, std::numeric_limits<std::uint64_t>::max()));
    if (it != core->buffer.end()) best = std::min(best, it->first.first);
    if (core->inner_broken && core->break_at > t) best = std::min(best, core->break_at);
  }
  return best;
}

void SimStore::break_watches() {
  for (auto& weak : watches_) {
    if (auto core = weak.lock()) {
      core->broken = true;
      core->buffer.clear();
    }
  }
}

std::size_t SimStore::live_watches() const {
  std::size_t n = 0;
  for (const auto& weak : watches_) {
    auto core = weak.lock();
    if (core && !core->broken) ++n;
  }
  return n;
}

}  // namespace etlc::sim
