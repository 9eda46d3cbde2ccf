// Shared pieces of the NATS test binaries: lazily started servers shared by a whole process,
// store options pointing at them, and a few direct nats.c helpers (stream leader, raw buckets).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etlc/nats_store.hpp"
#include "support/nats_server.hpp"

namespace etlc::testing {

// One single-node server for the whole process, started on first use.
NatsServer& shared_server();
// One 3-node cluster for the whole process, started on first use.
NatsCluster& shared_cluster();

// A bucket name nobody else uses ("t_<16 hex>").
std::string unique_bucket();

// Options for a test store: short timeouts, fast reconnects, the given servers and bucket.
NatsStoreOptions test_options(std::vector<std::string> servers, std::string bucket,
                              int replicas = 1);

// The server name of the stream leader of bucket `bucket`, asked through a fresh connection to
// `servers`; nullopt if no leader is known (yet).
std::optional<std::string> stream_leader(const std::vector<std::string>& servers,
                                         const std::string& bucket);

// Creates a KV bucket directly with nats.c (bypassing NatsStore), for compatibility tests.
// ttl_ns > 0 sets an expiry. Throws std::runtime_error on failure.
void create_raw_bucket(const std::string& url, const std::string& bucket, int history,
                       std::int64_t ttl_ns = 0, bool memory_storage = false);

// Creates a plain stream `stream` capturing `subject` directly with nats.c. Throws
// std::runtime_error on failure.
void create_raw_stream(const std::string& url, const std::string& stream,
                       const std::string& subject);

// The stream settings of bucket `bucket` as the server reports them.
struct StreamSettings {
  std::int64_t history = 0;
  std::int64_t replicas = 0;
  std::int64_t max_msg_size = 0;
  std::int64_t max_age_ns = 0;
  bool file_storage = false;
};
std::optional<StreamSettings> stream_settings(const std::vector<std::string>& servers,
                                              const std::string& bucket);

// Puts `value` at `key` with nats.c's kvStore_Put (no headers, no guard), as a foreign client
// would. Throws std::runtime_error if the server refuses it (e.g. over the bucket's size limit).
void raw_put(const std::string& url, const std::string& bucket, const std::string& key,
             const std::string& value);

// How many subjects of bucket `bucket` matching `$KV.<bucket>.<filter>` hold a message (live
// values and delete markers alike), as the server's stream info reports them.
std::size_t subject_count(const std::vector<std::string>& servers, const std::string& bucket,
                          const std::string& filter);

// How many JetStream consumers the stream of bucket `bucket` has, as its stream info reports.
std::size_t consumer_count(const std::vector<std::string>& servers, const std::string& bucket);

// Purges `key` with nats.c's kvStore_Purge (a PURGE marker), as an operator tool would.
void purge_key(const std::string& url, const std::string& bucket, const std::string& key);

// Polls `cond` every 10 ms until it holds or `timeout` passes; returns the last result.
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout);

}  // namespace etlc::testing
