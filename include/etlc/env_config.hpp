// Configuration from the environment (opt-in): one call reads the variables below, applies them
// over the defaults the program passes, validates the result and throws a ConfigError that names
// the variable behind a broken rule. Meant for members run by a supervisor (Kubernetes, systemd),
// where the environment is how a deployment configures a process; docs/deployment.md.
//
// Identity (CoordinatorConfig::instance_id), first one set:
//   ETLC_INSTANCE_ID            the member's stable id
//   POD_NAME                    (Kubernetes downward API: a StatefulSet's pod name is stable)
//   the default's instance_id   when the program passed one
//   the host name               (stable for one member per host; several members on one host
//                                need ETLC_INSTANCE_ID each, else they are twins)
// Knobs (CoordinatorConfig; *_MS are integer milliseconds):
//   ETLC_LEASE_MS  ETLC_MAX_IN_FLIGHT  ETLC_REBALANCE_DELAY_MS  ETLC_DRAIN_DEADLINE_MS
//   ETLC_OP_TIMEOUT_MS  ETLC_MAX_ATTEMPTS  ETLC_REPLAN_INTERVAL_MS  ETLC_ASSIGNMENT_INTERVAL_MS
//   ETLC_BULK_OPS_PER_STEP  ETLC_MAX_PLANNER_FAILURES
//   ETLC_STARTUP_WAIT_MS        CoordinatorConfig::startup_wait and
//   NatsStoreOptions::startup_wait_ms
// The NATS store (NatsStoreOptions), the same variables the `etlc` tool reads:
//   NATS_URL                    servers, comma-separated (default nats://127.0.0.1:4222)
//   ETLC_JOB  ETLC_BUCKET       the job (its bucket), or an explicit bucket
//   ETLC_NATS_REPLICAS
//   ETLC_NATS_USER + ETLC_NATS_PASSWORD, or ETLC_NATS_TOKEN, or ETLC_NATS_CREDS (a file)
//   ETLC_NATS_TLS (1/0, true/false, yes/no, on/off)  ETLC_NATS_TLS_CA  ETLC_NATS_TLS_CERT
//   ETLC_NATS_TLS_KEY
//   ETLC_NATS_CONNECT_TIMEOUT_MS  ETLC_NATS_OP_TIMEOUT_MS
// (ETLC_LOG_LEVEL is read by the logger itself: etlc/logging.hpp.)
//
// A variable that is unset or empty leaves the default. A value that does not parse, or that
// breaks a rule of CoordinatorConfig::validate / NatsStoreOptions::validate, is a ConfigError
// whose message names the variable (and the rule); the message never contains a secret. A set
// variable that starts with ETLC_ but is none of the above is logged as a warning (a typo would
// otherwise be ignored silently).
//
// Thread safety: reads the process environment (getenv), which must not change concurrently.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "etlc/config.hpp"
#if defined(ETLC_WITH_NATS)
#include "etlc/nats_store.hpp"
#endif

namespace etlc {

// Looks a variable up; nullopt when unset. The default reads the process environment.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// The member's configuration: identity and knobs from the environment over `defaults`,
// validated. Throws ConfigError naming the variable.
CoordinatorConfig coordinator_config_from_env(const CoordinatorConfig& defaults = {});
CoordinatorConfig coordinator_config_from_env(const CoordinatorConfig& defaults,
                                              const EnvLookup& lookup);

#if defined(ETLC_WITH_NATS)
struct EnvConfig {
  CoordinatorConfig coordinator;
  NatsStoreOptions nats;
  // What was read and from where, secrets shown as ***, for a start-up log line:
  // "instance m-0 (POD_NAME), job orders, nats [nats://nats:4222]".
  std::string summary;
};

// The member's configuration and its store's options, both validated. ETLC_JOB (or ETLC_BUCKET)
// is required unless `defaults.nats` names a job or bucket. Throws ConfigError naming the
// variable. Does no I/O beyond NatsStoreOptions::validate's file checks (creds, TLS files).
EnvConfig config_from_env(const EnvConfig& defaults = {});
EnvConfig config_from_env(const EnvConfig& defaults, const EnvLookup& lookup);
#endif

}  // namespace etlc
