// `file-backfill run`: the coordinated job. On the memory store, N members in this process; on
// NATS, this process is one member and several processes share the job.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

namespace fb {

struct RunOptions {
  std::filesystem::path input;
  std::filesystem::path output;
  std::string store = "memory";  // "memory" or "nats://HOST:PORT" (comma-separated for a cluster)
  int replicas = 1;              // NATS: replicas of a bucket this run creates (1..5)
  std::string job = "file-backfill";
  std::string
      instance;  // member id (prefix with --members); default: memory "member", NATS host-pid
  std::uint32_t members = 1;
  std::uint32_t max_in_flight = 2;
  std::int64_t lease_ms = 3000;
  std::int64_t rebalance_delay_ms = 3000;
  std::uint64_t split_bytes = 8ull << 20;
  // Plan time: cut files larger than split_bytes into row-aligned ranges (off: a file is never
  // cut at plan time, as before issue 17; only lanes under way split it).
  bool cut_files = true;
  // Run time: idle lanes take the unread tail of the splits that would end last
  // (CoordinatorConfig::dynamic_splitting).
  bool dynamic_splitting = true;
  double kill_member_at = -1;  // percent; < 0 = never
  double restart_at = -1;      // percent; < 0 = never
  std::int64_t commit_interval_ms = 1000;
  std::uint64_t throttle_bytes_per_s = 0;  // per member (or per lane); 0 = unlimited
  std::string throttle_per = "member";     // member: its lanes share it; lane: each lane's own
  // Appends a line per split a lane resumed from a commit (a move, or a takeover): the job's
  // fraction read, the split's, the split and the member (memory store; empty = none).
  std::filesystem::path moves_log;
  bool drain_on_stall = false;
  std::string progress = "auto";  // auto | live | plain | none
  // Serve Prometheus /metrics and /healthz on 127.0.0.1:PORT (0 = a free port); < 0 = off.
  int metrics_port = -1;
  // NATS connection, as the etlc tool takes it (flags, or the ETLC_NATS_* environment).
  std::string bucket;
  std::string user;
  std::string password;
  std::string token;
  std::string credentials_file;
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // How long a member started before its NATS server waits for it (NatsStoreOptions).
  std::int64_t startup_wait_ms = 60'000;
};

// What a run did, for the summary and for `bench`.
struct RunTotals {
  double seconds = 0;
  std::uint64_t input_bytes = 0;
  std::uint64_t splits = 0;        // planned, plus the residuals this process's lanes cut off
  std::uint64_t rows = 0;          // distinct valid rows of the completed splits
  std::uint64_t malformed = 0;     // malformed rows of the completed splits
  std::uint64_t rows_written = 0;  // output lines written (duplicates included)
  std::uint64_t bytes_read = 0;    // input bytes read (replays included)
};

// Set by main()'s signal watcher (SIGINT/SIGTERM); run_job then stops gracefully.
std::atomic<int>& stop_signal();

// Runs the job to its end. Returns the process exit code (etlc/exit_codes.hpp): 0 complete,
// stopped by SIGINT/SIGTERM (every split released) or stalled with drain_on_stall; 1 fatal;
// 2 bad usage, input or configuration; 3 stalled. Prints progress and a summary to stdout,
// errors to stderr (one line each).
int run_job(const RunOptions& options, RunTotals* totals = nullptr);

}  // namespace fb
