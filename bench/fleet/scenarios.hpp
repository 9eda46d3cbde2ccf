// The fleet benchmark's scenarios. Each builds its fleet on a fresh backend, measures, tears
// down, and returns a Result. Every wait is bounded; a bound that expires is reported (a figure
// marked missing), never waited out.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "harness.hpp"
#include "report.hpp"

namespace etlc::bench {

struct HandoffOptions {
  std::size_t handoffs = 200;  // samples
  std::size_t splits = 16;
};
// Two members; an operator cordon moves every split of one member to the other, then an
// uncordon moves half back, and so on. Each parked revocation is released (release_drained) one
// at a time and timed until the assignee's claim CAS is acknowledged.
Result run_handoff(const BackendOptions& backend, const HandoffOptions& o);

struct FailoverOptions {
  std::size_t members = 5;
  std::size_t splits = 20;
  std::size_t rounds = 5;
  std::int64_t lease_ms = 1500;
  std::int64_t op_timeout_ms = 300;
  std::int64_t rebalance_delay_ms = 500;
  bool leader = false;             // kill the leader instead of a worker
  double settle_timeout_s = 60.0;  // bound on the fleet's settling before each round (10^5: more)
  // Lanes per member (max_in_flight); 0 = splits (survivors have room for a victim's splits).
  // Above 1024 splits (the config's bound) fewer lanes than splits: members hold
  // min(splits, members x lanes), and a victim's splits are claimed only where lanes are free.
  std::uint32_t lanes = 0;
};
// A member is abandoned (crash: nothing released); we time until every split it held is claimed
// by a survivor (and, when the leader is killed, until the new leader's first publish).
Result run_failover(const BackendOptions& backend, const FailoverOptions& o);

struct StoreCostOptions {
  std::vector<std::size_t> members = {10, 50, 200};
  std::vector<std::size_t> splits = {1000, 10000, 100000};
  std::uint32_t lanes = 8;
  std::int64_t lease_ms = 2000;
  double window_s = 6.0;
  double settle_s = 1.0;
  double setup_timeout_s = 300.0;
};
// Steady state (lanes full, no commits): store writes and watch events per member per second.
Result run_store_cost(const BackendOptions& backend, const StoreCostOptions& o);

struct ColdStartOptions {
  std::size_t members = 50;
  std::size_t splits = 100000;
  std::uint32_t lanes = 8;
  std::size_t start_threads = 8;
  double timeout_s = 180.0;
  bool trace = false;  // trace the leader's creates: latency, and time with none in flight
  // Config knobs (0 = the library's default).
  std::uint32_t bulk_ops_per_step = 0;
  std::int64_t assignment_interval_ms = -1;  // -1 = default
};
// From an empty store to a seeded plan and every lane filled.
Result run_cold_start(const BackendOptions& backend, const ColdStartOptions& o);

struct ScaleOutOptions {
  std::size_t members = 10;
  std::size_t join = 10;
  std::size_t splits = 10000;
  std::uint32_t lanes = 1024;
  double timeout_s = 300.0;
};
// `members` hold every split; `join` more start; time until balanced and every move claimed.
Result run_scale_out(const BackendOptions& backend, const ScaleOutOptions& o);

struct CommitOptions {
  std::uint32_t lanes = 8;
  double seconds = 5.0;
  std::size_t state_bytes = 64;
};
// Fenced commits per second from one (non-leader) member: one lane, then all lanes at once.
Result run_commit(const BackendOptions& backend, const CommitOptions& o);

// Shared pieces.
Json latency_json(const std::vector<double>& ms);
CoordinatorConfig bench_config();

}  // namespace etlc::bench
