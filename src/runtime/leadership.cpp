// Leader election, the term fence, planning, seeding and the completion tallies.
//
// Election is a create on job.leader. The winner then bumps the plan record's term by CAS before
// it writes anything else: that CAS is the leader fence. A deposed leader's plan write loses the
// swap; its assignment records carry the old term and workers ignore any record whose term is
// below the plan's. There is no leaderless fallback: without a leader nothing is rebalanced, and
// every member keeps what it holds.
#include <fmt/format.h>
#include "log.hpp"

#include <unordered_set>

#include "core/completion.hpp"
#include "core/keys.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

namespace {
core::Finality to_core(PlanFinality f) {
  return f == PlanFinality::final ? core::Finality::final : core::Finality::open;
}
constexpr auto kPlanRetryMin = std::chrono::milliseconds(200);
constexpr auto kPlanRetryMax = std::chrono::seconds(30);
constexpr auto kTallyInterval = std::chrono::milliseconds(100);
}  // namespace

void Member::lead(TimePoint now) {
  if (!leader_) {
    try_elect(now);
    if (!leader_) return;
  }
  ensure_watches();  // the leader-only watches
  if (!w_splits_.caught_up || !w_members_.caught_up || !w_assigns_.caught_up) return;
  heal(now);
  if (!leader_) return;
  advance_planning(now);
  if (split_view_short(now)) return;  // wait for the watch to deliver the rest
  update_tallies(now);
  publish_assignment(now);
  cleanup_departed(now);
}

// Split records are never deleted, so a view holding fewer than the plan counts is missing some
// (a snapshot that ended early): assigning from it would revoke splits from their live owners.
// Wait for the watch to deliver the rest; after a lease, re-watch once; if a fresh snapshot is
// short too, records really were deleted (by hand): go on with what exists.
std::uint64_t Member::known_split_count() const {
  std::uint64_t n = splits_.size();
  for (const auto& [id, d] : split_damage_) n += splits_.count(id) ? 0 : 1;
  return n;
}

bool Member::split_view_short(TimePoint now) {
  if (!plan_view_ || !plan_view_->first.planned || seeding_) return false;
  const std::uint64_t known = known_split_count();
  const std::uint64_t planned = plan_view_->first.split_count;
  if (known >= planned) {
    split_view_short_since_.reset();
    split_view_rewatched_ = false;
    missing_splits_listed_ = false;
    return false;
  }
  if (split_view_rewatched_) {
    if (split_view_short_since_) {
      log().error(
          "etlc: {}: a fresh snapshot holds {} of the plan's {} split records: records were "
          "deleted from the store; rebuilding them",
          instance_, known, planned);
      split_view_short_since_.reset();
    }
    if (!missing_splits_listed_) find_missing_splits();
    return false;
  }
  if (!split_view_short_since_) {
    split_view_short_since_ = now;
    log().warn(
        "etlc: {}: the split view holds {} of the plan's {} records; waiting for the rest "
        "before assigning",
        instance_, known, planned);
  } else if (now - *split_view_short_since_ >= config_.lease_duration) {
    w_splits_.watch.reset();  // ensure_watches() re-opens it: a fresh snapshot
    w_splits_.caught_up = false;
    split_view_rewatched_ = true;
  }
  return true;
}

void Member::try_elect(TimePoint now) {
  (void)now;
  if (!w_job_.caught_up || !w_members_.caught_up) return;
  if (leader_damage_) return;  // an unreadable record holds the key until it is removed
  core::LeaderRecord rec;
  Revision rev = 0;
  if (leader_view_) {
    // A leader record of this very process that it does not act on: an election whose create
    // had an unknown outcome, or whose term-taking failed half-way (a store error, lost races).
    // Nobody else can be elected while our session lives, so finish the election.
    if (leader_view_->first.owner != instance_ || leader_view_->first.nonce != nonce_) return;
    rec = leader_view_->first;
    rev = leader_view_->second;
  } else {
    // Above every term seen anywhere, not only the plan's: a plan record deleted or destroyed
    // must not hand out a term some leader already held.
    rec = core::LeaderRecord{instance_, nonce_, highest_term_seen() + 1};
    WriteResult r = store_->create(core::kLeaderKey, core::encode(rec));
    if (!r.ok) return;  // someone else won; the watch will tell us who
    rev = r.revision;
  }
  leader_ = true;
  term_ = rec.term;
  leader_rev_ = rev;
  leader_view_ = std::make_pair(rec, rev);
  bool took = false;
  try {
    took = take_term();
  } catch (const StoreError&) {
    leader_ = false;  // not leading yet: a later step finishes the election from our record
    throw;
  }
  if (!took) {
    step_down("could not take the plan term");
    return;
  }
  {
    std::lock_guard lk(shared_mu_);
    leader_flag_ = true;
  }
  metrics_.set_leader(true);
  log().info("etlc: {}: elected leader for term {}", instance_, term_);
  // Start with no memory of departure times: members whose assignment records exist but whose
  // sessions are gone get a fresh window from now, so a leader change does not rush a move.
  delay_ = core::RebalanceDelay(config_.rebalance_delay);
  for (const auto& [id, v] : assigns_) {
    if (!members_.count(id)) note_departure(id, now);
  }
  published_.clear();
  assignment_dirty_ = true;
  planning_ = false;
  seeding_.reset();
  next_plan_at_ = now;
  plan_backoff_ = kPlanRetryMin;
}

// Bumps (or creates) the plan record at our term. Returns false if a newer term exists.
bool Member::take_term() {
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto cur = store_->get(core::kPlanKey);
    if (!cur) {
      core::PlanRecord plan;
      plan.fingerprint = fingerprint_;
      plan.term = term_;
      WriteResult r = store_->create(core::kPlanKey, core::encode(plan));
      if (r.ok) {
        plan_view_ = std::make_pair(plan, r.revision);
        return true;
      }
      continue;
    }
    core::PlanRecord plan;
    try {
      plan = core::decode_plan(core::kPlanKey, cur->value);
    } catch (const core::RecordError& e) {
      // Unreadable: take the term over it with the last plan we read, or a fresh one (which
      // re-plans; seeding keeps every spec and split record that exists).
      log().warn("etlc: {}: replacing the unreadable plan record: {}", instance_, e.what());
      plan = plan_view_ ? plan_view_->first : core::PlanRecord{};
      plan.fingerprint = fingerprint_;
    }
    if (plan.fingerprint != fingerprint_) {
      go_fatal(
          fmt::format("job fingerprint mismatch: the job was planned with '{}', this "
                      "member's planner has '{}'",
                      plan.fingerprint, fingerprint_));
      return false;
    }
    if (plan.term >= term_) {
      // A term at least ours exists (a leader we did not see yet). Move past it in our own
      // leader record so terms stay unique, then bump.
      core::LeaderRecord rec{instance_, nonce_, plan.term + 1};
      WriteResult lr = store_->update(core::kLeaderKey, core::encode(rec), leader_rev_);
      if (!lr.ok) return false;  // our leader record moved: we are not the leader
      term_ = rec.term;
      leader_rev_ = lr.revision;
      leader_view_ = std::make_pair(rec, lr.revision);
    }
    plan.term = term_;
    WriteResult r = store_->update(core::kPlanKey, core::encode(plan), cur->revision);
    if (r.ok) {
      plan_view_ = std::make_pair(plan, r.revision);
      return true;
    }
  }
  return false;
}

void Member::step_down(const char* why) {
  if (!leader_) return;
  log().info("etlc: {}: stepping down as leader of term {} ({})", instance_, term_, why);
  leader_ = false;
  w_splits_.watch.reset();
  w_cordons_.watch.reset();
  splits_.clear();
  split_damage_.clear();
  parked_specs_.clear();
  unrepairable_.clear();
  repair_due_ = planning_repair_ = missing_splits_listed_ = false;
  cordons_.clear();
  published_.clear();
  seeding_.reset();
  planning_ = false;
  std::lock_guard lk(shared_mu_);
  leader_flag_ = false;
  metrics_.set_leader(false);
}

// Writes the plan record at our term by CAS on the revision we last saw. A loss means someone
// else wrote it: if they hold a newer term we step down, else retry next step.
bool Member::write_plan(const core::PlanRecord& next) {
  if (!plan_view_) return false;
  WriteResult r = store_->update(core::kPlanKey, core::encode(next), plan_view_->second);
  if (r.ok) {
    plan_view_ = std::make_pair(next, r.revision);
    return true;
  }
  auto cur = store_->get(core::kPlanKey);
  if (!cur) {
    plan_damage_ = Damage{0, true, clock_.now(), "deleted", std::nullopt};
    return false;
  }
  core::PlanRecord seen;
  try {
    seen = core::decode_plan(core::kPlanKey, cur->value);
  } catch (const core::RecordError& e) {
    plan_damage_ = Damage{cur->revision, false, clock_.now(), e.what(), std::nullopt};
    return false;  // heal_plan() rewrites it next step
  }
  note_term(seen.term);
  if (seen.term > term_) {
    step_down("plan term moved past ours");
    return false;
  }
  plan_view_ = std::make_pair(seen, cur->revision);
  return false;
}

void Member::advance_planning(TimePoint now) {
  if (!plan_view_) return;
  const core::PlanRecord& plan = plan_view_->first;
  if (plan.verdict == core::Verdict::failed) {  // gave up on the planner until `etlc resume`
    planner_failures_ = 0;
    plan_backoff_ = kPlanRetryMin;
    return;
  }
  if (seeding_) {
    seed_slice();
    if (seeding_ && seeding_->next >= seeding_->splits.size()) finish_seeding();
    return;
  }
  PlanRunner& runner = *options_.plan_runner;
  if (planning_) {
    auto outcome = runner.take();
    if (!outcome) return;  // still running
    planning_ = false;
    if (!outcome->plan) {
      if (give_up_on_planner(outcome->error, now)) return;
      log().warn("etlc: {}: planner failed: {}; retrying in {} ms", instance_, outcome->error,
                 std::chrono::duration_cast<std::chrono::milliseconds>(plan_backoff_).count());
      next_plan_at_ = now + plan_backoff_;
      plan_backoff_ = std::min<Duration>(plan_backoff_ * 2, kPlanRetryMax);
      return;
    }
    plan_backoff_ = kPlanRetryMin;
    planner_failures_ = 0;
    // Validate before anything is written: a bad plan is the planner's bug, reported by name.
    std::unordered_set<std::string> ids;
    for (const PlannedSplit& s : outcome->plan->splits) {
      try {
        core::validate_id(s.spec.id, "split id");
        if (s.spec.descriptor.size() > kMaxDescriptorBytes) {
          throw ConfigError(fmt::format("split '{}': descriptor of {} bytes exceeds {}", s.spec.id,
                                        s.spec.descriptor.size(), kMaxDescriptorBytes));
        }
        if (!ids.insert(s.spec.id).second) {
          throw ConfigError(fmt::format("split id '{}' planned twice", s.spec.id));
        }
      } catch (const ConfigError& e) {
        log().error("etlc: {}: rejecting plan: {}", instance_, e.what());
        if (give_up_on_planner(fmt::format("invalid plan: {}", e.what()), now)) return;
        next_plan_at_ = now + kPlanRetryMax;
        return;
      }
    }
    SeedJob job;
    job.splits = std::move(outcome->plan->splits);
    job.finality = outcome->plan->finality;
    job.cursor = std::move(outcome->plan->cursor);
    job.repair = planning_repair_;
    seeding_ = std::move(job);
    return;
  }
  // A repair re-plan (healing.cpp) runs for final plans too, at most once per replan_interval.
  const bool due = !plan.planned ||
                   (plan.finality == core::Finality::open && now >= next_plan_at_) || repair_due_;
  if (!due || now < next_plan_at_) return;
  planning_repair_ = repair_due_ && plan.planned;
  repair_due_ = false;
  if (planning_repair_) {
    log().warn("etlc: {}: re-planning to rewrite damaged specs and split records", instance_);
  }
  PlanContext ctx;
  ctx.term = term_;
  ctx.cursor = plan.cursor;
  ctx.existing_splits = splits_.size();
  planning_ = true;
  runner.start(planner_, ctx);
  if (!runner.running()) advance_planning(now);  // inline runner: the outcome is ready
}

// Seeds at most bulk_ops_per_step store writes per step: for each split its spec, then its
// record, both create-if-absent (a spec that exists is fine: it is immutable). Splits already
// known from the split.* watch are skipped. The writes of one slice run through the bulk
// executor (pipelined in thread mode).
void Member::seed_slice() {
  SeedJob& job = *seeding_;
  const std::size_t max_splits = std::max<std::uint32_t>(config_.bulk_ops_per_step / 2, 1);
  std::vector<const PlannedSplit*> batch;
  while (job.next < job.splits.size() && batch.size() < max_splits) {
    const PlannedSplit& s = job.splits[job.next++];
    // Damaged records are healed from what is known of them (healing.cpp), never re-seeded as
    // new: a fresh record at epoch 0 would let the old tenancy's writes through.
    if (job.repair) repair_seeded(s);
    if (!splits_.count(s.spec.id) && !split_damage_.count(s.spec.id)) batch.push_back(&s);
  }
  if (batch.empty()) return;
  std::vector<core::SplitRecord> records(batch.size());
  std::vector<Revision> created(batch.size(), 0);
  std::vector<std::function<void()>> tasks;
  tasks.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const PlannedSplit& s = *batch[i];
    core::SplitRecord& rec = records[i];
    rec.id = s.spec.id;
    rec.weight = s.spec.weight;
    if (s.seed_progress) rec.progress = *s.seed_progress;
    tasks.emplace_back([this, &s, &rec, &out = created[i]] {
      store_->create(core::spec_key(s.spec.id), core::encode(core::SpecRecord{s.spec}));
      WriteResult r = store_->create(core::split_key(s.spec.id), core::encode(rec));
      if (r.ok) out = r.revision;
    });
  }
  try {
    options_.bulk->run_all(tasks);
  } catch (...) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (created[i] != 0) splits_.emplace(records[i].id, SplitView{records[i], created[i]});
    }
    job.next = 0;  // rescan from the start: known splits are skipped cheaply
    throw;
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (created[i] != 0) {
      splits_.emplace(records[i].id, SplitView{records[i], created[i]});
      assignment_dirty_ = true;
    }
  }
}

void Member::finish_seeding() {
  SeedJob job = std::move(*seeding_);
  seeding_.reset();
  if (job.repair) {
    // A parked split the planner no longer lists stays parked: the job's named end state.
    std::unordered_set<std::string_view> listed;
    for (const PlannedSplit& s : job.splits) listed.insert(s.spec.id);
    for (const std::string& id : parked_specs_) {
      if (!listed.count(id) && unrepairable_.insert(id).second) {
        log().error(
            "etlc: {}: split '{}' stays parked: its spec is unusable and the planner no longer "
            "lists it (restore spec.{} and run `etlc requeue {}`)",
            instance_, id, id, id);
      }
    }
  }
  core::PlanRecord next = plan_view_->first;
  next.term = term_;
  next.planned = true;
  next.finality = to_core(job.finality);
  next.cursor = job.cursor;
  next.split_count = next.finality == core::Finality::final ? job.splits.size() : splits_.size();
  set_tallies(next);  // the header must never carry older tallies than the view (a requeue)
  if (!write_plan(next)) {
    seeding_ = std::move(job);  // retry the header write next step (seeding is idempotent)
    seeding_->next = seeding_->splits.size();
    return;
  }
  next_plan_at_ = clock_.now() + config_.replan_interval;
  log().info("etlc: {}: plan published: {} splits ({})", instance_, next.split_count,
             core::to_string(next.finality));
}

// The completed/quarantined tallies of the split view, and the verdict they give.
void Member::set_tallies(core::PlanRecord& next) {
  next.completed = completed_count_;
  next.quarantined = quarantined_count_;
  // A split parked for its spec that a repair re-plan may still requeue is not a final
  // quarantine: the job is not stalled until the planner has had its say.
  std::uint64_t pending = 0;
  for (const std::string& id : parked_specs_) pending += unrepairable_.count(id) ? 0 : 1;
  try {
    next.verdict = core::completion_verdict(next.finality, next.split_count, next.completed,
                                            next.quarantined - std::min(pending, next.quarantined));
  } catch (const ConfigError& e) {
    log().error("etlc: {}: inconsistent tallies, verdict left as it was: {}", instance_, e.what());
  }
}

void Member::update_tallies(TimePoint now) {
  if (!plan_view_ || !plan_view_->first.planned) return;
  const core::PlanRecord& plan = plan_view_->first;
  if (plan.verdict == core::Verdict::failed) return;  // sticky until an operator clears it
  core::PlanRecord next = plan;
  next.term = term_;
  // Count every split record that exists: after seeding that is at least the planned set, and a
  // stray record (an operator's, an earlier plan's) is work the fleet assigns too, so the
  // tallies can never exceed the count.
  next.split_count = std::max<std::uint64_t>(
      splits_.size(), plan.finality == core::Finality::final ? plan.split_count : 0);
  set_tallies(next);
  metrics_.set_job_tallies(next.split_count, next.completed, next.quarantined);
  if (next == plan) return;
  const bool verdict_changed = next.verdict != plan.verdict;
  if (!verdict_changed && now - last_tally_write_ < kTallyInterval) return;
  if (write_plan(next)) last_tally_write_ = now;
}

}  // namespace etlc::runtime
