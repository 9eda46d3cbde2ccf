// Human-readable output. Everything read from the store goes through `safe()`: a record may hold
// any UTF-8, including terminal escape sequences, and printing those raw would let whoever can
// write to the bucket drive the operator's terminal.
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "output.hpp"
#include "table.hpp"

namespace etlc::cli {

namespace {

// C0 controls, DEL and C1 controls (U+0080..U+009F, encoded C2 80..C2 9F) become \xNN.
std::string safe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x20 || b == 0x7F) {
      out += fmt::format("\\x{:02X}", b);
    } else if (b == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      out += fmt::format("\\u{:04X}", static_cast<unsigned char>(s[i + 1]));
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string percent(double share) {
  return fmt::format("{:.1f}%", share * 100.0);
}

std::string balance_text(const BalanceStatus& b) {
  if (b.members == 0) return "no member has lanes";
  if (b.max_load == 0) return fmt::format("nothing held ({} members with lanes)", b.members);
  return fmt::format("max/mean load {:.2f} (max {}, mean {:.1f} over {} members with lanes)",
                     b.max_over_mean, b.max_load, b.mean_load, b.members);
}

std::string member_state(const MemberStatus& m, const JobStatus& st) {
  std::vector<std::string> parts;
  if (st.leader && st.leader->instance == m.instance) parts.emplace_back("leader");
  if (st.standby && st.standby->instance == m.instance) parts.emplace_back("standby");
  if (!m.has_session) parts.emplace_back("no session (departed)");
  if (m.has_session && !m.fingerprint_matches) parts.emplace_back("foreign fingerprint");
  if (m.cordoned) {
    parts.push_back(m.cordon_reason.empty() ? "cordoned"
                                            : fmt::format("cordoned: {}", safe(m.cordon_reason)));
  }
  if (m.draining > 0) parts.push_back(fmt::format("draining {}", m.draining));
  if (m.has_session && m.unchanged_for && m.lease.count() > 0 && *m.unchanged_for > m.lease) {
    parts.push_back(fmt::format("not renewing ({} > lease {})", format_duration(*m.unchanged_for),
                                format_duration(m.lease)));
  }
  if (parts.empty()) return "ok";
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string eta_text(const WeightProgress& p) {
  const auto eta = p.eta();
  return eta ? format_duration(*eta) : "unknown";
}

std::string percent_done(const WeightProgress& p) {
  const auto f = p.fraction_done();
  return f ? percent(*f) : "-";
}

// Where the figures come from: the leader's record, or a count over the split records (and why).
std::string progress_source(const WeightProgress& p) {
  if (p.source == ProgressSource::leader_record)
    return fmt::format("job.progress, term {}", p.term);
  if (p.record == ProgressRecordState::stale) {
    return fmt::format(
        "counted over the split records: job.progress stale, term {} is below the leader's",
        p.term);
  }
  return fmt::format("counted over the split records: job.progress {}", to_string(p.record));
}

std::string progress_text(const WeightProgress& p, std::uint64_t unowned_remaining) {
  if (p.planned == 0) return fmt::format("nothing planned yet ({})", progress_source(p));
  return fmt::format("{} done by weight: {} of {}, {} remaining ({} queued); rate {}, ETA {} ({})",
                     percent_done(p), p.done, p.planned, p.remaining, unowned_remaining,
                     p.rate_per_s ? fmt::format("{}/s", *p.rate_per_s) : "unknown", eta_text(p),
                     progress_source(p));
}

// What a job without a leader record means, from what else the records say.
std::string leaderless_text(const JobStatus& st) {
  const bool sessions = std::any_of(st.members.begin(), st.members.end(),
                                    [](const MemberStatus& m) { return m.has_session; });
  if (st.plan && st.plan->verdict == PlanVerdict::complete) {
    return sessions ? "the job is complete; the members still running have nothing to do"
                    : "the job is complete and no member is running: nothing needs a leader";
  }
  if (st.plan && st.plan->verdict == PlanVerdict::failed) {
    return "the job failed (see plan); fix the planner's input, then etlc resume";
  }
  if (!sessions) return "no member is running: nothing moves until one starts";
  return "no rebalancing until one is elected; held work continues";
}

std::string utc_time(std::uint64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &utc);
  return buf;
}

}  // namespace

std::string safe_text(std::string_view s) {
  return safe(s);
}

std::string format_duration(std::chrono::milliseconds d) {
  const std::int64_t ms = std::max<std::int64_t>(0, d.count());
  if (ms < 1000) return fmt::format("{}ms", ms);
  const std::int64_t s = ms / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
}

std::string status_text(const std::string& job, const std::string& bucket, const JobStatus& st) {
  std::string out;
  out += fmt::format("job       {} (bucket {})\n", safe(job), bucket);
  if (st.leader) {
    const LeaderStatus& l = *st.leader;
    out += fmt::format("leader    {}  term {}", safe(l.instance), l.term);
    if (l.observed_for.count() > 0)
      out += fmt::format("  (seen for {})", format_duration(l.observed_for));
    if (!l.has_session) out += "  -- its session is gone; the record will be expired";
    out += '\n';
  } else {
    out += fmt::format("leader    none ({})\n", leaderless_text(st));
  }
  if (st.standby) {
    out += fmt::format(
        "standby   {}{}\n", safe(st.standby->instance),
        st.standby->has_session ? "" : "  -- its session is gone; the leader removes it");
  }
  if (st.paused) {
    out += fmt::format(
        "paused    by {}{}: {} -- the leader assigns nothing; members drain and release what "
        "they hold (etlc resume)\n",
        st.paused->by.empty() ? "an operator" : safe(st.paused->by),
        st.paused->since_ms == 0 ? "" : " since " + utc_time(st.paused->since_ms),
        st.paused->reason.empty() ? "no reason given" : safe(st.paused->reason));
  }
  if (st.plan) {
    const PlanStatus& p = *st.plan;
    out += fmt::format("plan      {}, {}: {} splits, {} completed, {} quarantined -> {}{}\n",
                       finality_name(p.finality), p.planned ? "planned" : "not yet planned",
                       p.planned_splits, p.completed, p.quarantined, to_string(p.verdict),
                       p.message.empty() ? "" : ": " + safe(p.message));
  } else {
    out += "plan      none yet\n";
  }
  const SplitCounts& c = st.splits;
  out += fmt::format(
      "splits    {} records: {} runnable ({} owned), {} completed, {} quarantined{}; weight {}\n",
      c.total, c.runnable, c.owned, c.completed, c.quarantined,
      c.residuals > 0
          ? fmt::format("; {} cut from splits under way ({} pending)", c.residuals, c.pending)
          : std::string(),
      c.total_weight);
  out += fmt::format("progress  {}\n", progress_text(st.progress, st.unowned_remaining));
  out += fmt::format("balance   {}\n", balance_text(st.balance));

  if (!st.members.empty()) {
    Table t({"INSTANCE", "LANES", "HELD", "ASSIGNED", "WEIGHT", "SHARE", "REMAINING", "SESSION",
             "STATE"},
            {false, true, true, true, true, true, true, true, false});
    for (const MemberStatus& m : st.members) {
      std::string lanes = m.lane_budget == m.max_in_flight
                              ? std::to_string(m.lane_budget)
                              : fmt::format("{}/{}", m.lane_budget, m.max_in_flight);
      if (!m.has_session) lanes = "-";
      t.add({safe(m.instance), lanes, std::to_string(m.held),
             m.assigned ? std::to_string(*m.assigned) : "-", std::to_string(m.weight_held),
             percent(m.weight_share), std::to_string(m.weight_remaining),
             !m.has_session ? "-"
             : m.session_age_estimate.count() < 1000
                 ? "<1s"
                 : "~" + format_duration(m.session_age_estimate),
             member_state(m, st)});
    }
    out += '\n' + t.render();
  } else {
    out += "\nno members\n";
  }

  if (st.moves_total > 0) {
    out += fmt::format("\nmoves in flight: {} (assigned to one member, still held by another)\n",
                       st.moves_total);
    Table t({"SPLIT", "FROM", "TO"}, {false, false, false});
    const std::size_t shown = std::min<std::size_t>(st.moves.size(), 20);
    for (std::size_t i = 0; i < shown; ++i) {
      t.add({safe(st.moves[i].split), safe(st.moves[i].from), safe(st.moves[i].to)});
    }
    out += t.render();
    if (st.moves_total > shown) out += fmt::format("... and {} more\n", st.moves_total - shown);
  }
  if (st.garbage_total > 0) {
    out += fmt::format("\nunreadable records: {} (ignored by every member)\n", st.garbage_total);
    const std::size_t shown = std::min<std::size_t>(st.garbage.size(), 10);
    for (std::size_t i = 0; i < shown; ++i) {
      out += fmt::format("  {}: {}\n", safe(st.garbage[i].key), safe(st.garbage[i].error));
    }
    if (st.garbage_total > shown)
      out += fmt::format("  ... and {} more\n", st.garbage_total - shown);
  }
  return out;
}

std::string status_line(const JobStatus& st) {
  std::uint64_t held = 0;
  for (const auto& m : st.members) held += m.held;
  return fmt::format(
      "leader={} term={} verdict={} paused={} planned={} completed={} quarantined={} members={} "
      "held={} moves={} balance={:.2f} garbage={} done={} eta={}",
      st.leader ? safe(st.leader->instance) : "-", st.leader ? st.leader->term : 0,
      st.plan ? to_string(st.plan->verdict) : "-", st.paused ? "yes" : "no",
      st.plan ? st.plan->planned_splits : 0, st.splits.completed, st.splits.quarantined,
      st.members.size(), held, st.moves_total, st.balance.max_over_mean, st.garbage_total,
      percent_done(st.progress), eta_text(st.progress));
}

std::string splits_text(const SplitListing& l) {
  Table t(
      {"SPLIT", "STATUS", "OWNER", "EPOCH", "ATTEMPTS", "WEIGHT", "WATERMARK", "CUT", "LAST ERROR"},
      {false, false, false, true, true, true, true, false, false});
  for (const SplitRow& r : l.rows) {
    std::string owner = r.owner ? safe(*r.owner) : "-";
    if (r.lease_owner && r.lease_owner != r.owner) {
      owner += fmt::format(" (lease: {})", safe(*r.lease_owner));
    }
    // Dynamic splitting: a residual names its parent; a parent, how many residuals it gave.
    std::string cut = r.parent ? "from " + safe(*r.parent) : "-";
    if (r.children > 0) cut = fmt::format("{}{} residuals", r.parent ? cut + ", " : "", r.children);
    t.add({safe(r.id), std::string(to_string(r.status)), owner, std::to_string(r.epoch),
           std::to_string(r.attempts), std::to_string(r.weight), std::to_string(r.watermark), cut,
           r.last_error ? safe(*r.last_error) : ""});
  }
  std::string out = t.render();
  if (l.matched > l.rows.size()) {
    out += fmt::format("... {} of {} matching splits shown (--limit 0 shows all)\n", l.rows.size(),
                       l.matched);
  }
  if (l.garbage_total > 0) {
    out += fmt::format("unreadable records: {}\n", l.garbage_total);
    for (const auto& g : l.garbage) out += fmt::format("  {}: {}\n", safe(g.key), safe(g.error));
  }
  return out;
}

std::string requeue_text(const std::vector<RequeueResult>& results) {
  std::string out;
  for (const RequeueResult& r : results) {
    switch (r.outcome) {
      case RequeueOutcome::requeued:
        out += fmt::format("requeued {} (was quarantined after {} attempts)\n", safe(r.split),
                           r.attempts_before);
        break;
      default:
        out += fmt::format("refused {}: {}: {}\n", safe(r.split), to_string(r.outcome),
                           safe(r.detail));
        break;
    }
  }
  return out;
}

std::string cordon_text(const std::string& instance, const CordonResult& r) {
  std::string out;
  switch (r.outcome) {
    case CordonOutcome::cordoned:
      out = fmt::format(
          "cordoned {}: the leader assigns it nothing and drains its splits to other members\n",
          safe(instance));
      break;
    case CordonOutcome::updated:
      out = fmt::format("cordoned {} (reason updated)\n", safe(instance));
      break;
    case CordonOutcome::unchanged:
      out = fmt::format("{} was already cordoned\n", safe(instance));
      break;
  }
  if (!r.has_session) {
    out += fmt::format("note: {} has no session right now; the cordon applies when it joins\n",
                       safe(instance));
  }
  return out;
}

std::string uncordon_text(const std::string& instance, UncordonOutcome o) {
  return o == UncordonOutcome::uncordoned
             ? fmt::format("uncordoned {}: it gets lanes again at the next assignment\n",
                           safe(instance))
             : fmt::format("{} was not cordoned\n", safe(instance));
}

}  // namespace etlc::cli
