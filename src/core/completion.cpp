#include "core/completion.hpp"

#include <fmt/format.h>

namespace etlc::core {

Verdict completion_verdict(Finality finality, std::uint64_t planned, std::uint64_t completed,
                           std::uint64_t quarantined) {
  // completed + quarantined > planned, without computing the (possibly overflowing) sum.
  if (completed > planned || quarantined > planned - completed) {
    throw ConfigError(fmt::format(
        "completion_verdict: inconsistent tallies: {} completed + {} quarantined exceed {} planned",
        completed, quarantined, planned));
  }
  if (finality == Finality::open) return Verdict::running;
  if (completed == planned) return Verdict::complete;
  if (quarantined == planned - completed) return Verdict::stalled;  // quarantined > 0 here
  return Verdict::running;
}

}  // namespace etlc::core
