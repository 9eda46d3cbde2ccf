// The JSON shapes (see output.hpp and docs/operations.md). Field order is fixed (ordered_json)
// so output diffs cleanly; consumers must not rely on order, only on names.
#include "output.hpp"

namespace etlc::cli {

namespace {
using Json = nlohmann::ordered_json;

template <typename T>
Json or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json problems(const std::vector<RecordProblem>& garbage) {
  Json a = Json::array();
  for (const auto& g : garbage) a.push_back(Json{{"key", g.key}, {"error", g.error}});
  return a;
}
Json progress_json(const WeightProgress& p) {
  const auto eta = p.eta();
  return Json{{"source", to_string(p.source)},
              {"record", to_string(p.record)},
              {"term", p.record == ProgressRecordState::ok || p.record == ProgressRecordState::stale
                           ? Json(p.term)
                           : Json(nullptr)},
              {"planned", p.planned},
              {"done", p.done},
              {"remaining", p.remaining},
              {"percent_done", p.fraction_done() ? Json(*p.fraction_done() * 100) : Json(nullptr)},
              {"rate_per_s", or_null(p.rate_per_s)},
              {"eta_ms", eta ? Json(eta->count()) : Json(nullptr)}};
}
}  // namespace

nlohmann::ordered_json status_json(const std::string& job, const JobStatus& st) {
  Json j;
  j["schema"] = "etlc.status.v1";
  j["job"] = job;
  j["found"] = st.found;
  if (st.leader) {
    const LeaderStatus& l = *st.leader;
    j["leader"] = Json{{"instance", l.instance},
                       {"nonce", l.nonce},
                       {"term", l.term},
                       {"has_session", l.has_session},
                       {"observed_for_ms", l.observed_for.count()}};
  } else {
    j["leader"] = nullptr;
  }
  if (st.standby) {
    j["standby"] = Json{{"instance", st.standby->instance},
                        {"nonce", st.standby->nonce},
                        {"has_session", st.standby->has_session}};
  } else {
    j["standby"] = nullptr;
  }
  if (st.plan) {
    const PlanStatus& p = *st.plan;
    j["plan"] = Json{{"fingerprint", p.fingerprint},
                     {"term", p.term},
                     {"finality", finality_name(p.finality)},
                     {"planned", p.planned},
                     {"planned_splits", p.planned_splits},
                     {"completed", p.completed},
                     {"quarantined", p.quarantined},
                     {"verdict", to_string(p.verdict)},
                     {"message", p.message.empty() ? Json(nullptr) : Json(p.message)}};
  } else {
    j["plan"] = nullptr;
  }
  j["paused"] = st.paused ? Json{{"reason", st.paused->reason},
                                 {"by", st.paused->by},
                                 {"since_ms", st.paused->since_ms}}
                          : Json(nullptr);
  const SplitCounts& c = st.splits;
  j["splits"] =
      Json{{"total", c.total},         {"runnable", c.runnable},        {"owned", c.owned},
           {"completed", c.completed}, {"quarantined", c.quarantined},  {"pending", c.pending},
           {"residuals", c.residuals}, {"total_weight", c.total_weight}};
  j["progress"] = progress_json(st.progress);
  j["unowned_remaining"] = st.unowned_remaining;
  Json members = Json::array();
  for (const MemberStatus& m : st.members) {
    members.push_back(Json{
        {"instance", m.instance},
        {"has_session", m.has_session},
        {"nonce", m.nonce},
        {"fingerprint_matches", m.fingerprint_matches},
        {"max_in_flight", m.max_in_flight},
        {"lane_budget", m.lane_budget},
        {"cordoned", m.cordoned},
        {"cordon_reason", m.cordon_reason},
        {"held", m.held},
        {"assigned", or_null(m.assigned)},
        {"assignment_term", m.assignment_term},
        {"draining", m.draining},
        {"weight_held", m.weight_held},
        {"weight_share", m.weight_share},
        {"weight_remaining", m.weight_remaining},
        {"renewals", m.renewals},
        {"lease_ms", m.lease.count()},
        {"session_age_estimate_ms", m.session_age_estimate.count()},
        {"observed_for_ms", m.observed_for.count()},
        {"unchanged_for_ms", m.unchanged_for ? Json(m.unchanged_for->count()) : Json(nullptr)},
    });
  }
  j["members"] = std::move(members);
  Json moves = Json::array();
  for (const SplitMove& mv : st.moves) {
    moves.push_back(Json{{"split", mv.split}, {"from", mv.from}, {"to", mv.to}});
  }
  j["moves"] = std::move(moves);
  j["moves_total"] = st.moves_total;
  j["balance"] = Json{{"members", st.balance.members},
                      {"max_load", st.balance.max_load},
                      {"mean_load", st.balance.mean_load},
                      {"max_over_mean", st.balance.max_over_mean}};
  j["garbage"] = problems(st.garbage);
  j["garbage_total"] = st.garbage_total;
  return j;
}

nlohmann::ordered_json splits_json(const std::string& job, const SplitListing& l) {
  Json rows = Json::array();
  for (const SplitRow& r : l.rows) {
    rows.push_back(Json{{"id", r.id},
                        {"status", to_string(r.status)},
                        {"owner", or_null(r.owner)},
                        {"lease_owner", or_null(r.lease_owner)},
                        {"epoch", r.epoch},
                        {"attempts", r.attempts},
                        {"weight", r.weight},
                        {"watermark", r.watermark},
                        {"last_error", or_null(r.last_error)},
                        {"parent", or_null(r.parent)},
                        {"children", r.children}});
  }
  Json j;
  j["schema"] = "etlc.splits.v1";
  j["job"] = job;
  j["matched"] = l.matched;
  j["rows"] = std::move(rows);
  j["garbage"] = problems(l.garbage);
  j["garbage_total"] = l.garbage_total;
  return j;
}

nlohmann::ordered_json requeue_json(const std::string& job,
                                    const std::vector<RequeueResult>& results) {
  Json a = Json::array();
  for (const RequeueResult& r : results) {
    a.push_back(Json{{"split", r.split},
                     {"outcome", to_string(r.outcome)},
                     {"status", r.status ? Json(to_string(*r.status)) : Json(nullptr)},
                     {"attempts_before", r.attempts_before},
                     {"detail", r.detail}});
  }
  Json j;
  j["schema"] = "etlc.requeue.v1";
  j["job"] = job;
  j["results"] = std::move(a);
  return j;
}

nlohmann::ordered_json cordon_json(const std::string& job, const std::string& instance,
                                   std::string_view outcome, std::optional<bool> has_session) {
  Json j;
  j["schema"] = "etlc.cordon.v1";
  j["job"] = job;
  j["instance"] = instance;
  j["outcome"] = outcome;
  j["has_session"] = or_null(has_session);
  return j;
}

}  // namespace etlc::cli
