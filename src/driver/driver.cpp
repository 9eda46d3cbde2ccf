// The public Driver, run() and step(), and the worker pool. What the control side does is in
// control.cpp, what a lane does on its turn in lane_turn.cpp (see driver_impl.hpp).
#include <algorithm>

#include "driver/driver_impl.hpp"
#include "etlc/errors.hpp"
#include "etlc/metrics.hpp"

namespace etlc {

namespace {
// The registry the Driver's counters go to (see the constructor's contract in driver.hpp).
MetricsRegistry& pick_registry(MemberApi& member, std::shared_ptr<MetricsRegistry>& given) {
  if (given) return *given;
  if (auto* coordinator = dynamic_cast<Coordinator*>(&member)) return coordinator->metrics();
  given = std::make_shared<MetricsRegistry>();
  return *given;
}
}  // namespace

Driver::Impl::Impl(std::shared_ptr<MemberApi> member, std::shared_ptr<SplitSource> source,
                   DriverOptions options, const Clock& clock,
                   std::shared_ptr<MetricsRegistry> metrics)
    : member_(std::move(member)),
      source_(std::move(source)),
      options_(std::move(options)),
      clock_(clock),
      registry_(std::move(metrics)) {
  options_.validate();
  if (!member_) throw ConfigError("Driver: member must not be null");
  if (!source_) throw ConfigError("Driver: source must not be null");
  instance_ = member_->instance_id();
  metrics_.emplace(pick_registry(*member_, registry_), instance_);
}

Driver::Impl::~Impl() {
  stop_workers();
}

Driver::Driver(std::shared_ptr<MemberApi> member, std::shared_ptr<SplitSource> source,
               DriverOptions options, const Clock& clock, std::shared_ptr<MetricsRegistry> metrics)
    : impl_(std::make_unique<Impl>(std::move(member), std::move(source), std::move(options), clock,
                                   std::move(metrics))) {}

Driver::Driver(CoordinatorConfig config, std::shared_ptr<KvStore> store,
               std::shared_ptr<Planner> planner, std::shared_ptr<SplitSource> source,
               DriverOptions options, std::shared_ptr<MetricsRegistry> metrics) {
  auto coordinator =
      std::make_shared<Coordinator>(std::move(config), std::move(store), std::move(planner),
                                    SystemClock::instance(), std::move(metrics));
  Coordinator* built = coordinator.get();
  // The Coordinator's registry (the one given, or its private one) takes the Driver's counters.
  impl_ = std::make_unique<Impl>(std::move(coordinator), std::move(source), std::move(options),
                                 SystemClock::instance(), nullptr);
  impl_->built_ = built;
}

Driver::~Driver() = default;

DriverResult Driver::run() {
  return impl_->run();
}

std::optional<DriverResult> Driver::step() {
  return impl_->step();
}

void Driver::request_stop() noexcept {
  impl_->stop_requested_.store(true, std::memory_order_relaxed);
}

void Driver::abort() noexcept {
  impl_->abort_requested_.store(true, std::memory_order_relaxed);
}

DriverStats Driver::stats() const {
  MutexLock lk(impl_->mu_);
  DriverStats s = impl_->stats_;
  s.steps = impl_->steps_.load(std::memory_order_relaxed);
  return s;
}

std::string Driver::instance_id() const {
  return impl_->instance_;
}

Coordinator* Driver::coordinator() const {
  return impl_->built_;
}

// --- running ------------------------------------------------------------------------------------

DriverResult Driver::Impl::run() {
  if (started_) throw UsageError("Driver::run: the driver already ran (or is stepped manually)");
  started_ = true;
  try {
    member_->start();
  } catch (const ConfigError& e) {  // issue 19: bad configuration has its own exit code
    result_ = DriverResult{DriverExit::bad_config, e.what()};
    phase_ = Phase::done;
    return *result_;
  } catch (const std::exception& e) {
    result_ = DriverResult{DriverExit::fatal, e.what()};
    phase_ = Phase::done;
    return *result_;
  }
  const std::uint32_t n =
      options_.worker_threads != 0 ? options_.worker_threads : member_->max_in_flight();
  for (std::uint32_t i = 0; i < std::max<std::uint32_t>(n, 1); ++i) {
    workers_.emplace_back([this] { worker_loop(); });
  }
  std::optional<DriverResult> r;
  while (!r) r = control(options_.poll_interval);
  stop_workers();
  return *r;
}

std::optional<DriverResult> Driver::Impl::step() {
  if (result_) return result_;
  if (!workers_.empty()) throw UsageError("Driver::step is for manual mode only");
  started_ = true;
  if (auto r = control(std::chrono::milliseconds(0))) return r;
  std::deque<SlotPtr> batch;
  {
    MutexLock lk(mu_);
    batch.swap(ready_);
    for (auto& s : batch) {
      driver::FlagsHeld flags(*s, held(mu_));
      s->move_to(Slot::Where::running);
    }
  }
  for (auto& s : batch) after_turn(s, turn(*s));
  if (phase_ == Phase::stopping) return finish_if_quiet();
  return std::nullopt;
}

void Driver::Impl::worker_loop() {
  for (;;) {
    SlotPtr s;
    {
      MutexLock lk(mu_);
      while (!workers_stop_ && ready_.empty()) work_cv_.wait_for(mu_, options_.poll_interval);
      if (ready_.empty()) return;  // workers_stop_
      s = ready_.front();
      ready_.pop_front();
      driver::FlagsHeld flags(*s, held(mu_));
      s->move_to(Slot::Where::running);
    }
    after_turn(s, turn(*s));
  }
}

void Driver::Impl::stop_workers() {
  {
    MutexLock lk(mu_);
    workers_stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

}  // namespace etlc
