// See nats_redact.hpp.
#include "store/nats/nats_redact.hpp"

#include <algorithm>

namespace etlc::nats_detail {

std::string redact_url(std::string_view url) {
  std::size_t scheme = url.find("://");
  std::size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  std::size_t end = url.find_first_of("/?#", start);
  std::string_view authority =
      url.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  std::size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  std::string out(url.substr(0, start));
  out += "***";
  out += url.substr(start + at);
  return out;
}

std::optional<std::pair<std::string, bool>> url_user(std::string_view url) {
  std::size_t scheme = url.find("://");
  std::size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  std::size_t end = url.find_first_of("/?#", start);
  std::string_view authority =
      url.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  std::size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view info = authority.substr(0, at);
  std::size_t colon = info.find(':');
  if (colon == std::string_view::npos) return std::make_pair(std::string(), false);
  return std::make_pair(std::string(info.substr(0, colon)), true);
}

Redactor::Redactor(std::vector<std::string> secrets) : secrets_(std::move(secrets)) {
  secrets_.erase(std::remove_if(secrets_.begin(), secrets_.end(),
                                [](const std::string& s) { return s.empty(); }),
                 secrets_.end());
  // Longest first, so a secret that contains another is replaced whole.
  std::sort(secrets_.begin(), secrets_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string Redactor::apply(std::string_view text) const {
  std::string out(text);
  for (const std::string& secret : secrets_) {
    for (std::size_t pos = out.find(secret); pos != std::string::npos;
         pos = out.find(secret, pos + 3)) {
      out.replace(pos, secret.size(), "***");
    }
  }
  // URL credentials ("scheme://user:pass@host") anywhere in the text.
  for (std::size_t pos = out.find("://"); pos != std::string::npos;
       pos = out.find("://", pos + 3)) {
    std::size_t start = pos + 3;
    std::size_t end = out.find_first_of(" \t\r\n/?#'\",;", start);
    if (end == std::string::npos) end = out.size();
    std::size_t at = out.rfind('@', end == 0 ? 0 : end - 1);
    if (at != std::string::npos && at >= start && at < end) {
      out.replace(start, at - start, "***");
    }
  }
  return out;
}

}  // namespace etlc::nats_detail
