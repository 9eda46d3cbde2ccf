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

// Decodes every entry under `prefix` whose key carries a valid id; `put(id, entry)` decodes and
// stores one. A bad key or an unreadable value goes to the garbage log.
template <typename Put>
void read_ids(KvStore& store, std::string_view prefix, GarbageLog& garbage, Put&& put) {
  for (Entry& e : store.list(prefix)) {
    auto id = core::id_from_key(e.key, prefix);
    if (!id) {
      garbage.add(e.key, "the key does not encode a valid id");
      continue;
    }
    try {
      put(std::move(*id), e);
    } catch (const core::RecordError& err) {
      garbage.add(e.key, err.what());
    } catch (const ConfigError& err) {
      garbage.add(e.key, err.what());
    }
  }
}

}  // namespace

JobSnapshot read_snapshot(KvStore& store, const SnapshotParts& parts) {
  JobSnapshot s;
  if (parts.job) {
    for (Entry& e : store.list(core::kJobPrefix)) {
      try {
        if (e.key == core::kLeaderKey) {
          s.leader = core::decode_leader(e.key, e.value);
        } else if (e.key == core::kPlanKey) {
          s.plan = core::decode_plan(e.key, e.value);
        } else if (e.key == core::kPauseKey) {
          s.pause = core::decode_pause(e.key, e.value);
        } else {
          s.garbage.add(e.key, "not a key of the job layout");
        }
      } catch (const core::RecordError& err) {
        s.garbage.add(e.key, err.what());
      }
    }
  }
  if (parts.members) {
    read_ids(store, core::kMemberPrefix, s.garbage, [&](std::string id, const Entry& e) {
      s.members.emplace(std::move(id), Versioned<core::MemberRecord>{
                                           core::decode_member(e.key, e.value), e.revision});
    });
  }
  if (parts.leases) {
    read_ids(store, core::kLeasePrefix, s.garbage, [&](std::string id, const Entry& e) {
      s.leases.emplace(std::move(id), core::decode_lease(e.key, e.value));
    });
  }
  if (parts.assigns) {
    read_ids(store, core::kAssignPrefix, s.garbage, [&](std::string id, const Entry& e) {
      s.assigns.emplace(std::move(id), core::decode_assignment(e.key, e.value));
    });
  }
  if (parts.cordons) {
    read_ids(store, core::kCordonPrefix, s.garbage, [&](std::string id, const Entry& e) {
      s.cordons.emplace(std::move(id), core::decode_cordon(e.key, e.value));
    });
  }
  if (parts.splits) {
    read_ids(store, core::kSplitPrefix, s.garbage, [&](std::string id, const Entry& e) {
      s.splits.emplace(std::move(id), core::decode_split(e.key, e.value));
    });
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
