// Error types thrown by etl-coordination.
//
// Losing a race (a key exists, a revision moved, a commit is fenced) is never an exception: it is
// an outcome value. Exceptions are for what the caller must handle differently: a store that
// cannot be reached (retry), a write whose outcome is unknown (re-read), invalid input or
// configuration (fix the caller), and records in the store that cannot be read (fail closed).
#pragma once

#include <stdexcept>
#include <string>

namespace etlc {

// Base of every exception the library throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Invalid configuration or arguments. The message names the rule that was broken.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A precondition of an API call was violated by the caller (for example a progress watermark
// that goes backwards). Not retryable: the caller has a bug.
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace etlc
