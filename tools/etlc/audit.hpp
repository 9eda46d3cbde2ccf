// The audit trail of the lifecycle commands: one line per command on stderr and in syslog
// (facility user, ident "etlc"; journald on systemd hosts), saying who did what to which job and
// how it ended:
//   etlc: audit: 2024-05-01T12:00:00Z alice@ops-host job=orders bucket=etlc_orders action=pause
//   outcome=paused reason="disk upgrade"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace etlc::cli {

// "user@host" of whoever runs the tool ($USER, else the login name, else the uid).
std::string operator_identity();
// Milliseconds since the Unix epoch (the operator's clock; recorded, never acted on).
std::uint64_t unix_now_ms();

// Writes the audit line. `details` is appended as is ("reason=... split=...").
void audit(std::string_view job, std::string_view bucket, std::string_view action,
           std::string_view outcome, std::string_view details);

}  // namespace etlc::cli
