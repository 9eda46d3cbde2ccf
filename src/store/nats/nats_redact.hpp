// Keeping secrets (passwords, tokens, URL credentials) out of every message the store produces.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace etlc::nats_detail {

// `url` with any "userinfo@" part after the scheme replaced by "***@".
std::string redact_url(std::string_view url);

// The user a URL's "userinfo@" names and whether a password follows it ("user:pass@"); nullopt
// when the URL has no userinfo. A lone "secret@" is a token: the pair is then {"", false}.
std::optional<std::pair<std::string, bool>> url_user(std::string_view url);

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
