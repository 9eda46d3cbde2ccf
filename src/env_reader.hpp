// EnvReader: typed reads of environment variables for etlc/env_config.hpp, remembering which
// variable set which field, so that a validation error can name the variables behind it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/env_config.hpp"
#include "etlc/errors.hpp"

namespace etlc::env {

// The process environment (getenv).
EnvLookup process_lookup();

class EnvReader {
 public:
  explicit EnvReader(const EnvLookup& lookup) : lookup_(lookup) {}

  // The value of `var` if it is set and non-empty; remembers that it set `field`. A secret's
  // value is never repeated in a message.
  std::optional<std::string> text(std::string_view var, std::string_view field,
                                  bool secret = false);
  // Same, shown in messages as redact(value) (a URL with its credentials replaced).
  std::optional<std::string> text_redacted(std::string_view var, std::string_view field,
                                           std::string (*redact)(std::string_view));
  // Decimal integers (an optional '-' for int64). ConfigError naming `var` otherwise.
  std::optional<std::int64_t> int64(std::string_view var, std::string_view field);
  std::optional<std::uint32_t> u32(std::string_view var, std::string_view field);
  std::optional<std::uint64_t> u64(std::string_view var, std::string_view field);
  std::optional<bool> boolean(std::string_view var, std::string_view field);

  // Remembers that `source` (a variable, or "the host name") set `field` without reading it.
  void note(std::string_view source, std::string_view field, std::string shown);

  // Rethrows a validation error with the variables whose field the message names:
  // "<message> (set by ETLC_LEASE_MS=100, ETLC_OP_TIMEOUT_MS=50)".
  [[noreturn]] void rethrow(const ConfigError& e) const;

 private:
  struct Used {
    std::string var;
    std::string field;
    std::string shown;  // "ETLC_LEASE_MS=100", or "ETLC_NATS_PASSWORD=***"
  };
  [[noreturn]] void bad(std::string_view var, const std::string& value, std::string_view what,
                        bool secret = false) const;

  const EnvLookup& lookup_;
  std::vector<Used> used_;
};

// Identity and knobs onto `c`, not validated (env_config.cpp).
void read_coordinator(EnvReader& r, CoordinatorConfig& c);
// c.validate(), its error rethrown naming the variables behind it.
void validate_coordinator(const EnvReader& r, const CoordinatorConfig& c);

// Every variable etlc/env_config.hpp documents.
extern const std::vector<std::string_view> kKnownVariables;

// Logs a warning for each variable of the process environment that starts with "ETLC_" and is
// neither documented nor one of the build and test scripts' own variables.
void warn_unknown_etlc_variables();

}  // namespace etlc::env
