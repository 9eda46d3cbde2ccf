// FaultInjectingStore (see include/etlc/fault_injecting_store.hpp).
//
// Watches: each handle shares a FaultWatchControl with the decorator. Held events are not copied
// anywhere: they stay in the inner watch's queue (which keeps its own bound) until poll is allowed
// to read it again or release_held moves some into `ready`. Lock order: the decorator's mu_, then
// a control's mutex (taken inside mu_ only by watch(), which registers a new control and gives it
// the current holding flag in one step); never the other way round. A control's mutex is held
// while calling its inner watch's poll (the inner watch is then used by one thread at a time, as
// the Watch contract requires), never while calling the inner store or a callback.
// Callbacks run with no lock held; every callback, the inner watch's included, is counted in
// flight on the control, so a handle's destructor can wait them all out.
#include "etlc/fault_injecting_store.hpp"

#include <algorithm>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace etlc {

namespace detail {

struct FaultWatchControl {
  FaultWatchControl(std::shared_ptr<const std::function<void()>> notify_fn,
                    std::size_t max_pending_events, std::string watched)
      : notify(std::move(notify_fn)), max_pending(max_pending_events), what(std::move(watched)) {}

  const std::shared_ptr<const std::function<void()>> notify;  // never null; may hold an empty fn
  const std::size_t max_pending;
  const std::string what;  // names the watch in errors: "'<prefix>'" or "the keys '<k>,...'"

  Mutex mu;
  CondVar idle;                                      // signalled when notifies_in_flight drops to 0
  std::unique_ptr<Watch> inner ETLC_GUARDED_BY(mu);  // null once broken or cancelled
  std::deque<WatchEvent> ready ETLC_GUARDED_BY(mu);  // released while holding, not yet polled
  bool holding ETLC_GUARDED_BY(mu) = false;
  bool broken ETLC_GUARDED_BY(mu) = false;  // by break_watches: every poll throws
  // The inner watch broke: thrown once `ready` is drained.
  std::exception_ptr inner_error ETLC_GUARDED_BY(mu);
  bool cancelled ETLC_GUARDED_BY(mu) = false;  // the handle is being destroyed
  std::size_t notifies_in_flight ETLC_GUARDED_BY(mu) = 0;
};

}  // namespace detail

namespace {

using detail::FaultWatchControl;

// Runs the consumer's callback from the decorator (not from the inner watch). noexcept: a
// throwing callback breaks the Watch contract and terminates.
void notify_control(FaultWatchControl& control) noexcept ETLC_EXCLUDES(control.mu) {
  {
    MutexLock lock(control.mu);
    if (control.cancelled || !*control.notify) return;
    ++control.notifies_in_flight;
  }
  (*control.notify)();
  MutexLock lock(control.mu);
  if (--control.notifies_in_flight == 0) control.idle.notify_all();
}

// A handle's end: no notify starts after it, and the ones in flight have returned. A function of
// its own, not the destructor's body, so that the analysis checks it (clang skips destructors).
void cancel_control(FaultWatchControl& c) ETLC_EXCLUDES(c.mu) {
  std::unique_ptr<Watch> inner;
  {
    MutexLock lock(c.mu);
    c.cancelled = true;
    inner = std::move(c.inner);
  }
  inner.reset();  // waits out the inner watch's callbacks
  MutexLock lock(c.mu);
  while (c.notifies_in_flight != 0) c.idle.wait(c.mu);
}

class FaultWatch final : public Watch {
 public:
  explicit FaultWatch(std::shared_ptr<FaultWatchControl> control) : control_(std::move(control)) {}

  ~FaultWatch() override { cancel_control(*control_); }

  FaultWatch(const FaultWatch&) = delete;
  FaultWatch& operator=(const FaultWatch&) = delete;

  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) override {
    FaultWatchControl& c = *control_;
    MutexLock lock(c.mu);
    if (c.broken) {
      throw StoreError(StoreErrc::watch_broken,
                       fmt::format("watch of {} was broken by FaultInjectingStore", c.what));
    }
    if (!c.ready.empty()) {
      std::size_t n = 0;
      while (n < max_events && !c.ready.empty()) {
        out.push_back(std::move(c.ready.front()));
        c.ready.pop_front();
        ++n;
      }
      return n;
    }
    if (c.inner_error) std::rethrow_exception(c.inner_error);
    if (c.holding || max_events == 0 || !c.inner) return 0;
    try {
      return c.inner->poll(out, max_events);
    } catch (const StoreError& e) {
      if (e.code() == StoreErrc::watch_broken) c.inner_error = std::current_exception();
      throw;
    }
  }

 private:
  std::shared_ptr<FaultWatchControl> control_;
};

std::string injected_message(OpKind kind, std::string_view key) {
  return fmt::format("injected by FaultInjectingStore: {} of '{}'", to_string(kind), key);
}

}  // namespace

std::string_view to_string(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::create:
      return "create";
    case OpKind::update:
      return "update";
    case OpKind::erase:
      return "erase";
    case OpKind::get:
      return "get";
    case OpKind::watch:
      return "watch";
    case OpKind::list:
      return "list";
    case OpKind::watch_keys:
      return "watch_keys";
    case OpKind::create_many:
      return "create_many";
  }
  return "unknown";
}

std::string_view to_string(OpOutcome outcome) noexcept {
  switch (outcome) {
    case OpOutcome::ok:
      return "ok";
    case OpOutcome::conflict:
      return "conflict";
    case OpOutcome::absent:
      return "absent";
    case OpOutcome::error:
      return "error";
  }
  return "unknown";
}

FaultInjectingStore::FaultInjectingStore(std::shared_ptr<KvStore> inner,
                                         std::size_t op_log_capacity)
    : KvStoreWrapper(std::move(inner)), op_log_capacity_(op_log_capacity) {}

FaultInjectingStore::~FaultInjectingStore() = default;

// --- bookkeeping ------------------------------------------------------------------------------

std::uint64_t FaultInjectingStore::admit(OpKind kind, std::string_view key, bool is_write,
                                         const std::function<void()>& validate, Fault& fault) {
  std::uint64_t seq = 0;
  {
    MutexLock lock(mu_);
    ++counts_[static_cast<std::size_t>(kind)];
    seq = next_seq_++;
  }
  try {
    validate();
  } catch (const StoreError& e) {
    record_error(seq, kind, key, e.code(), false);
    throw;
  }
  {
    MutexLock lock(mu_);
    if (fail_pending_ > 0) {
      --fail_pending_;
      fault = Fault{FaultKind::fail, fail_code_};
    } else if (is_write && unknown_pending_ > 0) {
      --unknown_pending_;
      fault = Fault{unknown_apply_ ? FaultKind::unknown_apply : FaultKind::unknown_drop,
                    StoreErrc::unknown_outcome};
    } else {
      fault = Fault{};
    }
  }
  if (fault.kind == FaultKind::fail || fault.kind == FaultKind::unknown_drop) {
    record_error(seq, kind, key, fault.code, true);
    throw StoreError(fault.code, injected_message(kind, key));
  }
  return seq;
}

template <typename Call>
std::invoke_result_t<Call&> FaultInjectingStore::call_inner(std::uint64_t seq, OpKind kind,
                                                            std::string_view key, Call&& call)
    ETLC_EXCLUDES(mu_) {
  try {
    return call();
  } catch (const StoreError& e) {
    record_error(seq, kind, key, e.code(), false);
    throw;
  }
}

void FaultInjectingStore::record(OpRecord rec) {
  MutexLock lock(mu_);
  if (op_log_capacity_ == 0) return;
  if (log_.size() == op_log_capacity_) log_.pop_front();
  log_.push_back(std::move(rec));
}

void FaultInjectingStore::record_error(std::uint64_t seq, OpKind kind, std::string_view key,
                                       StoreErrc code, bool injected) {
  OpRecord rec;
  rec.seq = seq;
  rec.kind = kind;
  rec.key = std::string(key);
  rec.outcome = OpOutcome::error;
  rec.error = code;
  rec.injected = injected;
  record(std::move(rec));
}

WriteResult FaultInjectingStore::write_op(OpKind kind, std::string_view key,
                                          const std::function<void()>& validate,
                                          const std::function<WriteResult()>& call) {
  Fault fault;
  const std::uint64_t seq = admit(kind, key, /*is_write=*/true, validate, fault);
  const WriteResult result = call_inner(seq, kind, key, call);
  OpRecord rec;
  rec.seq = seq;
  rec.kind = kind;
  rec.key = std::string(key);
  rec.revision = result.revision;
  rec.landed = result.ok;
  if (fault.kind == FaultKind::unknown_apply) {
    rec.outcome = OpOutcome::error;
    rec.error = StoreErrc::unknown_outcome;
    rec.injected = true;
    record(std::move(rec));
    throw StoreError(StoreErrc::unknown_outcome, injected_message(kind, key));
  }
  rec.outcome = result.ok ? OpOutcome::ok : OpOutcome::conflict;
  record(std::move(rec));
  return result;
}

// --- KvStore ----------------------------------------------------------------------------------

WriteResult FaultInjectingStore::create(std::string_view key, std::string_view value) {
  return write_op(
      OpKind::create, key,
      [&] {
        validate_key(key);
        validate_value(key, value);
      },
      [&] { return KvStoreWrapper::create(key, value); });
}

WriteResult FaultInjectingStore::update(std::string_view key, std::string_view value,
                                        Revision expected) {
  return write_op(
      OpKind::update, key,
      [&] {
        validate_key(key);
        validate_value(key, value);
      },
      [&] { return KvStoreWrapper::update(key, value, expected); });
}

WriteResult FaultInjectingStore::erase(std::string_view key, Revision expected) {
  return write_op(
      OpKind::erase, key, [&] { validate_key(key); },
      [&] { return KvStoreWrapper::erase(key, expected); });
}

std::optional<Entry> FaultInjectingStore::get(std::string_view key) {
  Fault fault;
  const std::uint64_t seq = admit(
      OpKind::get, key, /*is_write=*/false, [&] { validate_key(key); }, fault);
  std::optional<Entry> entry =
      call_inner(seq, OpKind::get, key, [&] { return KvStoreWrapper::get(key); });
  OpRecord rec;
  rec.seq = seq;
  rec.kind = OpKind::get;
  rec.key = std::string(key);
  rec.outcome = entry ? OpOutcome::ok : OpOutcome::absent;
  rec.revision = entry ? entry->revision : 0;
  record(std::move(rec));
  return entry;
}

std::vector<Entry> FaultInjectingStore::list(std::string_view prefix) {
  Fault fault;
  const std::uint64_t seq = admit(
      OpKind::list, prefix, /*is_write=*/false, [&] { validate_prefix(prefix); }, fault);
  std::vector<Entry> entries =
      call_inner(seq, OpKind::list, prefix, [&] { return KvStoreWrapper::list(prefix); });
  OpRecord rec;
  rec.seq = seq;
  rec.kind = OpKind::list;
  rec.key = std::string(prefix);
  record(std::move(rec));
  return entries;
}

std::unique_ptr<Watch> FaultInjectingStore::watch(std::string_view prefix, WatchOptions options) {
  Fault fault;
  const std::uint64_t seq = admit(
      OpKind::watch, prefix, /*is_write=*/false, [&] { validate_prefix(prefix); }, fault);
  return open_watch(
      seq, OpKind::watch, std::string(prefix), std::move(options),
      [&](WatchOptions inner) { return KvStoreWrapper::watch(prefix, std::move(inner)); });
}

std::unique_ptr<Watch> FaultInjectingStore::watch_keys(std::span<const std::string> keys,
                                                       WatchOptions options) {
  std::string joined;
  for (const std::string& k : keys) {
    if (!joined.empty()) joined += ',';
    joined += k;
  }
  Fault fault;
  const std::uint64_t seq = admit(
      OpKind::watch_keys, joined, /*is_write=*/false, [&] { validate_watch_keys(keys); }, fault);
  return open_watch(seq, OpKind::watch_keys, joined, std::move(options), [&](WatchOptions inner) {
    return KvStoreWrapper::watch_keys(keys, std::move(inner));
  });
}

std::unique_ptr<Watch> FaultInjectingStore::open_watch(
    std::uint64_t seq, OpKind kind, const std::string& what, WatchOptions options,
    const std::function<std::unique_ptr<Watch>(WatchOptions)>& open) {
  auto notify = std::make_shared<const std::function<void()>>(std::move(options.notify));
  auto control = std::make_shared<FaultWatchControl>(
      notify, options.max_pending,
      kind == OpKind::watch ? fmt::format("'{}'", what) : fmt::format("the keys '{}'", what));
  WatchOptions inner_options;
  inner_options.max_pending = options.max_pending;
  inner_options.latest_only = options.latest_only;
  // The inner watch's callbacks go through the control too, counted in flight, so the handle's
  // destructor waits for them even when break_watches() is destroying the inner watch on another
  // thread (the destructor then finds no inner watch to wait on).
  if (*notify) {
    inner_options.notify = [weak = std::weak_ptr<FaultWatchControl>(control)] {
      if (auto c = weak.lock()) notify_control(*c);
    };
  }
  std::unique_ptr<Watch> inner =
      call_inner(seq, kind, what, [&] { return open(std::move(inner_options)); });
  {
    MutexLock lock(mu_);
    // Under mu_ together with the registration, so a concurrent hold_watch_events either sees
    // this control or has already set the hold_ it gets here.
    MutexLock control_lock(control->mu);
    control->inner = std::move(inner);
    control->holding = hold_;
    if (watches_.size() >= 2 * std::max<std::size_t>(watches_pruned_at_, 16)) {
      std::erase_if(watches_, [](const auto& w) { return w.expired(); });
      watches_pruned_at_ = watches_.size();
    }
    watches_.push_back(control);
  }
  OpRecord rec;
  rec.seq = seq;
  rec.kind = kind;
  rec.key = what;
  record(std::move(rec));
  return std::make_unique<FaultWatch>(std::move(control));
}

// --- create_many ------------------------------------------------------------------------------

std::vector<FaultInjectingStore::Fault> FaultInjectingStore::take_batch_faults(std::uint64_t seq,
                                                                               std::size_t n) {
  std::vector<Fault> faults(n);
  std::optional<StoreErrc> whole;
  {
    MutexLock lock(mu_);
    const bool per_request =
        fail_code_ == StoreErrc::unavailable || fail_code_ == StoreErrc::unknown_outcome;
    if (fail_pending_ > 0 && !per_request) {
      --fail_pending_;
      whole = fail_code_;
    } else {
      for (Fault& f : faults) {
        if (fail_pending_ > 0) {
          --fail_pending_;
          f = Fault{FaultKind::fail, fail_code_};
        } else if (unknown_pending_ > 0) {
          --unknown_pending_;
          f = Fault{unknown_apply_ ? FaultKind::unknown_apply : FaultKind::unknown_drop,
                    StoreErrc::unknown_outcome};
        } else {
          break;
        }
      }
    }
  }
  if (whole) {
    record_error(seq, OpKind::create_many, "", *whole, true);
    throw StoreError(*whole, injected_message(OpKind::create_many, "a batch"));
  }
  return faults;
}

std::vector<CreateOutcome> FaultInjectingStore::create_many(
    std::span<const CreateRequest> requests) {
  std::uint64_t seq = 0;
  {
    MutexLock lock(mu_);
    ++counts_[static_cast<std::size_t>(OpKind::create_many)];
    seq = next_seq_;
    next_seq_ += std::max<std::size_t>(requests.size(), 1);  // one seq per request
  }
  try {
    validate_create_batch(requests);
  } catch (const StoreError& e) {
    record_error(seq, OpKind::create_many, "", e.code(), false);
    throw;
  }
  if (requests.empty()) return {};  // sends nothing, takes no fault
  const std::vector<Fault> faults = take_batch_faults(seq, requests.size());
  const auto sent_to_inner = [&](std::size_t i) {
    return faults[i].kind == FaultKind::none || faults[i].kind == FaultKind::unknown_apply;
  };
  std::vector<CreateRequest> sent;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (sent_to_inner(i)) sent.push_back(requests[i]);
  }
  std::vector<CreateOutcome> answers;
  if (!sent.empty()) {
    answers =
        call_inner(seq, OpKind::create_many, "", [&] { return KvStoreWrapper::create_many(sent); });
  }
  if (answers.size() != sent.size()) {
    throw StoreError(StoreErrc::incompatible,
                     fmt::format("the inner store answered {} of {} creates of a batch",
                                 answers.size(), sent.size()));
  }
  std::vector<CreateOutcome> out(requests.size());
  for (std::size_t i = 0, next = 0; i < requests.size(); ++i) {
    const CreateOutcome* answer = sent_to_inner(i) ? &answers[next++] : nullptr;
    out[i] = settle_request(seq + i, requests[i].key, faults[i], answer);
  }
  return out;
}

CreateOutcome FaultInjectingStore::settle_request(std::uint64_t seq, std::string_view key,
                                                  const Fault& fault, const CreateOutcome* answer) {
  OpRecord rec;
  rec.seq = seq;
  rec.kind = OpKind::create_many;
  rec.key = std::string(key);
  CreateOutcome out;
  if (answer == nullptr) {  // failed or dropped before it was sent
    out.error = fault.code;
    rec.injected = true;
  } else if (fault.kind == FaultKind::unknown_apply) {  // sent; its answer is lost
    out.error = StoreErrc::unknown_outcome;
    rec.injected = true;
    rec.revision = answer->result.revision;
    rec.landed = !answer->error && answer->result.ok;
  } else {
    out = *answer;
    rec.revision = answer->result.revision;
    rec.landed = !answer->error && answer->result.ok;
  }
  if (out.error) {
    rec.outcome = OpOutcome::error;
    rec.error = *out.error;
  } else {
    rec.outcome = out.result.ok ? OpOutcome::ok : OpOutcome::conflict;
  }
  record(std::move(rec));
  return out;
}

// --- faults -----------------------------------------------------------------------------------

void FaultInjectingStore::fail_next(std::size_t n, StoreErrc code) {
  MutexLock lock(mu_);
  fail_pending_ = n;
  fail_code_ = code;
}

void FaultInjectingStore::unknown_outcome_next(std::size_t n, bool apply) {
  MutexLock lock(mu_);
  unknown_pending_ = n;
  unknown_apply_ = apply;
}

void FaultInjectingStore::clear_faults() {
  MutexLock lock(mu_);
  fail_pending_ = 0;
  unknown_pending_ = 0;
}

std::size_t FaultInjectingStore::failures_pending() const {
  MutexLock lock(mu_);
  return fail_pending_;
}

std::size_t FaultInjectingStore::unknown_outcomes_pending() const {
  MutexLock lock(mu_);
  return unknown_pending_;
}

std::vector<std::shared_ptr<FaultWatchControl>> FaultInjectingStore::live_watches() const {
  std::vector<std::shared_ptr<FaultWatchControl>> out;
  MutexLock lock(mu_);
  out.reserve(watches_.size());
  for (const auto& weak : watches_) {
    if (auto control = weak.lock()) out.push_back(std::move(control));
  }
  return out;
}

void FaultInjectingStore::hold_watch_events(bool hold) {
  {
    MutexLock lock(mu_);
    hold_ = hold;
  }
  // A watch created after the flag changed already has the new value; setting it again is
  // harmless.
  for (const auto& control : live_watches()) {
    {
      MutexLock lock(control->mu);
      control->holding = hold;
    }
    if (!hold) notify_control(*control);
  }
}

bool FaultInjectingStore::holding_watch_events() const {
  MutexLock lock(mu_);
  return hold_;
}

std::size_t FaultInjectingStore::release_held(std::size_t max_per_watch) {
  std::size_t total = 0;
  for (const auto& control : live_watches()) {
    bool wake = false;
    {
      MutexLock lock(control->mu);
      if (control->cancelled || control->broken || control->inner_error || !control->inner ||
          !control->holding) {
        continue;
      }
      const std::size_t room =
          control->max_pending - std::min(control->ready.size(), control->max_pending);
      const std::size_t want = std::min(max_per_watch, room);
      if (want == 0) continue;
      std::vector<WatchEvent> got;
      try {
        control->inner->poll(got, want);
      } catch (const StoreError&) {
        control->inner_error = std::current_exception();
        wake = true;
      }
      total += got.size();
      wake = wake || !got.empty();
      for (WatchEvent& event : got) control->ready.push_back(std::move(event));
    }
    if (wake) notify_control(*control);
  }
  return total;
}

void FaultInjectingStore::break_watches() {
  for (const auto& control : live_watches()) {
    std::unique_ptr<Watch> dead;
    {
      MutexLock lock(control->mu);
      if (control->cancelled || control->broken) continue;
      control->broken = true;
      control->ready.clear();
      dead = std::move(control->inner);
    }
    dead.reset();  // outside the lock: its destructor may wait for its callbacks
    notify_control(*control);
  }
}

std::size_t FaultInjectingStore::watch_count() const {
  std::size_t n = 0;
  for (const auto& control : live_watches()) {
    MutexLock lock(control->mu);
    if (!control->cancelled && !control->broken && !control->inner_error) ++n;
  }
  return n;
}

// --- observation ------------------------------------------------------------------------------

std::vector<OpRecord> FaultInjectingStore::op_log() const {
  MutexLock lock(mu_);
  return {log_.begin(), log_.end()};
}

void FaultInjectingStore::clear_op_log() {
  MutexLock lock(mu_);
  log_.clear();
}

std::uint64_t FaultInjectingStore::op_count(OpKind kind) const {
  MutexLock lock(mu_);
  return counts_[static_cast<std::size_t>(kind)];
}

}  // namespace etlc
