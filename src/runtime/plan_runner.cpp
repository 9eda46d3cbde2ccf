#include "runtime/plan_runner.hpp"

#include <exception>

namespace etlc::runtime {

namespace {
PlanOutcome run_plan(Planner& planner, const PlanContext& context) {
  PlanOutcome out;
  try {
    out.plan = planner.plan(context);
  } catch (const std::exception& e) {
    out.error = e.what();
    if (out.error.empty()) out.error = "planner threw an exception with no message";
  } catch (...) {
    out.error = "planner threw a non-standard exception";
  }
  return out;
}
}  // namespace

void InlinePlanRunner::start(std::shared_ptr<Planner> planner, PlanContext context) {
  outcome_ = run_plan(*planner, context);
}

std::optional<PlanOutcome> InlinePlanRunner::take() {
  auto out = std::move(outcome_);
  outcome_.reset();
  return out;
}

ThreadPlanRunner::~ThreadPlanRunner() {
  if (thread_.joinable()) thread_.join();
}

void ThreadPlanRunner::start(std::shared_ptr<Planner> planner, PlanContext context) {
  if (thread_.joinable()) thread_.join();  // the previous run has finished (running() was false)
  MutexLock lk(mu_);
  running_ = true;
  thread_ = std::thread([this, planner = std::move(planner), context = std::move(context)] {
    PlanOutcome out = run_plan(*planner, context);
    {
      MutexLock lk2(mu_);
      outcome_ = std::move(out);
      running_ = false;
    }
    if (wake_) wake_();
  });
}

bool ThreadPlanRunner::running() const {
  MutexLock lk(mu_);
  return running_;
}

std::optional<PlanOutcome> ThreadPlanRunner::take() {
  MutexLock lk(mu_);
  auto out = std::move(outcome_);
  outcome_.reset();
  return out;
}

}  // namespace etlc::runtime
