// Keeping secrets (passwords, tokens, URL credentials) out of every message the store produces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace etlc::nats_detail {

// `url` with any "userinfo@" part after the scheme replaced by "***@".
std::string redact_url(std::string_view url);

// Replaces every occurrence of each registered secret, and the credentials of every URL, in a
// text (for example an error string from nats.c) by "***". Immutable after construction, so it
// may be shared between threads.
class Redactor {
 public:
  Redactor() = default;
  explicit Redactor(std::vector<std::string> secrets);
  std::string apply(std::string_view text) const;

 private:
  std::vector<std::string> secrets_;
};

}  // namespace etlc::nats_detail
