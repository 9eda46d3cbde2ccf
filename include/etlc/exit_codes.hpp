// Process exit codes for supervisors (Kubernetes, systemd): what a member's main() returns, so a
// supervisor can tell a graceful stop from a failure, and a failure that a restart may cure from
// one that it cannot (docs/deployment.md). DriverResult::exit_code() maps a run's end onto them;
// exit_code_for() maps an exception thrown before the run (building the config, the store or the
// Driver).
#pragma once

#include <exception>

#include "etlc/errors.hpp"

namespace etlc::exit_codes {

// The job completed, the member stopped gracefully on request (SIGTERM), or it stalled under
// StallPolicy::drain_with_warning. Nothing is held.
inline constexpr int ok = 0;
// The member could not go on: the store was unreachable past the start-up wait, unsafe or
// closed; a second live process used its instance id; an unexpected error. A restart may help.
inline constexpr int fatal = 1;
// Invalid configuration: a ConfigError (an option or environment variable, a fingerprint that
// differs from the job's, credentials the server refused). A restart does not help.
inline constexpr int bad_config = 2;
// The job cannot complete (quarantined splits, or the planner failed max_planner_failures times):
// an operator must act (etlc requeue / etlc resume). A restart does not help.
inline constexpr int stalled = 3;
// abort() (tests and demos): the member stopped as if it had crashed.
inline constexpr int aborted = 4;

// bad_config for ConfigError, fatal for anything else.
inline int exit_code_for(const std::exception& e) noexcept {
  return dynamic_cast<const ConfigError*>(&e) != nullptr ? bad_config : fatal;
}

}  // namespace etlc::exit_codes
