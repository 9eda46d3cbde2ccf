#include "admin/job_snapshot.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

#include "core/keys.hpp"

namespace etlc::admin {

void GarbageLog::add(std::string key, std::string error) {
  ++total_;
  items_.push_back(RecordProblem{std::move(key), std::move(error)});
}

std::vector<RecordProblem> GarbageLog::report() const {
  std::vector<RecordProblem> out = items_;
  std::sort(out.begin(), out.end(),
            [](const RecordProblem& a, const RecordProblem& b) { return a.key < b.key; });
  if (out.size() > kMaxGarbageReported) out.resize(kMaxGarbageReported);
  return out;
}

namespace {

// Decodes one entry under a family `prefix` whose key carries a valid id; `put(id, entry)`
// decodes and stores it. A bad key or an unreadable value goes to the garbage log.
template <typename Put>
void read_id(const Entry& e, std::string_view prefix, GarbageLog& garbage, Put&& put) {
  auto id = core::id_from_key(e.key, prefix);
  if (!id) {
    garbage.add(e.key, "the key does not encode a valid id");
    return;
  }
  try {
    put(std::move(*id), e);
  } catch (const core::RecordError& err) {
    garbage.add(e.key, err.what());
  } catch (const ConfigError& err) {
    garbage.add(e.key, err.what());
  }
}

void read_job_key(const Entry& e, JobSnapshot& s) {
  try {
    if (e.key == core::kLeaderKey) {
      s.leader = core::decode_leader(e.key, e.value);
    } else if (e.key == core::kPlanKey) {
      s.plan = core::decode_plan(e.key, e.value);
    } else if (e.key == core::kPauseKey) {
      s.pause = core::decode_pause(e.key, e.value);
    } else if (e.key == core::kStandbyKey) {
      s.standby = core::decode_standby(e.key, e.value);
    } else if (e.key == core::kProgressKey) {
      s.progress = core::decode_progress(e.key, e.value);
    } else {
      s.garbage.add(e.key, "not a key of the job layout");
    }
  } catch (const core::RecordError& err) {
    // Status then counts progress over the split records, and says why.
    if (e.key == core::kProgressKey) s.progress_unreadable = true;
    s.garbage.add(e.key, err.what());
  }
}

bool starts_with(std::string_view key, std::string_view prefix) {
  return key.substr(0, prefix.size()) == prefix;
}

// Scratch keys of the stores' own startup probes (store.hpp verify_fencing, nats_store.cpp).
bool probe_key(std::string_view key) {
  return starts_with(key, "etlc-probe.") || starts_with(key, "_etlc_probe.") ||
         key == "_etlc_ready";
}

// Routes one entry to its family; returns false if it belongs to no family of the layout.
bool read_entry(const Entry& e, const SnapshotParts& parts, JobSnapshot& s) {
  GarbageLog& g = s.garbage;
  if (starts_with(e.key, core::kJobPrefix)) {
    if (parts.job) read_job_key(e, s);
  } else if (starts_with(e.key, core::kMemberPrefix)) {
    if (parts.members) {
      read_id(e, core::kMemberPrefix, g, [&](std::string id, const Entry& x) {
        s.members.emplace(std::move(id), Versioned<core::MemberRecord>{
                                             core::decode_member(x.key, x.value), x.revision});
      });
    }
  } else if (starts_with(e.key, core::kLeasePrefix)) {
    if (parts.leases) {
      read_id(e, core::kLeasePrefix, g, [&](std::string id, const Entry& x) {
        s.leases.emplace(std::move(id), core::decode_lease(x.key, x.value));
      });
    }
  } else if (starts_with(e.key, core::kAssignPrefix)) {
    if (parts.assigns) {
      read_id(e, core::kAssignPrefix, g, [&](std::string id, const Entry& x) {
        s.assigns.emplace(std::move(id), core::decode_assignment(x.key, x.value));
      });
    }
  } else if (starts_with(e.key, core::kCordonPrefix)) {
    if (parts.cordons) {
      read_id(e, core::kCordonPrefix, g, [&](std::string id, const Entry& x) {
        s.cordons.emplace(std::move(id), core::decode_cordon(x.key, x.value));
      });
    }
  } else if (starts_with(e.key, core::kSplitPrefix)) {
    if (parts.splits) {
      read_id(e, core::kSplitPrefix, g, [&](std::string id, const Entry& x) {
        s.splits.emplace(std::move(id), core::decode_split(x.key, x.value));
      });
    }
  } else if (starts_with(e.key, core::kSpecPrefix)) {
    if (parts.specs) {
      read_id(e, core::kSpecPrefix, g,
              [&](std::string, const Entry& x) { core::decode_spec(x.key, x.value); });
    }
  } else {
    return probe_key(e.key);
  }
  return true;
}

}  // namespace

JobSnapshot read_snapshot(KvStore& store, const SnapshotParts& parts) {
  JobSnapshot s;
  if (parts.everything) {
    for (const Entry& e : store.list("")) {
      if (!read_entry(e, parts, s)) s.garbage.add(e.key, "not a key of the job layout");
    }
    return s;
  }
  const std::pair<bool, std::string_view> prefixes[] = {
      {parts.job, core::kJobPrefix},        {parts.members, core::kMemberPrefix},
      {parts.leases, core::kLeasePrefix},   {parts.assigns, core::kAssignPrefix},
      {parts.cordons, core::kCordonPrefix}, {parts.splits, core::kSplitPrefix},
      {parts.specs, core::kSpecPrefix}};
  for (const auto& [wanted, prefix] : prefixes) {
    if (!wanted) continue;
    for (const Entry& e : store.list(prefix)) read_entry(e, parts, s);
  }
  return s;
}

SplitState to_public(core::SplitStatus s) noexcept {
  switch (s) {
    case core::SplitStatus::runnable:
      return SplitState::runnable;
    case core::SplitStatus::completed:
      return SplitState::completed;
    case core::SplitStatus::quarantined:
      return SplitState::quarantined;
    case core::SplitStatus::pending:
      return SplitState::pending;
  }
  return SplitState::runnable;
}

PlanVerdict to_public(core::Verdict v) noexcept {
  switch (v) {
    case core::Verdict::running:
      return PlanVerdict::running;
    case core::Verdict::complete:
      return PlanVerdict::complete;
    case core::Verdict::stalled:
      return PlanVerdict::stalled;
    case core::Verdict::failed:
      return PlanVerdict::failed;
  }
  return PlanVerdict::running;
}

PlanFinality to_public(core::Finality f) noexcept {
  return f == core::Finality::final ? PlanFinality::final : PlanFinality::open;
}

}  // namespace etlc::admin
