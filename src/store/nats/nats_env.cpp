// config_from_env (etlc/env_config.hpp): the member's config and its NATS store's options.
#include <fmt/format.h>

#include "env_reader.hpp"
#include "etlc/env_config.hpp"
#include "etlc/nats_store.hpp"
#include "store/nats/nats_redact.hpp"

namespace etlc {

namespace {

constexpr const char* kDefaultServer = "nats://127.0.0.1:4222";

std::vector<std::string> split_urls(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string url = text.substr(start, comma - start);
    while (!url.empty() && url.front() == ' ') url.erase(url.begin());
    while (!url.empty() && url.back() == ' ') url.pop_back();
    out.push_back(std::move(url));  // an empty entry is left for validate() to name
    start = comma + 1;
  }
  return out;
}

void read_nats(env::EnvReader& r, NatsStoreOptions& n) {
  if (auto v = r.text_redacted("NATS_URL", "servers", &redact_urls)) {
    n.servers = split_urls(*v);
  }
  if (n.servers.empty()) n.servers = {kDefaultServer};
  if (auto v = r.text("ETLC_JOB", "job")) n.job = *v;
  if (auto v = r.text("ETLC_BUCKET", "bucket")) n.bucket = *v;
  if (auto v = r.int64("ETLC_NATS_REPLICAS", "replicas")) n.replicas = static_cast<int>(*v);
  if (auto v = r.text("ETLC_NATS_USER", "user")) n.user = *v;
  if (auto v = r.text("ETLC_NATS_PASSWORD", "password", true)) n.password = *v;
  if (auto v = r.text("ETLC_NATS_TOKEN", "token", true)) n.token = *v;
  if (auto v = r.text("ETLC_NATS_CREDS", "credentials_file")) n.credentials_file = *v;
  if (auto v = r.boolean("ETLC_NATS_TLS", "tls.required")) n.tls.required = *v;
  if (auto v = r.text("ETLC_NATS_TLS_CA", "tls.ca_file")) n.tls.ca_file = *v;
  if (auto v = r.text("ETLC_NATS_TLS_CERT", "tls.cert_file")) n.tls.cert_file = *v;
  if (auto v = r.text("ETLC_NATS_TLS_KEY", "tls.key_file")) n.tls.key_file = *v;
  if (auto v = r.int64("ETLC_NATS_CONNECT_TIMEOUT_MS", "connect_timeout_ms")) {
    n.connect_timeout_ms = *v;
  }
  if (auto v = r.int64("ETLC_NATS_OP_TIMEOUT_MS", "op_timeout_ms")) n.op_timeout_ms = *v;
  if (auto v = r.int64("ETLC_STARTUP_WAIT_MS", "startup_wait_ms")) n.startup_wait_ms = *v;
}

std::string summary_of(const EnvConfig& c, const std::string& instance_source) {
  std::string servers;
  for (const auto& s : c.nats.servers) {
    if (!servers.empty()) servers += ", ";
    servers += nats_detail::redact_url(s);
  }
  const std::string where = !c.nats.bucket.empty() ? fmt::format("bucket {}", c.nats.bucket)
                                                   : fmt::format("job {}", c.nats.job);
  return fmt::format("instance {} ({}), {}, nats [{}]", c.coordinator.instance_id, instance_source,
                     where, servers);
}

}  // namespace

EnvConfig config_from_env(const EnvConfig& defaults) {
  env::warn_unknown_etlc_variables();
  return config_from_env(defaults, env::process_lookup());
}

EnvConfig config_from_env(const EnvConfig& defaults, const EnvLookup& lookup) {
  env::EnvReader r(lookup);
  EnvConfig c = defaults;
  env::read_coordinator(r, c.coordinator);
  read_nats(r, c.nats);
  env::validate_coordinator(r, c.coordinator);
  if (c.nats.job.empty() && c.nats.bucket.empty()) {
    throw ConfigError(
        "environment variable ETLC_JOB is not set: name the job (or set ETLC_BUCKET), or pass "
        "a default job in EnvConfig::nats");
  }
  try {
    c.nats.validate();
  } catch (const ConfigError& e) {
    r.rethrow(e);
  }
  const auto set = [&](const char* var) {
    auto v = lookup(var);
    return v && !v->empty();
  };
  const std::string source = set("ETLC_INSTANCE_ID")                    ? "ETLC_INSTANCE_ID"
                             : set("POD_NAME")                          ? "POD_NAME"
                             : defaults.coordinator.instance_id.empty() ? "host name"
                                                                        : "default";
  c.summary = summary_of(c, source);
  return c;
}

}  // namespace etlc
