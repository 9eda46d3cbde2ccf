#include "env_reader.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>

#include "log.hpp"

extern char** environ;  // POSIX

namespace etlc::env {

namespace {
// Variables with the ETLC_ prefix that belong to the project's scripts and tests, not to a member.
constexpr std::string_view kScriptVariables[] = {"ETLC_LOG_LEVEL", "ETLC_WERROR", "ETLC_JOBS",
                                                 "ETLC_KEEP_TEST_DIRS"};
constexpr std::size_t kMaxShownBytes = 120;

std::string shorten(std::string v) {
  if (v.size() > kMaxShownBytes) v = v.substr(0, kMaxShownBytes) + "...";
  for (char& c : v) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return v;
}
}  // namespace

EnvLookup process_lookup() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::optional<std::string> EnvReader::text(std::string_view var, std::string_view field,
                                           bool secret) {
  std::optional<std::string> v = lookup_(var);
  if (!v || v->empty()) return std::nullopt;
  used_.push_back(Used{std::string(var), std::string(field),
                       fmt::format("{}={}", var, secret ? "***" : shorten(*v))});
  return v;
}

std::optional<std::string> EnvReader::text_redacted(std::string_view var, std::string_view field,
                                                    std::string (*redact)(std::string_view)) {
  std::optional<std::string> v = lookup_(var);
  if (!v || v->empty()) return std::nullopt;
  used_.push_back(
      Used{std::string(var), std::string(field), fmt::format("{}={}", var, shorten(redact(*v)))});
  return v;
}

void EnvReader::bad(std::string_view var, const std::string& value, std::string_view what,
                    bool secret) const {
  throw ConfigError(
      fmt::format("environment variable {}='{}': {}", var, secret ? "***" : shorten(value), what));
}

std::optional<std::int64_t> EnvReader::int64(std::string_view var, std::string_view field) {
  std::optional<std::string> v = text(var, field);
  if (!v) return std::nullopt;
  std::int64_t out = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size()) {
    bad(var, *v, "not a decimal integer (milliseconds for *_MS)");
  }
  return out;
}

std::optional<std::uint64_t> EnvReader::u64(std::string_view var, std::string_view field) {
  std::optional<std::string> v = text(var, field);
  if (!v) return std::nullopt;
  std::uint64_t out = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec == std::errc::result_out_of_range) bad(var, *v, "out of range");
  if (ec != std::errc() || end != v->data() + v->size()) bad(var, *v, "not a decimal integer");
  return out;
}

std::optional<std::uint32_t> EnvReader::u32(std::string_view var, std::string_view field) {
  std::optional<std::uint64_t> out = u64(var, field);
  if (!out) return std::nullopt;
  if (*out > std::numeric_limits<std::uint32_t>::max()) {
    bad(var, std::to_string(*out), "out of range");
  }
  return static_cast<std::uint32_t>(*out);
}

std::optional<bool> EnvReader::boolean(std::string_view var, std::string_view field) {
  std::optional<std::string> v = text(var, field);
  if (!v) return std::nullopt;
  std::string s = *v;
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  bad(var, *v, "not a boolean (1/0, true/false, yes/no, on/off)");
}

void EnvReader::note(std::string_view source, std::string_view field, std::string shown) {
  used_.push_back(Used{std::string(source), std::string(field), std::move(shown)});
}

void EnvReader::rethrow(const ConfigError& e) const {
  const std::string message = e.what();
  std::string culprits;
  for (const Used& u : used_) {
    if (message.find(u.field) == std::string::npos) continue;
    culprits += (culprits.empty() ? "" : ", ") + u.shown;
  }
  if (culprits.empty()) {
    throw ConfigError(message + " (no environment variable set it: the program's own default)");
  }
  throw ConfigError(fmt::format("{} (set by {})", message, culprits));
}

const std::vector<std::string_view> kKnownVariables = {
    "ETLC_INSTANCE_ID",
    "POD_NAME",
    "ETLC_LEASE_MS",
    "ETLC_MAX_IN_FLIGHT",
    "ETLC_REBALANCE_DELAY_MS",
    "ETLC_DRAIN_DEADLINE_MS",
    "ETLC_OP_TIMEOUT_MS",
    "ETLC_MAX_ATTEMPTS",
    "ETLC_REPLAN_INTERVAL_MS",
    "ETLC_ASSIGNMENT_INTERVAL_MS",
    "ETLC_BULK_OPS_PER_STEP",
    "ETLC_MAX_PLANNER_FAILURES",
    "ETLC_STARTUP_WAIT_MS",
    "ETLC_PROGRESS_INTERVAL_MS",
    "ETLC_REBALANCE_COOLDOWN_MS",
    "ETLC_BALANCE_ON_REMAINING_WORK",
    "ETLC_PIN_REMAINING_PPM",
    "ETLC_DAMPING_PPM_OF_MEAN",
    "ETLC_DAMPING_WEIGHT",
    "ETLC_BALANCE_BY_PACE",
    "ETLC_PACE_GAIN_PPM",
    "ETLC_DYNAMIC_SPLITTING",
    "ETLC_MIN_RESIDUAL_WEIGHT",
    "ETLC_MAX_CHILDREN_PER_SPLIT",
    "ETLC_MAX_DYNAMIC_SPLITS",
    "ETLC_SPLIT_REQUEST_TIMEOUT_MS",
    "NATS_URL",
    "ETLC_JOB",
    "ETLC_BUCKET",
    "ETLC_NATS_REPLICAS",
    "ETLC_NATS_USER",
    "ETLC_NATS_PASSWORD",
    "ETLC_NATS_TOKEN",
    "ETLC_NATS_CREDS",
    "ETLC_NATS_TLS",
    "ETLC_NATS_TLS_CA",
    "ETLC_NATS_TLS_CERT",
    "ETLC_NATS_TLS_KEY",
    "ETLC_NATS_CONNECT_TIMEOUT_MS",
    "ETLC_NATS_OP_TIMEOUT_MS",
};

void warn_unknown_etlc_variables() {
  const auto& known = kKnownVariables;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    std::string_view entry(*p);
    if (entry.substr(0, 5) != "ETLC_") continue;
    const std::string_view name = entry.substr(0, entry.find('='));
    const bool listed = std::find(known.begin(), known.end(), name) != known.end() ||
                        std::find(std::begin(kScriptVariables), std::end(kScriptVariables), name) !=
                            std::end(kScriptVariables);
    if (!listed) {
      log().warn("ignoring environment variable {}: not a setting of this library (a typo?)", name);
    }
  }
}

}  // namespace etlc::env
