// Job-level controls (issue 19): the operator's pause and the bounded planner-failure policy.
//
// Pause. `etlc pause` creates job.pause; every member sees it on its job.* watch. While it exists
// the leader publishes empty assignments (publish.cpp), so workers revoke, drain and release what
// they hold through the ordinary path (no attempt consumed, nothing replayed). `etlc resume`
// deletes it; the leader recomputes and work continues from the committed progress. An
// unreadable pause record counts as absent, like every unreadable record.
//
// Planner failures. The leader counts consecutive failures of the planner (it threw, or returned
// an invalid plan). At CoordinatorConfig::max_planner_failures it writes the plan record's
// `failed` verdict with the last error as its message, and stops planning; every member then
// reports Stalled{message} (reconcile.cpp). The verdict is sticky across leaders until an
// operator clears it (`etlc resume`), after which the count starts again from zero.
#include <fmt/format.h>
#include "log.hpp"

#include "core/keys.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

namespace {
// A planner's message is user text: bounded and made valid UTF-8 before it enters a record.
constexpr std::size_t kMaxPlannerMessageBytes = 1024;

std::string printable_message(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (out.size() >= kMaxPlannerMessageBytes) {
      out += "...";
      break;
    }
    const auto b = static_cast<unsigned char>(c);
    out.push_back(b < 0x80 && b >= 0x20 ? c : '?');  // ASCII only: always valid UTF-8
  }
  return out;
}
}  // namespace

void Member::on_pause_event(const WatchEvent& e) {
  std::optional<core::PauseRecord> rec;
  if (e.kind == WatchEvent::Kind::put) {
    rec = core::decode_pause(e.key, e.value);  // RecordError: logged by drain_watches, ignored
  }
  const bool now_paused = rec.has_value();
  if (now_paused == paused_) return;
  paused_ = now_paused;
  assignment_dirty_ = true;
  if (!leader_) return;  // the leader speaks for the job; workers just follow their records
  if (paused_) {
    log().warn("etlc: {}: job paused by {} ({}): assigning nothing; members drain and release",
               instance_, rec->by.empty() ? "an operator" : rec->by,
               rec->reason.empty() ? "no reason given" : rec->reason);
  } else {
    log().warn("etlc: {}: job resumed: assigning from the committed progress", instance_);
  }
}

bool Member::give_up_on_planner(const std::string& error, TimePoint now) {
  if (++planner_failures_ < config_.max_planner_failures || !plan_view_) return false;
  core::PlanRecord next = plan_view_->first;
  next.term = term_;
  next.verdict = core::Verdict::failed;
  next.message = fmt::format(
      "the planner failed {} times in a row (max_planner_failures); last error: {}. Fix the "
      "cause, then `etlc resume` lets the leader plan again",
      planner_failures_, printable_message(error));
  log().error("etlc: {}: giving up: {}", instance_, *next.message);
  if (!write_plan(next)) next_plan_at_ = now + plan_backoff_;  // a later failure writes it again
  return true;
}

}  // namespace etlc::runtime
