#include "harness.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/memory_store.hpp"
#include "runtime/coordinator_access.hpp"
#include "runtime/member.hpp"

#ifdef ETLC_WITH_NATS
#include "etlc/nats_store.hpp"
#include "support/nats_server.hpp"
#endif

namespace etlc::bench {

namespace {

class MemoryBackend final : public Backend {
 public:
  std::shared_ptr<KvStore> connect(const std::string&) override { return store_; }
  void disconnect(const std::shared_ptr<KvStore>&) override {}
  std::string name() const override { return "memory"; }
  std::uint64_t watches_broken(const std::shared_ptr<KvStore>&) const override { return 0; }

 private:
  std::shared_ptr<MemoryStore> store_ = std::make_shared<MemoryStore>();
};

#ifdef ETLC_WITH_NATS
class NatsBackend final : public Backend {
 public:
  NatsBackend(const std::string& url, int history, std::int64_t op_timeout_ms)
      : history_(history), op_timeout_ms_(op_timeout_ms) {
    static std::atomic<int> runs{0};
    if (url.empty()) {
      server_ = std::make_unique<testing::NatsServer>();
      url_ = server_->url();
    } else {
      url_ = url;
    }
    bucket_ = fmt::format("fleet_bench_{}_{}_{}", ::getpid(), runs.fetch_add(1),
                          now().time_since_epoch().count() % 1000000);
  }
  std::shared_ptr<KvStore> connect(const std::string& member) override {
    NatsStoreOptions o;
    o.servers = {url_};
    o.bucket = bucket_;
    o.connection_name = "fleet-bench:" + member;
    o.probe_on_open = false;  // the member probes the store itself when it joins
    o.connect_timeout_ms = 10'000;
    o.history = history_;
    if (op_timeout_ms_ > 0) o.op_timeout_ms = op_timeout_ms_;
    return NatsStore::open(std::move(o));
  }
  void disconnect(const std::shared_ptr<KvStore>& store) override {
    if (auto* n = dynamic_cast<NatsStore*>(store.get())) n->close();
  }
  std::string name() const override { return "nats"; }
  std::uint64_t watches_broken(const std::shared_ptr<KvStore>& store) const override {
    auto* n = dynamic_cast<NatsStore*>(store.get());
    return n != nullptr ? n->stats().watches_broken : 0;
  }

 private:
  int history_ = 1;
  std::int64_t op_timeout_ms_ = 0;
  std::unique_ptr<testing::NatsServer> server_;
  std::string url_;
  std::string bucket_;
};
#endif

}  // namespace

namespace {
std::unique_ptr<Backend> make_store_backend(const BackendOptions& options) {
  if (options.store == "memory") return std::make_unique<MemoryBackend>();
#ifdef ETLC_WITH_NATS
  if (options.store == "nats")
    return std::make_unique<NatsBackend>(options.nats_url, options.nats_history,
                                         options.nats_op_timeout_ms);
#endif
  throw std::invalid_argument("unknown or unavailable store: " + options.store);
}
}  // namespace

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
  auto backend = make_store_backend(options);
  backend->set_targeted_watches(options.targeted_watches);
  return backend;
}

bool library_default_targeted_watches() {
  return runtime::Member::Options{}.targeted_watches;
}

bool effective_targeted_watches(const BackendOptions& options) {
  return options.targeted_watches.value_or(library_default_targeted_watches());
}

std::string BenchPlanner::split_id(std::size_t i) {
  return fmt::format("s{:07}", i);
}

Plan BenchPlanner::plan(const PlanContext&) {
  Plan p;
  p.finality = PlanFinality::final;
  p.splits.reserve(splits_);
  for (std::size_t i = 0; i < splits_; ++i) {
    std::string id = split_id(i);
    std::string descriptor = "bench://input/" + id;
    p.splits.push_back(PlannedSplit{SplitSpec{std::move(id), std::move(descriptor), 1}, {}});
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// Timeline

void Timeline::record_claim(const std::string& split, const std::string& member,
                            std::uint64_t epoch, Time at) {
  {
    std::lock_guard lk(mu_);
    auto& c = last_claim_[split];
    if (c.epoch == epoch && c.member == member) return;  // a commit at the same epoch
    c = Claim{member, epoch, at};
    claim_times_.push_back(at);
  }
  cv_.notify_all();
}

std::optional<Timeline::Claim> Timeline::wait_claim(const std::string& split,
                                                    const std::string& not_by, Time after,
                                                    std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  std::optional<Claim> out;
  cv_.wait_for(lk, timeout, [&] {
    auto it = last_claim_.find(split);
    if (it != last_claim_.end() && it->second.member != not_by && it->second.at >= after) {
      out = it->second;
      return true;
    }
    return false;
  });
  return out;
}

std::optional<Time> Timeline::wait_all_claimed(const std::vector<std::string>& splits,
                                               const std::string& not_by, Time after,
                                               std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  Time last{};
  const bool ok = cv_.wait_for(lk, timeout, [&] {
    last = after;
    for (const auto& s : splits) {
      auto it = last_claim_.find(s);
      if (it == last_claim_.end() || it->second.member == not_by || it->second.at < after)
        return false;
      last = std::max(last, it->second.at);
    }
    return true;
  });
  if (!ok) return std::nullopt;
  return last;
}

std::uint64_t Timeline::claims_since(Time after) const {
  std::lock_guard lk(mu_);
  return static_cast<std::uint64_t>(
      std::count_if(claim_times_.begin(), claim_times_.end(), [&](Time t) { return t >= after; }));
}

void Timeline::record_leader_write(const std::string& member, Time at) {
  std::lock_guard lk(mu_);
  leader_writes_.push_back(Mark{member, at});
}

void Timeline::record_assign_write(const std::string& member, Time at) {
  std::lock_guard lk(mu_);
  assign_writes_.push_back(Mark{member, at});
}

void Timeline::record_plan_published(const std::string& member, Time at) {
  (void)member;
  std::lock_guard lk(mu_);
  if (!plan_published_) plan_published_ = at;
}

namespace {
void set_first(std::atomic<std::int64_t>& slot, std::int64_t ns) {
  std::int64_t cur = slot.load();
  while ((cur == 0 || ns < cur) && !slot.compare_exchange_weak(cur, ns)) {
  }
}
void set_last(std::atomic<std::int64_t>& slot, std::int64_t ns) {
  std::int64_t cur = slot.load();
  while (ns > cur && !slot.compare_exchange_weak(cur, ns)) {
  }
}
std::optional<Time> opt_time(std::int64_t ns) {
  if (ns == 0) return std::nullopt;
  return from_ns(ns);
}
}  // namespace

void Timeline::record_split_create(Time at) {
  split_creates_.fetch_add(1);
  set_first(first_split_ns_, to_ns(at));
  set_last(last_split_ns_, to_ns(at));
  set_first(first_create_ns_, to_ns(at));
}

void Timeline::record_spec_create(Time at) {
  spec_creates_.fetch_add(1);
  set_first(first_create_ns_, to_ns(at));
}

std::optional<Time> Timeline::first_split_create() const {
  return opt_time(first_split_ns_.load());
}
std::optional<Time> Timeline::last_split_create() const {
  return opt_time(last_split_ns_.load());
}
std::optional<Time> Timeline::first_create() const {
  return opt_time(first_create_ns_.load());
}

std::optional<Timeline::Mark> Timeline::first_leader_write_after(Time t,
                                                                 const std::string& not_by) const {
  std::lock_guard lk(mu_);
  for (const auto& m : leader_writes_) {
    if (m.at >= t && m.member != not_by) return m;
  }
  return std::nullopt;
}

std::optional<Timeline::Mark> Timeline::first_assign_write_after(Time t,
                                                                 const std::string& not_by) const {
  std::lock_guard lk(mu_);
  for (const auto& m : assign_writes_) {
    if (m.at >= t && m.member != not_by) return m;
  }
  return std::nullopt;
}

std::optional<Time> Timeline::plan_published() const {
  std::lock_guard lk(mu_);
  return plan_published_;
}

// ---------------------------------------------------------------------------------------------
// Fleet

Fleet::Fleet(Backend& backend, FleetOptions options)
    : backend_(backend),
      options_(std::move(options)),
      planner_(std::make_shared<BenchPlanner>(options_.splits)) {}

Fleet::~Fleet() {
  for (auto& m : members_) stop_user(*m);
  // Shut members down in parallel: each graceful exit is a few store round trips per held split.
  std::vector<std::thread> closers;
  const std::size_t threads = 8;
  std::atomic<std::size_t> next{0};
  for (std::size_t t = 0; t < threads; ++t) {
    closers.emplace_back([&] {
      for (std::size_t i = next++; i < members_.size(); i = next++) {
        auto& m = *members_[i];
        try {
          if (m.coord) m.coord->shutdown();
        } catch (const std::exception&) {
        }
      }
    });
  }
  for (auto& t : closers) t.join();
  for (auto& m : members_) {
    m->coord.reset();
    if (m->connection) backend_.disconnect(m->connection);
  }
}

MemberSlot& Fleet::add(const std::string& id,
                       const std::function<void(CoordinatorConfig&)>& tweak) {
  auto slot = std::make_unique<MemberSlot>();
  slot->id = id;
  slot->connection = backend_.connect(id);
  slot->store = std::make_shared<CountingStore>(slot->connection);
  if (options_.track_timeline) {
    Timeline* tl = &timeline_;
    MemberSlot* self = slot.get();
    slot->store->set_observer(
        [tl, id, self](WriteOp op, std::string_view key, std::string_view value, Revision) {
          const Time at = now();
          switch (family_of(key)) {
            case Family::split:
              if (op == WriteOp::create) {
                tl->record_split_create(at);
              } else if (op == WriteOp::update) {
                try {
                  auto rec = core::decode_split(key, value);
                  if (rec.owner && *rec.owner == id) tl->record_claim(rec.id, id, rec.epoch, at);
                } catch (const std::exception&) {
                }
              }
              break;
            case Family::spec:
              if (op == WriteOp::create) tl->record_spec_create(at);
              break;
            case Family::member:
              if (op != WriteOp::erase) self->last_renew_ns = to_ns(at);
              break;
            case Family::assign:
              if (op != WriteOp::erase) tl->record_assign_write(id, at);
              break;
            case Family::job:
              if (key == core::kLeaderKey && op == WriteOp::create) tl->record_leader_write(id, at);
              if (key == core::kPlanKey && op == WriteOp::update) {
                try {
                  if (core::decode_plan(key, value).planned) tl->record_plan_published(id, at);
                } catch (const std::exception&) {
                }
              }
              break;
            default:
              break;
          }
        });
  }
  CoordinatorConfig c = options_.base;
  c.instance_id = id;
  if (tweak) tweak(c);
  slot->coord = std::make_unique<Coordinator>(c, slot->store, planner_);
  // Chosen before the member's first step (Coordinator::start joins and steps it).
  if (const auto targeted = backend_.targeted_watches())
    runtime::member_of(*slot->coord).set_targeted_watches(*targeted);
  members_.push_back(std::move(slot));
  return *members_.back();
}

void Fleet::start(MemberSlot& m) {
  m.coord->start();
  m.running = true;
  m.user = std::thread([this, &m] { user_loop(m); });
}

void Fleet::start_all(const std::vector<MemberSlot*>& members, std::size_t threads) {
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  std::mutex err_mu;
  std::exception_ptr err;
  for (std::size_t t = 0; t < std::max<std::size_t>(threads, 1); ++t) {
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < members.size(); i = next++) {
        try {
          start(*members[i]);
        } catch (...) {
          std::lock_guard lk(err_mu);
          if (!err) err = std::current_exception();
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  if (err) std::rethrow_exception(err);
}

void Fleet::kill(MemberSlot& m) {
  m.coord->abandon();
  stop_user(m);
  backend_.disconnect(m.connection);
}

void Fleet::stop_user(MemberSlot& m) {
  m.running = false;
  if (m.user.joinable()) m.user.join();
}

void Fleet::user_loop(MemberSlot& m) {
  while (m.running) {
    auto e = m.coord->wait_event(std::chrono::milliseconds(20));
    if (!e) continue;
    if (std::holds_alternative<SplitGranted>(*e)) {
      ++m.granted;
    } else if (auto* r = std::get_if<RevokeRequested>(&*e)) {
      ++m.revoked;
      if (options_.revoke == RevokePolicy::release_now) {
        m.coord->release_drained(r->split_id);
      } else {
        {
          std::lock_guard lk(revoke_mu_);
          parked_[m.id].push_back(r->split_id);
        }
        revoke_cv_.notify_all();
      }
    } else if (auto* l = std::get_if<SplitLost>(&*e)) {
      ++m.lost;
      ++m.lost_by_reason[static_cast<std::size_t>(l->reason) % m.lost_by_reason.size()];
    } else if (auto* f = std::get_if<Fatal>(&*e)) {
      ++m.fatal;
      fmt::print(stderr, "fleet_bench: member {} fatal: {}\n", m.id, f->message);
    }
  }
}

std::optional<std::string> Fleet::take_revocation(MemberSlot& m,
                                                  std::chrono::milliseconds timeout) {
  std::unique_lock lk(revoke_mu_);
  revoke_cv_.wait_for(lk, timeout, [&] { return !parked_[m.id].empty(); });
  auto& q = parked_[m.id];
  if (q.empty()) return std::nullopt;
  std::string id = q.front();
  q.erase(q.begin());
  return id;
}

std::size_t Fleet::parked_revocations() const {
  std::lock_guard lk(revoke_mu_);
  std::size_t n = 0;
  for (const auto& [id, q] : parked_) n += q.size();
  return n;
}

std::vector<MemberSlot*> Fleet::live() const {
  std::vector<MemberSlot*> out;
  for (const auto& m : members_) {
    if (m->running) out.push_back(m.get());
  }
  return out;
}

MemberSlot* Fleet::leader() const {
  for (auto* m : live()) {
    if (m->coord->is_leader()) return m;
  }
  return nullptr;
}

std::uint64_t Fleet::watches_broken() const {
  std::uint64_t n = 0;
  for (const auto& m : members_) n += backend_.watches_broken(m->connection);
  return n;
}

std::size_t Fleet::held_total() const {
  std::size_t n = 0;
  for (auto* m : live()) n += m->coord->held_splits().size();
  return n;
}

bool Fleet::settled() const {
  if (parked_revocations() != 0) return false;
  for (auto* m : live()) {
    auto assigned = runtime::member_of(*m->coord).assignment();
    if (!assigned) return false;
    auto held = m->coord->held_splits();
    std::sort(held.begin(), held.end());
    if (held != *assigned) return false;
  }
  return true;
}

bool Fleet::wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const Time deadline = now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (now() >= deadline) return pred();
    std::this_thread::sleep_for(kPollInterval);
  }
}

// ---------------------------------------------------------------------------------------------

std::string standby_of(KvStore& store) {
  auto e = store.get(core::kStandbyKey);
  if (!e) return {};
  try {
    return core::decode_standby(core::kStandbyKey, e->value).owner;
  } catch (const core::RecordError&) {
    return {};
  }
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const std::size_t i =
      static_cast<std::size_t>(std::clamp(rank, 1.0, static_cast<double>(v.size())));
  return v[i - 1];
}

double median(std::vector<double> v) {
  return percentile(std::move(v), 50.0);
}

double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = 0;
  f >> l;
  return l;
}

MemoryUse process_memory() {
  MemoryUse out{NAN, NAN};
  std::ifstream f("/proc/self/status");
  std::string line;
  auto kib = [](const std::string& l) { return std::stod(l.substr(l.find(':') + 1)) / 1024.0; };
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) out.rss_mib = kib(line);
    if (line.rfind("VmHWM:", 0) == 0) out.peak_mib = kib(line);
  }
  return out;
}

double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

}  // namespace etlc::bench
