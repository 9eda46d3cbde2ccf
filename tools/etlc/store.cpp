// Opening the job's NATS bucket for the tool.
//
// The tool never runs the fencing probe (it would write scratch keys into the job's bucket; the
// members already proved the bucket at their start) and connects under its own name so server
// monitoring tells it apart from members.
#include <fmt/format.h>

#include "cli.hpp"
#include "etlc/nats_store.hpp"

namespace etlc::cli {

namespace {
NatsStoreOptions to_nats(const ConnectOptions& c) {
  NatsStoreOptions o;
  o.servers = c.servers;
  o.job = c.job;
  o.bucket = c.bucket;
  o.replicas = c.replicas;
  o.user = c.user;
  o.password = c.password;
  o.token = c.token;
  o.credentials_file = c.credentials_file;
  o.tls.required = c.tls;
  o.tls.ca_file = c.tls_ca;
  o.tls.cert_file = c.tls_cert;
  o.tls.key_file = c.tls_key;
  o.connect_timeout_ms = c.timeout_ms;
  o.op_timeout_ms = c.timeout_ms;
  o.probe_on_open = false;
  o.startup_wait_ms = 0;    // an operator wants the answer now, not after a minute of retries
  o.create_bucket = false;  // a mistyped --job must not leave an empty bucket behind
  o.connection_name = "etlc-cli";
  return o;
}
}  // namespace

std::string bucket_of(const ConnectOptions& c) {
  try {
    return to_nats(c).bucket_name();
  } catch (const Error&) {
    return "?";
  }
}

std::shared_ptr<NatsStore> open_store(const ConnectOptions& c) {
  NatsStoreOptions o = to_nats(c);
  try {
    o.validate();
  } catch (const ConfigError& e) {
    throw CliError(kExitUsage, fmt::format("invalid option: {}", e.what()));
  }
  try {
    return NatsStore::open(std::move(o));
  } catch (const StoreError& e) {
    if (e.code() == StoreErrc::not_found) {
      throw CliError(kExitJobNotFound, fmt::format("job '{}' not found: bucket '{}' does not exist",
                                                   c.job, bucket_of(c)));
    }
    throw CliError(kExitStoreUnreachable, fmt::format("store unreachable: {}", e.what()));
  } catch (const ConfigError& e) {
    // Options passed validate(): the server refused the credentials or the TLS material.
    throw CliError(kExitStoreUnreachable,
                   fmt::format("store refused the connection: {}", e.what()));
  }
}

}  // namespace etlc::cli
