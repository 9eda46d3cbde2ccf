// `pg-backfill run`: the coordinated job. On the memory store, `members` members in this process;
// on NATS, this process is one member and several processes share the job.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "plan.hpp"

namespace pgb {

struct RunOptions {
  std::string source_pg, sink_pg;
  std::string table;
  std::string sink_table;        // default <table>_sink
  std::string store = "memory";  // "memory" or nats://HOST:PORT
  std::string job = "pg-backfill";
  std::string instance;       // default: memory "member" (+ "-i"), NATS host-pid
  std::uint32_t members = 1;  // memory store only
  std::uint32_t max_in_flight = 2;
  std::int64_t lease_ms = 3000;
  std::int64_t rebalance_delay_ms = 3000;
  std::int64_t commit_interval_ms = 1000;
  std::uint64_t throttle_rows_per_s = 0;  // per member; 0 = unlimited
  std::uint32_t batch_rows = 500;
  std::uint64_t split_rows = 20'000;
  std::uint32_t max_attempts = 4;
  bool fence = true;  // false: at-least-once (--no-fence)
  PlanFrom plan = PlanFrom::count;
  std::string progress = "plain";  // plain | none
};

struct RunTotals {
  double seconds = 0;
  std::uint64_t rows_written = 0;
  std::uint64_t batches = 0;
};

// Set by main()'s signal watcher (SIGINT/SIGTERM); run then stops gracefully.
std::atomic<int>& stop_signal();

// Runs until the job ends. Returns the exit code: 0 complete, 1 the job failed (stalled, fatal),
// 2 bad usage or input (one line on stderr), 128+signal when interrupted.
int run_job(const RunOptions& options, RunTotals* totals = nullptr);

}  // namespace pgb
