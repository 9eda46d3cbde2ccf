// Errors and the key/prefix/value rules every backend shares (see include/etlc/store.hpp).
#include <fmt/format.h>

#include <set>

#include "etlc/store.hpp"

namespace etlc {

std::string_view to_string(StoreErrc code) noexcept {
  switch (code) {
    case StoreErrc::unavailable:
      return "unavailable";
    case StoreErrc::unknown_outcome:
      return "unknown_outcome";
    case StoreErrc::watch_broken:
      return "watch_broken";
    case StoreErrc::invalid_argument:
      return "invalid_argument";
    case StoreErrc::incompatible:
      return "incompatible";
    case StoreErrc::closed:
      return "closed";
    case StoreErrc::not_found:
      return "not_found";
  }
  return "unknown";
}

StoreError::StoreError(StoreErrc code, const std::string& message)
    : Error(fmt::format("store {}: {}", to_string(code), message)), code_(code) {}

bool StoreError::retryable() const noexcept {
  return code_ == StoreErrc::unavailable || code_ == StoreErrc::unknown_outcome ||
         code_ == StoreErrc::watch_broken;
}

namespace {

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '=' || c == '/';
}

// Shared by keys and prefixes: tokens of key_char separated by single dots.
void check_tokens(std::string_view s, std::string_view what) {
  bool token_empty = true;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (token_empty) {
        throw StoreError(StoreErrc::invalid_argument,
                         fmt::format("{} has an empty token at byte {}", what, i));
      }
      token_empty = true;
    } else if (!key_char(c)) {
      throw StoreError(StoreErrc::invalid_argument,
                       fmt::format("{} has byte 0x{:02X} at {} outside [A-Za-z0-9_=/.-]", what,
                                   static_cast<unsigned char>(c), i));
    } else {
      token_empty = false;
    }
  }
}

}  // namespace

void validate_key(std::string_view key) {
  if (key.empty()) throw StoreError(StoreErrc::invalid_argument, "key is empty");
  if (key.size() > kMaxKeyBytes) {
    throw StoreError(
        StoreErrc::invalid_argument,
        fmt::format("key of {} bytes exceeds kMaxKeyBytes ({})", key.size(), kMaxKeyBytes));
  }
  check_tokens(key, "key");
  if (key.back() == '.') throw StoreError(StoreErrc::invalid_argument, "key ends with '.'");
}

void validate_prefix(std::string_view prefix) {
  if (prefix.empty()) return;
  if (prefix.back() != '.') {
    throw StoreError(StoreErrc::invalid_argument,
                     fmt::format("prefix '{}' must be empty or end with '.'", prefix));
  }
  if (prefix.size() > kMaxKeyBytes) {
    throw StoreError(StoreErrc::invalid_argument, "prefix exceeds kMaxKeyBytes");
  }
  // Without its trailing '.', a prefix must be a valid key ("a.." has an empty last token).
  try {
    validate_key(prefix.substr(0, prefix.size() - 1));
  } catch (const StoreError& e) {
    throw StoreError(StoreErrc::invalid_argument,
                     fmt::format("prefix '{}' is not a key followed by '.': {}", prefix, e.what()));
  }
}

void validate_value(std::string_view key, std::string_view value) {
  if (value.size() > kMaxValueBytes) {
    throw StoreError(StoreErrc::invalid_argument,
                     fmt::format("value of {} bytes for key '{}' exceeds kMaxValueBytes ({})",
                                 value.size(), key, kMaxValueBytes));
  }
}

void validate_watch_keys(std::span<const std::string> keys) {
  if (keys.empty() || keys.size() > kMaxWatchKeys) {
    throw StoreError(StoreErrc::invalid_argument,
                     fmt::format("a key watch follows 1..kMaxWatchKeys ({}) keys, not {}",
                                 kMaxWatchKeys, keys.size()));
  }
  std::set<std::string_view> seen;
  for (const std::string& key : keys) {
    validate_key(key);
    if (!seen.insert(key).second) {
      throw StoreError(StoreErrc::invalid_argument,
                       fmt::format("key '{}' appears twice in one key watch", key));
    }
  }
}

void validate_create_batch(std::span<const CreateRequest> requests) {
  if (requests.size() > kMaxBatchRequests) {
    throw StoreError(StoreErrc::invalid_argument,
                     fmt::format("a batch of {} creates exceeds kMaxBatchRequests ({})",
                                 requests.size(), kMaxBatchRequests));
  }
  for (const CreateRequest& r : requests) {
    validate_key(r.key);
    validate_value(r.key, r.value);
  }
}

// The default batch: one create after the other. Store errors of one request become its
// outcome; closed and invalid_argument end the batch as they would end a single call.
std::vector<CreateOutcome> KvStore::create_many(std::span<const CreateRequest> requests) {
  validate_create_batch(requests);
  std::vector<CreateOutcome> out(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      out[i].result = create(requests[i].key, requests[i].value);
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unavailable && e.code() != StoreErrc::unknown_outcome) throw;
      out[i].error = e.code();
    }
  }
  return out;
}

}  // namespace etlc
