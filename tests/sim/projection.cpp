#include "projection.hpp"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/fault_injecting_store.hpp"
#include "etlc/memory_store.hpp"
#include "etlc/metrics.hpp"
#include "history.hpp"
#include "log.hpp"
#include "recording_store.hpp"
#include "rng.hpp"
#include "runtime/member.hpp"
#include "sim_planner.hpp"
#include "sim_store.hpp"
#include "trace.hpp"

namespace etlc::sim {

namespace {

constexpr std::uint64_t kWeight = 10;  // records per split: every split weighs the same
constexpr VirtualNs kProbeEvery = kNsPerS;
constexpr int kMaxEventRounds = 1000;  // revocations answered per call, bounded

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// A field of /proc/self/status in kB (VmRSS, VmHWM); 0 where unavailable.
long status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string want = field + ":";
  while (std::getline(in, line)) {
    if (line.rfind(want, 0) == 0) return std::strtol(line.c_str() + want.size(), nullptr, 10);
  }
  return 0;
}

RunParams history_params(const ProjectionParams& p) {
  RunParams r;
  r.seed = p.seed;
  r.scenario = "projection";
  r.faults = FaultRates{};
  r.faults.skew_ppm = 0;
  r.members = p.members;
  r.max_in_flight.assign(static_cast<std::size_t>(p.members), p.lanes);
  r.lease_ms = p.lease_ms;
  r.rebalance_delay_ms = p.rebalance_delay_ms;
  r.records.assign(p.splits, kWeight);
  return r;
}

struct Proc {
  std::int32_t id = 0;
  std::string instance;
  std::unique_ptr<SimClock> clock;
  std::shared_ptr<RecordingStore> rec;
  std::shared_ptr<FaultInjectingStore> fis;
  std::shared_ptr<SimStore> sim;
  std::shared_ptr<OpCountingStore> counter;
  std::unique_ptr<MetricsRegistry> metrics;
  std::unique_ptr<runtime::Member> member;
  std::map<std::string, std::uint64_t> lanes;  // held split -> epoch
  bool alive = true;
  bool wake = false;
  bool dirty = false;
  bool gone_before_phase = false;
  VirtualNs next_step_at = 0;
  VirtualNs last_step_at = -1;
  std::uint64_t nonces = 0;
  std::uint64_t assignments_seen = 0;
  // Reset at every phase start.
  OpCounts at_phase_start;
  double cpu_s = 0, assign_cpu_s = 0, assign_cpu_max_s = 0;
  std::uint64_t assignments = 0;
};

class Projector final : public FleetView {
 public:
  explicit Projector(const ProjectionParams& p);
  ~Projector() override {
    for (auto& p : procs_) p->member.reset();  // they hold watches into the stores
  }
  ProjectionResult run();

  const SimClock* clock_of(std::int32_t inc) const override {
    return valid(inc) ? procs_[static_cast<std::size_t>(inc)]->clock.get() : nullptr;
  }
  bool running_since(std::int32_t inc, VirtualNs) const override {
    return valid(inc) && procs_[static_cast<std::size_t>(inc)]->alive;
  }
  std::size_t held_count(std::int32_t inc) const override {
    if (!valid(inc)) return 0;
    const Proc& p = *procs_[static_cast<std::size_t>(inc)];
    return p.alive && p.member ? p.member->held_ids().size() : 0;
  }

 private:
  bool valid(std::int32_t inc) const {
    return inc >= 0 && static_cast<std::size_t>(inc) < procs_.size();
  }
  Proc& spawn(const std::string& instance, VirtualNs first_step);
  void crash(Proc& p);
  void schedule(Proc& p, VirtualNs at);
  VirtualNs jitter() { return sched_.range(1'000, kNsPerMs); }
  void step(Proc& p);
  void after_call(Proc& p);
  void handle_events(Proc& p);
  void pump_dirty();
  void run_until(VirtualNs end);
  std::uint64_t assignment_count(const Proc& p) const;
  bool settled(std::string& why) const;
  PhaseResult run_phase(const std::string& name, VirtualNs min_len);
  void measure(PhaseResult& out);
  std::string standby_owner() const;
  Proc* pick_worker();
  [[noreturn]] void fail(const std::string& why) const;

  const ProjectionParams pp_;
  const RunParams rp_;
  VirtualTime time_;
  Trace trace_{16, false};
  History history_;
  Rng sched_, delays_, proc_;
  bool faults_on_ = false;
  std::shared_ptr<MemoryStore> mem_ = std::make_shared<MemoryStore>();
  std::shared_ptr<SimPlanner> planner_;
  SimEnv env_;
  std::uint64_t call_ = 0;
  std::vector<std::unique_ptr<Proc>> procs_;
  std::vector<std::int32_t> dirty_;
  using Item = std::tuple<VirtualNs, std::uint64_t, std::int32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue_;
  std::uint64_t seq_ = 0, events_ = 0;
  std::string phase_ = "cold start";
};

Projector::Projector(const ProjectionParams& p)
    : pp_(p),
      rp_(history_params(p)),
      history_(rp_, time_, trace_, *this),
      sched_(Rng::stream(p.seed, 1)),
      delays_(Rng::stream(p.seed, 2)),
      proc_(Rng::stream(p.seed, 4)),
      planner_(std::make_shared<SimPlanner>(rp_, delays_, faults_on_, trace_, time_)) {
  env_.time = &time_;
  env_.rng = &delays_;
  env_.trace = &trace_;
  env_.history = &history_;
  env_.current_call = &call_;
  env_.schedule_late = [this](LateWrite) { fail("a late write was scheduled with no faults"); };
  env_.on_queued = [this](std::int32_t inc) {
    Proc& q = *procs_[static_cast<std::size_t>(inc)];
    if (!q.dirty) {
      q.dirty = true;
      dirty_.push_back(inc);
    }
  };
}

void Projector::fail(const std::string& why) const {
  throw std::runtime_error(
      fmt::format("projection ({} members, targeted watches {}), phase '{}' "
                  "at {:.3f} s virtual: {}",
                  pp_.members, pp_.targeted ? "on" : "off", phase_,
                  static_cast<double>(time_.now()) / 1e9, why));
}

Proc& Projector::spawn(const std::string& instance, VirtualNs first_step) {
  auto owned = std::make_unique<Proc>();
  Proc* p = owned.get();
  p->id = static_cast<std::int32_t>(procs_.size());
  p->instance = instance;
  p->clock = std::make_unique<SimClock>(time_, time_.now(), proc_.range(3600, 7200) * kNsPerS, 0);
  p->rec = std::make_shared<RecordingStore>(mem_, history_);
  p->fis = std::make_shared<FaultInjectingStore>(p->rec, 0);
  p->sim = std::make_shared<SimStore>(
      env_, p->id, instance, [p] { return p->member ? p->member->nonce() : std::string(); }, p->fis,
      p->rec);
  p->counter = std::make_shared<OpCountingStore>(p->sim);
  p->metrics = std::make_unique<MetricsRegistry>();

  CoordinatorConfig c;
  c.instance_id = instance;
  c.lease_duration = std::chrono::milliseconds(pp_.lease_ms);
  c.rebalance_delay = std::chrono::milliseconds(pp_.rebalance_delay_ms);
  c.max_in_flight = pp_.lanes;
  // Production defaults, shortened to fit a short lease (validate() requires lease >= 3 x op).
  c.op_timeout = std::min(c.op_timeout, std::chrono::milliseconds(pp_.lease_ms / 6));
  c.drain_deadline = std::min(c.drain_deadline, std::chrono::milliseconds(pp_.lease_ms));
  c.validate();

  runtime::Member::Options o;
  o.wake = [p] { p->wake = true; };
  o.nonce_source = [p] { return fmt::format("n{}-{}", p->id, ++p->nonces); };
  o.targeted_watches = pp_.targeted;
  p->member = std::make_unique<runtime::Member>(c, p->counter, planner_, *p->clock, *p->metrics,
                                                std::move(o));
  procs_.push_back(std::move(owned));
  schedule(*p, first_step);
  return *p;
}

void Projector::crash(Proc& p) {
  p.member->abandon();
  p.alive = false;
  p.sim->faults.dead = true;
  p.lanes.clear();
  p.member.reset();
}

void Projector::schedule(Proc& p, VirtualNs at) {
  p.next_step_at = at;
  queue_.emplace(at, seq_++, p.id);
}

std::uint64_t Projector::assignment_count(const Proc& p) const {
  const MetricsSnapshot s = p.metrics->snapshot();
  const HistogramSnapshot* h =
      s.histogram("etl_coordination_assignment_seconds", Labels{{"instance", p.instance}});
  return h ? h->count : 0;
}

void Projector::step(Proc& p) {
  ++call_;
  const VirtualNs now = time_.now();
  const bool led = p.member->is_leader();
  const double cpu0 = thread_cpu_s();
  const Clock::time_point next = p.member->step();
  const double cpu = thread_cpu_s() - cpu0;
  p.cpu_s += cpu;
  if (led || p.member->is_leader()) {
    const std::uint64_t n = assignment_count(p);
    if (n > p.assignments_seen) {
      p.assignments += n - p.assignments_seen;
      p.assign_cpu_s += cpu;
      p.assign_cpu_max_s = std::max(p.assign_cpu_max_s, cpu);
      p.assignments_seen = n;
    }
  }
  p.last_step_at = now;
  p.wake = false;
  schedule(p, std::max(p.clock->virtual_at(next), now) + jitter());
  after_call(p);
}

void Projector::handle_events(Proc& p) {
  for (int round = 0; round < kMaxEventRounds; ++round) {
    std::vector<RevokeRequested> revokes;
    while (auto e = p.member->splits().poll_event()) {
      if (const auto* g = std::get_if<SplitGranted>(&*e)) {
        p.lanes[g->spec.id] = g->epoch;
      } else if (const auto* r = std::get_if<RevokeRequested>(&*e)) {
        revokes.push_back(*r);
      } else if (const auto* l = std::get_if<SplitLost>(&*e)) {
        p.lanes.erase(l->split_id);
      } else if (const auto* f = std::get_if<Fatal>(&*e)) {
        fail(fmt::format("{} reported Fatal: {}", p.instance, f->message));
      } else {
        fail(fmt::format("{} reported an unexpected event (index {}): lanes never finish here",
                         p.instance, e->index()));
      }
    }
    if (revokes.empty()) return;
    for (const RevokeRequested& r : revokes) {  // lanes hold nothing to drain: give it back now
      auto it = p.lanes.find(r.split_id);
      if (it == p.lanes.end() || it->second != r.epoch) continue;
      ++call_;
      p.member->splits().release_drained(r.split_id, r.epoch);
      history_.end_call(call_);
      p.lanes.erase(it);
    }
  }
  fail(fmt::format("{} kept raising revocations for {} rounds", p.instance, kMaxEventRounds));
}

void Projector::after_call(Proc& p) {
  history_.end_call(call_);
  if (p.alive) handle_events(p);
  if (const auto& v = history_.violation()) {
    fail(fmt::format("safety invariant {} violated: {}", v->invariant, v->message));
  }
  if (p.alive && p.member->stopped()) fail(p.instance + " stopped");
  if (p.alive && p.wake) {
    p.wake = false;
    if (time_.now() + jitter() < p.next_step_at) schedule(p, time_.now() + jitter());
  }
  pump_dirty();
}

void Projector::pump_dirty() {
  // Pumping only moves events into delivery buffers: it writes nothing, so the list is stable.
  for (const std::int32_t inc : dirty_) {
    Proc& q = *procs_[static_cast<std::size_t>(inc)];
    q.dirty = false;
    if (!q.alive) continue;
    q.sim->pump();
    const VirtualNs at = q.sim->next_delivery_after(q.last_step_at);
    if (at < q.next_step_at) schedule(q, at);
  }
  dirty_.clear();
}

void Projector::run_until(VirtualNs end) {
  while (!queue_.empty()) {
    const auto [at, seq, id] = queue_.top();
    if (at > end) break;
    queue_.pop();
    Proc& p = *procs_[static_cast<std::size_t>(id)];
    if (!p.alive || at != p.next_step_at) continue;  // superseded
    if (++events_ > pp_.max_events) fail(fmt::format("more than {} events", pp_.max_events));
    time_.advance_to(at);
    step(p);
  }
  time_.advance_to(end);
}

bool Projector::settled(std::string& why) const {
  const Proc* lead = nullptr;
  int leaders = 0;
  for (const auto& p : procs_) {
    if (p->alive && p->member->is_leader()) {
      ++leaders;
      lead = p.get();
    }
  }
  if (leaders != 1) {
    why = fmt::format("{} live members believe they lead", leaders);
    return false;
  }
  const auto& rec = history_.leader();
  if (!rec || rec->owner != lead->instance || rec->nonce != lead->member->nonce()) {
    why = fmt::format("{} leads but the leader record names {}", lead->instance,
                      rec ? rec->owner : "nobody");
    return false;
  }
  const auto& plan = history_.plan();
  if (!plan || !plan->planned) {
    why = "no plan yet";
    return false;
  }
  std::size_t assigned = 0, live = 0;
  for (const auto& p : procs_) {
    if (!p->alive) {
      if (history_.members().count(p->instance)) {
        why = fmt::format("crashed {}'s session is not expired yet", p->instance);
        return false;
      }
      continue;
    }
    ++live;
    auto a = history_.assigns().find(p->instance);
    if (a == history_.assigns().end() || a->second.term != plan->term) {
      why = fmt::format("{} has no assignment record of term {}", p->instance, plan->term);
      return false;
    }
    const auto mine = p->member->assignment();
    if (!mine || *mine != a->second.splits || p->member->held_ids() != a->second.splits) {
      why = fmt::format("{} does not yet follow and hold its assignment record", p->instance);
      return false;
    }
    assigned += a->second.splits.size();
  }
  const std::size_t want = std::min<std::size_t>(pp_.splits, live * pp_.lanes);
  if (assigned != want) {
    why = fmt::format("{} splits assigned, {} wanted", assigned, want);
    return false;
  }
  return true;
}

std::string Projector::standby_owner() const {
  auto e = mem_->get(core::kStandbyKey);
  if (!e) return {};
  try {
    return core::decode_standby(core::kStandbyKey, e->value).owner;
  } catch (const std::exception&) {
    return {};
  }
}

Proc* Projector::pick_worker() {
  const std::string standby = standby_owner();
  for (auto& p : procs_) {
    if (p->alive && !p->member->is_leader() && p->instance != standby) return p.get();
  }
  return nullptr;
}

void Projector::measure(PhaseResult& out) {
  const std::string standby = standby_owner();
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> prefix_size;
  std::unordered_map<std::string, std::uint64_t> key_size;  // 0 = absent
  for (const auto& p : procs_) {
    if (p->gone_before_phase) continue;
    MemberPhase m;
    m.id = p->instance;
    m.ops = p->counter->counts() - p->at_phase_start;
    out.total += m.ops;
    if (!p->alive) {
      m.role = Role::crashed;
      out.members.push_back(std::move(m));
      continue;
    }
    m.role = p->member->is_leader()   ? Role::leader
             : p->instance == standby ? Role::standby
                                      : Role::worker;
    for (const WatchScope& s : p->counter->open_scopes()) {
      if (s.prefix) {
        ++m.consumers;
        auto [it, fresh] = prefix_size.try_emplace(s.keys.front());
        if (fresh) {
          for (const Entry& e : mem_->list(s.keys.front())) {
            ++it->second.first;
            it->second.second += e.key.size() + e.value.size();
          }
        }
        m.view_entries += it->second.first;
        m.view_bytes += it->second.second;
        continue;
      }
      m.key_subscriptions += s.keys.size();
      for (const std::string& k : s.keys) {
        auto [it, fresh] = key_size.try_emplace(k, 0);
        if (fresh) {
          if (auto e = mem_->get(k)) it->second = e->key.size() + e->value.size();
        }
        m.view_entries += it->second > 0 ? 1 : 0;
        m.view_bytes += it->second;
      }
    }
    if (m.role == Role::leader) {
      out.leader_cpu_s = p->cpu_s;
      out.assignments = p->assignments;
      out.assign_step_cpu_s = p->assign_cpu_s;
      out.assign_step_cpu_max_s = p->assign_cpu_max_s;
    }
    out.members.push_back(std::move(m));
  }
}

PhaseResult Projector::run_phase(const std::string& name, VirtualNs min_len) {
  phase_ = name;
  const auto real0 = std::chrono::steady_clock::now();
  for (auto& p : procs_) {
    p->gone_before_phase = !p->alive;
    p->at_phase_start = p->counter->counts();
    p->cpu_s = p->assign_cpu_s = p->assign_cpu_max_s = 0;
    p->assignments = 0;
  }
  const std::uint64_t writes0 = history_.assign_writes();
  const VirtualNs lease = pp_.lease_ms * kNsPerMs;
  const VirtualNs start = time_.now();
  VirtualNs last_change = start;
  std::uint64_t writes = writes0;
  for (VirtualNs t = start + kProbeEvery;; t += kProbeEvery) {
    run_until(t);
    if (history_.assign_writes() != writes) {
      writes = history_.assign_writes();
      last_change = t;
    }
    if (t - start < min_len) continue;
    std::string why;
    if (t - last_change < pp_.quiet_ms * kNsPerMs) {
      why = "assignment records were written in the last quiet window";
    } else if (settled(why)) {
      break;
    }
    if (t - start >= pp_.bound_leases * lease) {
      fail(fmt::format("did not settle within {} leases: {}", pp_.bound_leases, why));
    }
  }
  PhaseResult out;
  out.name = name;
  out.virtual_s = static_cast<double>(time_.now() - start) / 1e9;
  out.assignment_writes = history_.assign_writes() - writes0;
  measure(out);
  out.real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - real0).count();
  out.rss_kb = status_kb("VmRSS");
  return out;
}

ProjectionResult Projector::run() {
  const auto real0 = std::chrono::steady_clock::now();
  ProjectionResult r;
  r.params = pp_;
  const VirtualNs lease = pp_.lease_ms * kNsPerMs;
  for (int i = 0; i < pp_.members; ++i) {
    spawn(fmt::format("m{:05}", i), sched_.range(0, 200 * kNsPerMs));
  }
  r.phases.push_back(run_phase("cold start", 0));
  r.phases.push_back(run_phase("steady", pp_.steady_leases * lease));
  phase_ = "join";
  spawn("joiner", time_.now() + jitter());
  r.phases.push_back(run_phase("join", pp_.phase_leases * lease));
  phase_ = "leave";
  Proc* w = pick_worker();
  if (w == nullptr) fail("no worker to crash (every member leads or stands by)");
  crash(*w);
  r.phases.push_back(run_phase("leave", pp_.phase_leases * lease));
  phase_ = "failover";
  Proc* lead = nullptr;
  for (auto& p : procs_) {
    if (p->alive && p->member->is_leader()) lead = p.get();
  }
  if (lead == nullptr) fail("no leader to crash");
  crash(*lead);
  r.phases.push_back(run_phase("failover", pp_.phase_leases * lease));
  r.real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - real0).count();
  r.peak_rss_kb = status_kb("VmHWM");
  return r;
}

}  // namespace

std::string_view to_string(Role r) {
  switch (r) {
    case Role::leader:
      return "leader";
    case Role::standby:
      return "standby";
    case Role::worker:
      return "worker";
    case Role::crashed:
      return "crashed";
  }
  return "?";
}

void validate(const ProjectionParams& p) {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (p.members < 3 || p.members > kMaxProjectedMembers) {
    bad(fmt::format("members must be 3..{} (a leader, a standby and a worker to crash), got {}",
                    kMaxProjectedMembers, p.members));
  }
  if (p.splits < 1 || p.splits > kMaxProjectedSplits) {
    bad(fmt::format("splits must be 1..{}, got {}", kMaxProjectedSplits, p.splits));
  }
  if (p.lanes < 1 || p.lanes > 64) bad(fmt::format("lanes must be 1..64, got {}", p.lanes));
  if (p.lease_ms < 300 || p.lease_ms > 600'000) {
    bad(fmt::format("lease must be 300 ms .. 600 s, got {} ms", p.lease_ms));
  }
  if (p.rebalance_delay_ms < 0 || p.rebalance_delay_ms > 600'000) {
    bad(fmt::format("rebalance delay must be 0 .. 600 s, got {} ms", p.rebalance_delay_ms));
  }
  if (p.steady_leases < 1 || p.steady_leases > 100 || p.phase_leases < 1 || p.phase_leases > 100) {
    bad("steady and phase lengths must be 1..100 leases");
  }
  if (p.bound_leases < p.phase_leases || p.bound_leases > 1000) {
    bad(fmt::format("the phase bound must be {} .. 1000 leases, got {}", p.phase_leases,
                    p.bound_leases));
  }
  if (p.quiet_ms < 0 || p.quiet_ms > p.bound_leases * p.lease_ms) {
    bad("the quiet window must be 0 .. the phase bound");
  }
  if (p.max_events < 1) bad("max_events must be positive");
}

std::uint64_t estimated_view_entries(const ProjectionParams& p) {
  const auto m = static_cast<std::uint64_t>(p.members) + 1;  // with the joiner
  const std::uint64_t held = std::min<std::uint64_t>(p.splits, m * p.lanes);
  const std::uint64_t fleet_wide = held + 2 * m + 4;  // leases, sessions, assignments, job keys
  if (!p.targeted) return m * fleet_wide + p.splits;  // + the leader's split records
  return 2 * (fleet_wide + p.splits) + (m - 2) * (6 + p.lanes);
}

ProjectionResult run_projection(const ProjectionParams& params) {
  validate(params);
  const std::uint64_t est = estimated_view_entries(params);
  if (est > params.max_view_entries) {
    throw ProjectionTooLarge(fmt::format(
        "{} members over {} splits with targeted watches {} would mirror about {} view entries, "
        "above the limit of {} (--max-view-entries): not run",
        params.members, params.splits, params.targeted ? "on" : "off", est,
        params.max_view_entries));
  }
  log().set_level(spdlog::level::off);
  Projector p(params);
  return p.run();
}

Spread worker_spread(const PhaseResult& phase,
                     const std::function<std::uint64_t(const MemberPhase&)>& get) {
  std::vector<std::uint64_t> v;
  for (const MemberPhase& m : phase.members) {
    if (m.role == Role::worker) v.push_back(get(m));
  }
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.median = v[v.size() / 2];
  s.max = v.back();
  return s;
}

const MemberPhase* member_with(const PhaseResult& phase, Role role) {
  for (const MemberPhase& m : phase.members) {
    if (m.role == role) return &m;
  }
  return nullptr;
}

}  // namespace etlc::sim
