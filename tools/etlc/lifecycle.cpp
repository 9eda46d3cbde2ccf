// The lifecycle commands: pause, resume, delete, reset, seek, repair (docs/operations.md). Each
// refuses what the protocol cannot do safely (exit 4, nothing written), writes one audit line, and
// prints text or one JSON document (etlc.pause.v1, etlc.resume.v1, etlc.delete.v1, etlc.reset.v1,
// etlc.seek.v1).
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "audit.hpp"
#include "cli.hpp"
#include "etlc/admin.hpp"
#include "output.hpp"

namespace etlc::cli {

namespace {

using Json = nlohmann::ordered_json;
constexpr auto kJsonErrors = Json::error_handler_t::replace;

void print_json(const Json& j) {
  std::cout << j.dump(2, ' ', false, kJsonErrors) << '\n';
}

// A value for the audit line: JSON-quoted, so spaces and control bytes cannot forge fields.
std::string audit_value(std::string_view s) {
  return Json(std::string(s)).dump(-1, ' ', true, kJsonErrors);
}

template <typename Fn>
auto guarded(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const StoreError& e) {
    throw CliError(kExitStoreUnreachable, fmt::format("store unreachable: {}", e.what()));
  } catch (const ConfigError& e) {
    throw CliError(kExitUsage, e.what());
  } catch (const CliError&) {
    throw;
  } catch (const Error& e) {
    throw CliError(kExitRefused, e.what());
  }
}

// Opens the store and checks the job exists (exit 1 otherwise).
struct Job {
  std::shared_ptr<NatsStore> store;
  std::unique_ptr<JobAdmin> admin;
};
Job open_job(const ConnectOptions& c) {
  Job j;
  j.store = open_store(c);
  j.admin = std::make_unique<JobAdmin>(*j.store);
  if (!guarded([&] { return j.admin->job_exists(); })) {
    throw CliError(kExitJobNotFound,
                   fmt::format("job '{}' not found: bucket '{}' holds no plan, leader or member",
                               c.job, bucket_of(c)));
  }
  return j;
}

Json names(const std::vector<std::string>& v) {
  Json a = Json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

std::string list_text(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + safe_text(s);
  return out;
}

std::string sessions_text(const SessionCheck& s) {
  std::string out;
  if (!s.live.empty()) out += fmt::format("  live sessions: {}\n", list_text(s.live));
  if (!s.silent.empty()) {
    out += fmt::format("  silent sessions (no renewal within their lease: gone): {}\n",
                       list_text(s.silent));
  }
  if (!s.departed.empty())
    out += fmt::format("  departed while watched: {}\n", list_text(s.departed));
  return out;
}

Json sessions_json(const SessionCheck& s) {
  return Json{{"live", names(s.live)},
              {"silent", names(s.silent)},
              {"departed", names(s.departed)},
              {"watched_ms", s.watched.count()}};
}

void require_yes(const LifecycleArgs& a, std::string_view what) {
  if (!a.yes) throw CliError(kExitUsage, fmt::format("{}: add --yes to confirm", what));
}

}  // namespace

int run_pause(const ConnectOptions& c, const LifecycleArgs& a, bool json) {
  Job j = open_job(c);
  const std::string by = operator_identity();
  const PauseResult r = guarded([&] { return j.admin->pause(a.reason, by, unix_now_ms()); });
  audit(c.job, bucket_of(c), "pause", to_string(r.outcome), "reason=" + audit_value(a.reason));
  if (json) {
    print_json(Json{{"schema", "etlc.pause.v1"},
                    {"job", c.job},
                    {"outcome", to_string(r.outcome)},
                    {"reason", r.pause.reason},
                    {"by", r.pause.by},
                    {"since_ms", r.pause.since_ms}});
  } else {
    std::cout << (r.outcome == PauseOutcome::paused
                      ? fmt::format("paused {}: the leader assigns nothing; members drain and "
                                    "release what they hold (watch with `etlc status`)\n",
                                    c.job)
                      : fmt::format("{} was already paused by {} ({})\n", safe_text(c.job),
                                    safe_text(r.pause.by),
                                    r.pause.reason.empty() ? "no reason given"
                                                           : safe_text(r.pause.reason)));
  }
  return kExitOk;
}

int run_resume(const ConnectOptions& c, bool json) {
  Job j = open_job(c);
  const ResumeResult r = guarded([&] { return j.admin->resume(); });
  audit(c.job, bucket_of(c), "resume", to_string(r.outcome),
        r.plan_failure_cleared ? "cleared=planner_failure" : "");
  if (json) {
    print_json(Json{{"schema", "etlc.resume.v1"},
                    {"job", c.job},
                    {"outcome", to_string(r.outcome)},
                    {"plan_failure_cleared", r.plan_failure_cleared},
                    {"plan_failure", r.plan_failure}});
  } else {
    std::cout << (r.outcome == ResumeOutcome::resumed
                      ? fmt::format("resumed {}: work continues from the committed progress\n",
                                    c.job)
                      : fmt::format("{} was not paused\n", c.job));
    if (r.plan_failure_cleared) {
      std::cout << fmt::format("cleared the failed plan ({}): the leader plans again\n",
                               safe_text(r.plan_failure));
    }
  }
  return kExitOk;
}

int run_delete(const ConnectOptions& c, const LifecycleArgs& a, bool json) {
  require_yes(a, fmt::format("delete removes job '{}' and all its records", c.job));
  Job j = open_job(c);
  const SessionCheck s =
      guarded([&] { return j.admin->check_sessions(std::chrono::milliseconds(a.wait_ms)); });
  const bool refused = s.any_live() && !a.force;
  if (!refused)
    guarded([&] {
      j.store->delete_bucket();
      return 0;
    });
  const char* outcome = refused ? "refused_live" : "deleted";
  audit(c.job, bucket_of(c), "delete", outcome,
        fmt::format("force={} live={}", a.force, audit_value(list_text(s.live))));
  if (json) {
    print_json(Json{{"schema", "etlc.delete.v1"},
                    {"job", c.job},
                    {"bucket", bucket_of(c)},
                    {"outcome", outcome},
                    {"sessions", sessions_json(s)}});
  } else if (refused) {
    std::cout << fmt::format(
        "refused: {} has live members ({}); stop them first, or add --force\n{}", c.job,
        list_text(s.live), sessions_text(s));
  } else {
    std::cout << fmt::format("deleted {} (bucket {})\n{}", c.job, bucket_of(c), sessions_text(s));
  }
  return refused ? kExitRefused : kExitOk;
}

int run_reset(const ConnectOptions& c, const LifecycleArgs& a, bool json) {
  require_yes(a, fmt::format("reset forgets all progress of job '{}'", c.job));
  Job j = open_job(c);
  const ResetResult r =
      guarded([&] { return j.admin->reset(std::chrono::milliseconds(a.wait_ms)); });
  audit(c.job, bucket_of(c), "reset", to_string(r.outcome),
        fmt::format("splits_forgotten={} term_floor={}", r.splits_forgotten, r.term_floor));
  if (json) {
    print_json(Json{{"schema", "etlc.reset.v1"},
                    {"job", c.job},
                    {"outcome", to_string(r.outcome)},
                    {"term_floor", r.term_floor},
                    {"deleted_records", r.deleted_keys},
                    {"splits_forgotten", r.splits_forgotten},
                    {"sessions", sessions_json(r.sessions)}});
  } else if (r.outcome == ResetOutcome::refused_live) {
    std::cout << fmt::format("refused: {} has live members ({}); stop every member first\n{}",
                             c.job, list_text(r.sessions.live), sessions_text(r.sessions));
  } else {
    std::cout << fmt::format(
        "reset {}: {} splits forgotten ({} records deleted); the next leader re-plans from "
        "scratch at a term above {}\n{}",
        c.job, r.splits_forgotten, r.deleted_keys, r.term_floor, sessions_text(r.sessions));
  }
  return r.outcome == ResetOutcome::reset ? kExitOk : kExitRefused;
}

int run_seek(const ConnectOptions& c, const LifecycleArgs& a, bool json) {
  Job j = open_job(c);
  const SeekResult r = guarded([&] {
    return j.admin->seek(a.split, SplitProgress{a.watermark, a.state},
                         std::chrono::milliseconds(a.wait_ms));
  });
  audit(c.job, bucket_of(c), "seek", to_string(r.outcome),
        fmt::format("split={} watermark={}->{}", audit_value(a.split), r.watermark_before,
                    r.watermark_after));
  auto state = [](const std::optional<SplitState>& s) {
    return s ? Json(std::string(to_string(*s))) : Json(nullptr);
  };
  if (json) {
    print_json(Json{{"schema", "etlc.seek.v1"},
                    {"job", c.job},
                    {"split", r.split},
                    {"outcome", to_string(r.outcome)},
                    {"status_before", state(r.status_before)},
                    {"status_after", state(r.status_after)},
                    {"watermark_before", r.watermark_before},
                    {"watermark_after", r.watermark_after},
                    {"epoch_after", r.epoch_after},
                    {"holder", r.holder.empty() ? Json(nullptr) : Json(r.holder)},
                    {"detail", r.detail}});
  } else if (r.outcome == SeekOutcome::moved) {
    std::cout << fmt::format("moved {} from watermark {} to {} (epoch {}{})\n", safe_text(r.split),
                             r.watermark_before, r.watermark_after, r.epoch_after,
                             r.status_before == SplitState::completed
                                 ? "; it was completed and is runnable again"
                             : r.status_after == SplitState::quarantined
                                 ? "; still quarantined: `etlc requeue` returns it to the pool"
                                 : "");
  } else {
    std::cout << fmt::format("refused {}: {}: {}\n", safe_text(r.split), to_string(r.outcome),
                             safe_text(r.detail));
  }
  return r.outcome == SeekOutcome::moved ? kExitOk : kExitRefused;
}

int run_repair(const ConnectOptions& c, const LifecycleArgs& a, bool json) {
  Job j = open_job(c);
  const RepairResult r =
      guarded([&] { return j.admin->repair(a.split, std::chrono::milliseconds(a.wait_ms)); });
  audit(c.job, bucket_of(c), "repair", to_string(r.outcome),
        fmt::format("split={} epoch={}", audit_value(a.split), r.epoch_after));
  if (json) {
    print_json(Json{{"schema", "etlc.repair.v1"},
                    {"job", c.job},
                    {"split", r.split},
                    {"outcome", to_string(r.outcome)},
                    {"epoch_after", r.epoch_after},
                    {"holder", r.holder.empty() ? Json(nullptr) : Json(r.holder)},
                    {"detail", r.detail}});
  } else if (r.outcome == RepairOutcome::rebuilt) {
    std::cout << fmt::format(
        "rebuilt {} from its spec at epoch {} ({}); it replays from its start\n",
        safe_text(r.split), r.epoch_after, safe_text(r.detail));
  } else {
    std::cout << fmt::format("{} {}: {}: {}\n",
                             r.outcome == RepairOutcome::readable ? "nothing to do for" : "refused",
                             safe_text(r.split), to_string(r.outcome), safe_text(r.detail));
  }
  return r.outcome == RepairOutcome::rebuilt || r.outcome == RepairOutcome::readable ? kExitOk
                                                                                     : kExitRefused;
}

}  // namespace etlc::cli
