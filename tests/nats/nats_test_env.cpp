// See nats_test_env.hpp.
#include "nats/nats_test_env.hpp"

#include <nats/nats.h>

#include <fmt/format.h>

#include <functional>
#include <random>
#include <stdexcept>
#include <thread>

namespace etlc::testing {

NatsServer& shared_server() {
  static NatsServer server;
  return server;
}

NatsCluster& shared_cluster() {
  static NatsCluster cluster(3);
  return cluster;
}

std::string unique_bucket() {
  std::random_device device;
  std::uint64_t token = (std::uint64_t{device()} << 32) ^ std::uint64_t{device()};
  return fmt::format("t_{:016x}", token);
}

NatsStoreOptions test_options(std::vector<std::string> servers, std::string bucket, int replicas) {
  NatsStoreOptions o;
  o.servers = std::move(servers);
  o.bucket = std::move(bucket);
  o.replicas = replicas;
  o.connect_timeout_ms = 10'000;
  o.op_timeout_ms = 2'000;
  o.reconnect_wait_ms = 50;
  o.startup_wait_ms = 0;  // these tests want an unreachable server to fail at once
  return o;
}

namespace {

struct Conn {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  explicit Conn(const std::vector<std::string>& servers) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    std::vector<const char*> urls;
    for (const auto& s : servers) urls.push_back(s.c_str());
    natsOptions_SetServers(o, urls.data(), static_cast<int>(urls.size()));
    natsOptions_SetTimeout(o, 2000);
    natsOptions_SetAllowReconnect(o, false);
    natsStatus s = natsConnection_Connect(&nc, o);
    natsOptions_Destroy(o);
    if (s != NATS_OK) throw std::runtime_error(std::string("connect: ") + natsStatus_GetText(s));
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = 2000;
    natsConnection_JetStream(&js, nc, &jo);
  }
  ~Conn() {
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
};

}  // namespace

std::optional<std::string> stream_leader(const std::vector<std::string>& servers,
                                         const std::string& bucket) {
  Conn c(servers);
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  std::string stream = "KV_" + bucket;
  natsStatus s = js_GetStreamInfo(&si, c.js, stream.c_str(), nullptr, &jerr);
  std::optional<std::string> out;
  if (s == NATS_OK && si != nullptr && si->Cluster != nullptr && si->Cluster->Leader != nullptr &&
      si->Cluster->Leader[0] != '\0') {
    out = si->Cluster->Leader;
  }
  jsStreamInfo_Destroy(si);
  return out;
}

void create_raw_bucket(const std::string& url, const std::string& bucket, int history,
                       std::int64_t ttl_ns, bool memory_storage) {
  Conn c({url});
  kvConfig cfg;
  kvConfig_Init(&cfg);
  cfg.Bucket = bucket.c_str();
  cfg.History = static_cast<std::uint8_t>(history);
  cfg.TTL = ttl_ns;
  cfg.MaxValueSize = 1 << 20;
  cfg.StorageType = memory_storage ? js_MemoryStorage : js_FileStorage;
  kvStore* kv = nullptr;
  natsStatus s = js_CreateKeyValue(&kv, c.js, &cfg);
  kvStore_Destroy(kv);
  if (s != NATS_OK) {
    throw std::runtime_error(std::string("js_CreateKeyValue: ") + natsStatus_GetText(s));
  }
}

void create_raw_stream(const std::string& url, const std::string& stream,
                       const std::string& subject) {
  Conn c({url});
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = stream.c_str();
  const char* subjects[] = {subject.c_str()};
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_AddStream(&si, c.js, &cfg, nullptr, &jerr);
  jsStreamInfo_Destroy(si);
  if (s != NATS_OK) {
    throw std::runtime_error(std::string("js_AddStream: ") + natsStatus_GetText(s));
  }
}

std::optional<StreamSettings> stream_settings(const std::vector<std::string>& servers,
                                              const std::string& bucket) {
  Conn c(servers);
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  std::string stream = "KV_" + bucket;
  natsStatus s = js_GetStreamInfo(&si, c.js, stream.c_str(), nullptr, &jerr);
  std::optional<StreamSettings> out;
  if (s == NATS_OK && si != nullptr && si->Config != nullptr) {
    out =
        StreamSettings{si->Config->MaxMsgsPerSubject, si->Config->Replicas, si->Config->MaxMsgSize,
                       si->Config->MaxAge, si->Config->Storage == js_FileStorage};
  }
  jsStreamInfo_Destroy(si);
  return out;
}

void purge_key(const std::string& url, const std::string& bucket, const std::string& key) {
  Conn c({url});
  kvStore* kv = nullptr;
  natsStatus s = js_KeyValue(&kv, c.js, bucket.c_str());
  if (s == NATS_OK) s = kvStore_Purge(kv, key.c_str(), nullptr);
  kvStore_Destroy(kv);
  if (s != NATS_OK) throw std::runtime_error(std::string("purge: ") + natsStatus_GetText(s));
}

std::size_t subject_count(const std::vector<std::string>& servers, const std::string& bucket,
                          const std::string& filter) {
  Conn c(servers);
  jsOptions jo;
  jsOptions_Init(&jo);
  const std::string subjects = "$KV." + bucket + "." + filter;
  jo.Stream.Info.SubjectsFilter = subjects.c_str();
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&si, c.js, ("KV_" + bucket).c_str(), &jo, &jerr);
  if (s != NATS_OK) throw std::runtime_error(std::string("stream info: ") + natsStatus_GetText(s));
  const std::size_t n =
      si->State.Subjects == nullptr ? 0 : static_cast<std::size_t>(si->State.Subjects->Count);
  jsStreamInfo_Destroy(si);
  return n;
}

std::size_t consumer_count(const std::vector<std::string>& servers, const std::string& bucket) {
  Conn c(servers);
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&si, c.js, ("KV_" + bucket).c_str(), nullptr, &jerr);
  if (s != NATS_OK) throw std::runtime_error(std::string("stream info: ") + natsStatus_GetText(s));
  const auto n = static_cast<std::size_t>(si->State.Consumers);
  jsStreamInfo_Destroy(si);
  return n;
}

void raw_put(const std::string& url, const std::string& bucket, const std::string& key,
             const std::string& value) {
  Conn c({url});
  kvStore* kv = nullptr;
  natsStatus s = js_KeyValue(&kv, c.js, bucket.c_str());
  std::uint64_t rev = 0;
  if (s == NATS_OK) {
    s = kvStore_Put(&rev, kv, key.c_str(), value.data(), static_cast<int>(value.size()));
  }
  kvStore_Destroy(kv);
  if (s != NATS_OK) {
    throw std::runtime_error(std::string("put: ") + natsStatus_GetText(s) + ": " +
                             nats_GetLastError(nullptr));
  }
}

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (cond()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace etlc::testing
