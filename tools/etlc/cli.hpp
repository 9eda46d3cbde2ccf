// Shared pieces of the etlc command-line tool: exit codes, the error that ends a command, the
// connection options, and the commands themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "etlc/nats_store.hpp"

namespace etlc::cli {

// Exit codes (stable; documented in docs/operations.md and `etlc --help`).
inline constexpr int kExitOk = 0;
inline constexpr int kExitJobNotFound = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitStoreUnreachable = 3;
inline constexpr int kExitRefused = 4;   // the store answered, but not everything asked was done
inline constexpr int kExitInternal = 5;  // an unexpected failure (a bug): the message says what

// Ends a command: main prints "etlc: <message>" on stderr and exits with `code`.
class CliError : public std::runtime_error {
 public:
  CliError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

struct ConnectOptions {
  std::vector<std::string> servers;
  std::string job;
  std::string bucket;
  int replicas = 1;
  std::string user;
  std::string password;
  std::string token;
  std::string credentials_file;
  bool tls = false;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::int64_t timeout_ms = 5000;
};

// Opens the job's bucket. Throws CliError: kExitUsage for invalid options, kExitStoreUnreachable
// when the server cannot be reached, rejects the credentials or the bucket is unusable.
std::shared_ptr<NatsStore> open_store(const ConnectOptions& options);
// The bucket name the options select (for messages).
std::string bucket_of(const ConnectOptions& options);

struct SplitsArgs {
  std::optional<std::string> status;
  std::optional<std::string> owner;
  std::size_t limit = 1000;
};

struct WatchArgs {
  std::int64_t interval_ms = 2000;
  std::uint64_t count = 0;  // refreshes before exiting; 0 = until interrupted
};

// Each command writes its output on stdout and returns the exit code; failures throw CliError.
int run_status(const ConnectOptions& c, bool json);
int run_splits(const ConnectOptions& c, const SplitsArgs& args, bool json);
int run_requeue(const ConnectOptions& c, const std::vector<std::string>& ids, bool json);
int run_cordon(const ConnectOptions& c, const std::string& instance, const std::string& reason,
               bool json);
int run_uncordon(const ConnectOptions& c, const std::string& instance, bool json);
int run_watch(const ConnectOptions& c, const WatchArgs& args, bool json);

// The job's lifecycle (lifecycle.cpp). Each writes one audit line (audit.hpp).
struct LifecycleArgs {
  std::string reason;             // pause
  bool force = false;             // delete: even while sessions are live
  bool yes = false;               // delete, reset: confirmed
  std::int64_t wait_ms = 60'000;  // bound on watching sessions to tell live from dead
  std::string split;              // seek
  std::uint64_t watermark = 0;    // seek
  std::string state;              // seek: the opaque progress state (default empty)
};
int run_pause(const ConnectOptions& c, const LifecycleArgs& args, bool json);
int run_resume(const ConnectOptions& c, bool json);
int run_delete(const ConnectOptions& c, const LifecycleArgs& args, bool json);
int run_reset(const ConnectOptions& c, const LifecycleArgs& args, bool json);
int run_seek(const ConnectOptions& c, const LifecycleArgs& args, bool json);
int run_repair(const ConnectOptions& c, const LifecycleArgs& args, bool json);

}  // namespace etlc::cli
