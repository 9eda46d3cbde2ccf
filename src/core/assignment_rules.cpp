#include "core/assignment_rules.hpp"

#include <chrono>

#include "core/repair_rules.hpp"

namespace etlc::core {

std::uint32_t lane_budget(const MemberRecord& session, std::string_view job_fingerprint,
                          bool cordoned) {
  if (session.fingerprint != job_fingerprint || cordoned) return 0;
  // The lease does not matter for lanes; any positive lease serves bound_peer.
  return bound_peer(session, std::chrono::milliseconds(1)).lanes;
}

}  // namespace etlc::core
