#include "audit.hpp"

#include <fmt/format.h>
#include <pwd.h>
#include <syslog.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>

namespace etlc::cli {

std::string operator_identity() {
  std::string user;
  if (const char* u = std::getenv("USER"); u != nullptr && *u != '\0') user = u;
  if (user.empty()) {
    if (const passwd* pw = getpwuid(getuid()); pw != nullptr) user = pw->pw_name;
  }
  if (user.empty()) user = fmt::format("uid{}", getuid());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return host[0] != '\0' ? user + "@" + host : user;
}

std::uint64_t unix_now_ms() {
  const auto since = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(since).count());
}

void audit(std::string_view job, std::string_view bucket, std::string_view action,
           std::string_view outcome, std::string_view details) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  const std::string line =
      fmt::format("{} {} job={} bucket={} action={} outcome={}{}{}", when, operator_identity(), job,
                  bucket, action, outcome, details.empty() ? "" : " ", details);
  std::cerr << "etlc: audit: " << line << '\n';
  openlog("etlc", LOG_PID, LOG_USER);
  syslog(LOG_NOTICE, "audit: %s", line.c_str());
  closelog();
}

}  // namespace etlc::cli
