// PlanRunner: where the leader's planner runs. The planner is user code that may list a whole
// bucket, so in production it runs on its own thread and never delays session renewal; in manual
// mode (tests, simulation) it runs inline so that a run is deterministic.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "etlc/detail/mutex.hpp"
#include "etlc/planner.hpp"

namespace etlc::runtime {

struct PlanOutcome {
  std::optional<Plan> plan;  // set on success
  std::string error;         // the planner's exception message otherwise
};

class PlanRunner {
 public:
  virtual ~PlanRunner() = default;
  // Starts planner->plan(context). At most one run at a time (running() must be false).
  virtual void start(std::shared_ptr<Planner> planner, PlanContext context) = 0;
  virtual bool running() const = 0;
  // The outcome of a finished run, once.
  virtual std::optional<PlanOutcome> take() = 0;
};

// Runs the planner synchronously inside start().
class InlinePlanRunner final : public PlanRunner {
 public:
  void start(std::shared_ptr<Planner> planner, PlanContext context) override;
  bool running() const override { return false; }
  std::optional<PlanOutcome> take() override;

 private:
  std::optional<PlanOutcome> outcome_;
};

// Runs the planner on a background thread and calls `wake` when it finishes. The destructor
// joins a run in progress (a planner is expected to return in bounded time).
class ThreadPlanRunner final : public PlanRunner {
 public:
  explicit ThreadPlanRunner(std::function<void()> wake) : wake_(std::move(wake)) {}
  ~ThreadPlanRunner() override;
  void start(std::shared_ptr<Planner> planner, PlanContext context) override ETLC_EXCLUDES(mu_);
  bool running() const override ETLC_EXCLUDES(mu_);
  std::optional<PlanOutcome> take() override ETLC_EXCLUDES(mu_);

 private:
  std::function<void()> wake_;
  mutable Mutex mu_;
  std::thread thread_;  // start()'s and the destructor's (the owner's thread) only
  bool running_ ETLC_GUARDED_BY(mu_) = false;
  std::optional<PlanOutcome> outcome_ ETLC_GUARDED_BY(mu_);
};

}  // namespace etlc::runtime
