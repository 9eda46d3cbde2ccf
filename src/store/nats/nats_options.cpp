// NatsStoreOptions: validation, bucket naming and the redacted printable form.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "etlc/nats_store.hpp"
#include "store/nats/nats_redact.hpp"

namespace etlc {

namespace {

bool bucket_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// Throws ConfigError naming `option` unless `path` names a readable regular file.
void check_readable_file(const std::string& path, std::string_view option) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError(
        fmt::format("{}: '{}' does not exist or is not a regular file", option, path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: '{}' is not readable", option, path));
}

void check_timeout(std::int64_t value, std::int64_t min, std::string_view option) {
  if (value < min || value > NatsStoreOptions::kMaxTimeoutMs) {
    throw ConfigError(fmt::format("{} must be in [{}, {}] ms, got {}", option, min,
                                  NatsStoreOptions::kMaxTimeoutMs, value));
  }
}

void check_server_url(const std::string& url, std::size_t index) {
  std::string option = fmt::format("servers[{}]", index);
  std::string_view rest = url;
  if (rest.starts_with("nats://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("tls://")) {
    rest.remove_prefix(6);
  } else {
    throw ConfigError(fmt::format("{} ('{}') must start with nats:// or tls://", option,
                                  nats_detail::redact_url(url)));
  }
  if (auto at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  if (rest.empty() || rest.front() == ':' || rest.front() == '/') {
    throw ConfigError(fmt::format("{} ('{}') has no host", option, nats_detail::redact_url(url)));
  }
  for (char c : url) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      throw ConfigError(
          fmt::format("{} ('{}') contains a separator or space; give one URL per element", option,
                      nats_detail::redact_url(url)));
    }
  }
}

}  // namespace

std::string NatsStoreOptions::bucket_for_job(std::string_view job) {
  if (job.empty()) throw ConfigError("job is empty");
  if (job.size() > kMaxJobBytes) {
    throw ConfigError(
        fmt::format("job is {} bytes; at most {} are allowed", job.size(), kMaxJobBytes));
  }
  std::string out = "etlc_";
  for (char c : job) {
    bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (plain) {
      out.push_back(c);
    } else {
      out += fmt::format("_{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

std::string NatsStoreOptions::bucket_name() const {
  return bucket.empty() ? bucket_for_job(job) : bucket;
}

void NatsStoreOptions::validate() const {
  if (servers.empty()) throw ConfigError("servers is empty: give at least one nats:// URL");
  if (servers.size() > kMaxServers) {
    throw ConfigError(
        fmt::format("servers has {} URLs; at most {} are allowed", servers.size(), kMaxServers));
  }
  for (std::size_t i = 0; i < servers.size(); ++i) check_server_url(servers[i], i);

  if (bucket.empty()) {
    if (job.empty()) throw ConfigError("job is empty (and no bucket is given)");
    (void)bucket_for_job(job);  // checks the length
  } else {
    if (bucket.size() > kMaxBucketBytes) {
      throw ConfigError(fmt::format("bucket is {} bytes; at most {} are allowed", bucket.size(),
                                    kMaxBucketBytes));
    }
    for (char c : bucket) {
      if (!bucket_char(c)) {
        throw ConfigError(fmt::format("bucket '{}' has a character outside [A-Za-z0-9_-]", bucket));
      }
    }
  }

  if (replicas != 1 && replicas != 3 && replicas != 5) {
    throw ConfigError(fmt::format("replicas must be 1, 3 or 5, got {}", replicas));
  }

  if (history < 1 || history > 64) {
    throw ConfigError(fmt::format("history must be in [1, 64], got {}", history));
  }

  if (!password.empty() && user.empty()) throw ConfigError("password is set but user is empty");
  if (!user.empty() && password.empty()) throw ConfigError("user is set but password is empty");
  int methods =
      (user.empty() ? 0 : 1) + (token.empty() ? 0 : 1) + (credentials_file.empty() ? 0 : 1);
  if (methods > 1) {
    throw ConfigError(
        "user/password, token and credentials_file are exclusive: set at most one of them");
  }
  if (!credentials_file.empty()) check_readable_file(credentials_file, "credentials_file");

  if (tls.cert_file.empty() != tls.key_file.empty()) {
    throw ConfigError(tls.cert_file.empty() ? "tls.key_file is set but tls.cert_file is empty"
                                            : "tls.cert_file is set but tls.key_file is empty");
  }
  if (!tls.ca_file.empty()) check_readable_file(tls.ca_file, "tls.ca_file");
  if (!tls.cert_file.empty()) check_readable_file(tls.cert_file, "tls.cert_file");
  if (!tls.key_file.empty()) check_readable_file(tls.key_file, "tls.key_file");

  check_timeout(connect_timeout_ms, 1, "connect_timeout_ms");
  check_timeout(op_timeout_ms, 1, "op_timeout_ms");
  check_timeout(reconnect_wait_ms, 0, "reconnect_wait_ms");
  if (creates_in_flight < 1 || creates_in_flight > kMaxCreatesInFlight) {
    throw ConfigError(fmt::format("creates_in_flight must be in [1, {}], got {}",
                                  kMaxCreatesInFlight, creates_in_flight));
  }
  check_timeout(startup_wait_ms, 0, "startup_wait_ms");
  if (max_reconnect_attempts < -1) {
    throw ConfigError(fmt::format("max_reconnect_attempts must be -1 (forever) or >= 0, got {}",
                                  max_reconnect_attempts));
  }
  if (connection_name.size() > 256) throw ConfigError("connection_name exceeds 256 bytes");
}

std::string NatsStoreOptions::to_string() const {
  std::string out = "NatsStoreOptions{servers=[";
  for (std::size_t i = 0; i < servers.size(); ++i) {
    if (i > 0) out += ", ";
    out += nats_detail::redact_url(servers[i]);
  }
  out += "]";
  if (!job.empty()) out += fmt::format(", job='{}'", job);
  if (!bucket.empty()) out += fmt::format(", bucket='{}'", bucket);
  out += fmt::format(", replicas={}, history={}", replicas, history);
  if (!user.empty()) out += fmt::format(", user='{}', password=***", user);
  if (!token.empty()) out += ", token=***";
  if (!credentials_file.empty()) out += fmt::format(", credentials_file='{}'", credentials_file);
  out += fmt::format(", tls={{required={}", tls.required);
  if (!tls.ca_file.empty()) out += fmt::format(", ca_file='{}'", tls.ca_file);
  if (!tls.cert_file.empty()) {
    out += fmt::format(", cert_file='{}', key_file='{}'", tls.cert_file, tls.key_file);
  }
  out += fmt::format(
      "}}, connect_timeout_ms={}, op_timeout_ms={}, creates_in_flight={}, reconnect_wait_ms={}, "
      "max_reconnect_attempts={}, startup_wait_ms={}, probe_on_open={}",
      connect_timeout_ms, op_timeout_ms, creates_in_flight, reconnect_wait_ms,
      max_reconnect_attempts, startup_wait_ms, probe_on_open);
  if (!connection_name.empty()) out += fmt::format(", connection_name='{}'", connection_name);
  out += "}";
  return out;
}

std::string redact_urls(std::string_view urls) {
  std::string out;
  for (std::size_t at = 0; at <= urls.size();) {
    const std::size_t comma = std::min(urls.find(',', at), urls.size());
    if (at > 0) out += ',';
    out += nats_detail::redact_url(urls.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace etlc
