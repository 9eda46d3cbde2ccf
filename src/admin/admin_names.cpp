// Names of the operator API's enums (the words `etlc` prints and its JSON carries: stable).
#include "etlc/admin.hpp"

namespace etlc {

std::string_view to_string(SplitState s) noexcept {
  switch (s) {
    case SplitState::runnable:
      return "runnable";
    case SplitState::completed:
      return "completed";
    case SplitState::quarantined:
      return "quarantined";
    case SplitState::pending:
      return "pending";
  }
  return "unknown";
}

std::optional<SplitState> parse_split_state(std::string_view text) noexcept {
  for (SplitState s : {SplitState::runnable, SplitState::completed, SplitState::quarantined,
                       SplitState::pending}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

std::string_view to_string(PlanVerdict v) noexcept {
  switch (v) {
    case PlanVerdict::running:
      return "running";
    case PlanVerdict::complete:
      return "complete";
    case PlanVerdict::stalled:
      return "stalled";
    case PlanVerdict::failed:
      return "failed";
  }
  return "unknown";
}

std::string_view to_string(ProgressSource s) noexcept {
  return s == ProgressSource::leader_record ? "job.progress" : "split_records";
}

std::string_view to_string(ProgressRecordState s) noexcept {
  switch (s) {
    case ProgressRecordState::ok:
      return "ok";
    case ProgressRecordState::absent:
      return "absent";
    case ProgressRecordState::unreadable:
      return "unreadable";
    case ProgressRecordState::stale:
      return "stale";
  }
  return "unknown";
}

std::string_view finality_name(PlanFinality f) noexcept {
  return f == PlanFinality::final ? "final" : "open";
}

std::string_view to_string(RequeueOutcome o) noexcept {
  switch (o) {
    case RequeueOutcome::requeued:
      return "requeued";
    case RequeueOutcome::not_quarantined:
      return "not_quarantined";
    case RequeueOutcome::not_found:
      return "not_found";
    case RequeueOutcome::unreadable:
      return "unreadable";
    case RequeueOutcome::conflict:
      return "conflict";
    case RequeueOutcome::failed:
      return "failed";
    case RequeueOutcome::skipped:
      return "skipped";
  }
  return "unknown";
}

std::string_view to_string(CordonOutcome o) noexcept {
  switch (o) {
    case CordonOutcome::cordoned:
      return "cordoned";
    case CordonOutcome::updated:
      return "updated";
    case CordonOutcome::unchanged:
      return "unchanged";
  }
  return "unknown";
}

std::string_view to_string(UncordonOutcome o) noexcept {
  switch (o) {
    case UncordonOutcome::uncordoned:
      return "uncordoned";
    case UncordonOutcome::not_cordoned:
      return "not_cordoned";
  }
  return "unknown";
}

std::string_view to_string(PauseOutcome o) noexcept {
  return o == PauseOutcome::paused ? "paused" : "already_paused";
}

std::string_view to_string(ResumeOutcome o) noexcept {
  return o == ResumeOutcome::resumed ? "resumed" : "not_paused";
}

std::string_view to_string(ResetOutcome o) noexcept {
  return o == ResetOutcome::reset ? "reset" : "refused_live";
}

std::string_view to_string(SeekOutcome o) noexcept {
  switch (o) {
    case SeekOutcome::moved:
      return "moved";
    case SeekOutcome::held:
      return "held";
    case SeekOutcome::not_found:
      return "not_found";
    case SeekOutcome::unreadable:
      return "unreadable";
    case SeekOutcome::conflict:
      return "conflict";
  }
  return "unknown";
}

std::string_view to_string(RepairOutcome o) noexcept {
  switch (o) {
    case RepairOutcome::rebuilt:
      return "rebuilt";
    case RepairOutcome::readable:
      return "readable";
    case RepairOutcome::held:
      return "held";
    case RepairOutcome::no_spec:
      return "no_spec";
    case RepairOutcome::conflict:
      return "conflict";
  }
  return "unknown";
}

}  // namespace etlc
