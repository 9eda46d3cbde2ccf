// The leader's planning: the planner off the loop, validation, bounded seeding, the plan header
// and its tallies, and the bounded planner-failure policy.
//
// Planner failures. The leader counts consecutive failures of the planner (it threw, or returned
// an invalid plan). At CoordinatorConfig::max_planner_failures it writes the plan record's
// `failed` verdict with the last error as its message and stops planning; every member then
// reports Stalled{message} (worker.cpp). The verdict is sticky across leaders until an operator
// clears it (`etlc resume`), after which the count starts again from zero.
#include <fmt/format.h>

#include <unordered_set>

#include "core/completion.hpp"
#include "core/cut_rules.hpp"
#include "core/keys.hpp"
#include "core/protocol_assert.hpp"
#include "core/repair_rules.hpp"
#include "log.hpp"
#include "runtime/leadership.hpp"

namespace etlc::runtime {

namespace {
constexpr auto kPlanRetryMin = std::chrono::milliseconds(200);
constexpr auto kPlanRetryMax = std::chrono::seconds(30);
constexpr auto kTallyInterval = std::chrono::milliseconds(100);
// A planner's message is user text: bounded and made valid UTF-8 before it enters a record.
constexpr std::size_t kMaxPlannerMessageBytes = 1024;

core::Finality to_core(PlanFinality f) {
  return f == PlanFinality::final ? core::Finality::final : core::Finality::open;
}

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

void Leadership::advance_planning(TimePoint now) {
  const auto& view = views_.plan_view();
  if (!view) return;
  const core::PlanRecord& plan = view->first;
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
  if (planning_) {
    auto outcome = deps_.plan_runner.take();
    if (outcome) take_plan_outcome(std::move(*outcome), now);
    return;
  }
  // A repair re-plan (healing.cpp) runs for final plans too, at most once per replan_interval.
  const bool due = !plan.planned || plan.finality == core::Finality::open || repair_due_;
  if (due && now >= next_plan_at_) start_planner(now);
}

void Leadership::start_planner(TimePoint now) {
  const core::PlanRecord& plan = views_.plan_view()->first;
  planning_repair_ = repair_due_ && plan.planned;
  repair_due_ = false;
  if (planning_repair_) {
    log().warn("etlc: {}: re-planning to rewrite damaged specs and split records", ctx_.instance);
  }
  PlanContext pc;
  pc.term = term_;
  pc.cursor = plan.cursor;
  pc.existing_splits = leader_views_.splits().size();
  planning_ = true;
  deps_.plan_runner.start(deps_.planner, pc);
  if (!deps_.plan_runner.running()) advance_planning(now);  // inline runner: the outcome is ready
}

void Leadership::take_plan_outcome(PlanOutcome outcome, TimePoint now) {
  planning_ = false;
  if (!outcome.plan) {
    if (give_up_on_planner(outcome.error, now)) return;
    log().warn("etlc: {}: planner failed: {}; retrying in {} ms", ctx_.instance, outcome.error,
               std::chrono::duration_cast<std::chrono::milliseconds>(plan_backoff_).count());
    next_plan_at_ = now + plan_backoff_;
    plan_backoff_ = std::min<Duration>(plan_backoff_ * 2, kPlanRetryMax);
    return;
  }
  plan_backoff_ = kPlanRetryMin;
  planner_failures_ = 0;
  if (!valid_plan(*outcome.plan, now)) return;
  SeedJob job;
  job.splits = std::move(outcome.plan->splits);
  job.finality = outcome.plan->finality;
  job.cursor = std::move(outcome.plan->cursor);
  job.repair = planning_repair_;
  seeding_ = std::move(job);
}

// Validates before anything is written: a bad plan is the planner's bug, reported by name.
bool Leadership::valid_plan(const Plan& plan, TimePoint now) {
  std::unordered_set<std::string_view> ids;
  for (const PlannedSplit& s : plan.splits) {
    try {
      core::validate_id(s.spec.id, "split id");
      if (s.spec.descriptor.size() > kMaxDescriptorBytes) {
        throw ConfigError(fmt::format("split '{}': descriptor of {} bytes exceeds {}", s.spec.id,
                                      s.spec.descriptor.size(), kMaxDescriptorBytes));
      }
      if (!ids.insert(s.spec.id).second) {
        throw ConfigError(fmt::format("split id '{}' planned twice", s.spec.id));
      }
      if (core::residual_id_form(s.spec.id)) {
        throw ConfigError(fmt::format(
            "split id '{}' ends in ~<digits>.<digits>, the form of a residual's id (dynamic "
            "splitting); planned ids may not end so",
            s.spec.id));
      }
    } catch (const ConfigError& e) {
      log().error("etlc: {}: rejecting plan: {}", ctx_.instance, e.what());
      if (!give_up_on_planner(fmt::format("invalid plan: {}", e.what()), now)) {
        next_plan_at_ = now + kPlanRetryMax;
      }
      return false;
    }
  }
  return true;
}

bool Leadership::give_up_on_planner(const std::string& error, TimePoint now) {
  const auto& view = views_.plan_view();
  if (++planner_failures_ < ctx_.config.max_planner_failures || !view) return false;
  core::PlanRecord next = view->first;
  next.term = term_;
  next.verdict = core::Verdict::failed;
  next.message = fmt::format(
      "the planner failed {} times in a row (max_planner_failures); last error: {}. Fix the "
      "cause, then `etlc resume` lets the leader plan again",
      planner_failures_, printable_message(error));
  log().error("etlc: {}: giving up: {}", ctx_.instance, *next.message);
  if (!write_plan(next)) next_plan_at_ = now + plan_backoff_;  // a later failure writes it again
  return true;
}

// The next splits to seed, at most bulk_ops_per_step / 2 (two writes each). Splits already known
// from the split.* watch are skipped; a repair re-plan heals what it passes first.
std::vector<const PlannedSplit*> Leadership::next_seed_slice() {
  SeedJob& job = *seeding_;
  const std::size_t max_splits = std::max<std::uint32_t>(ctx_.config.bulk_ops_per_step / 2, 1);
  std::vector<const PlannedSplit*> slice;
  while (job.next < job.splits.size() && slice.size() < max_splits) {
    const PlannedSplit& s = job.splits[job.next++];
    // Damaged records are healed from what is known of them (healing.cpp), never re-seeded as
    // new: a fresh record at epoch 0 would let the old tenancy's writes through.
    if (job.repair) repair_seeded(s);
    const auto& splits = leader_views_.splits();
    auto& damage = leader_views_.split_damage();
    if (splits.count(s.spec.id) || damage.count(s.spec.id)) continue;
    if (leader_views_.has_residuals(s.spec.id)) {
      // Cut before its record was lost (deleted while no leader watched): seeded afresh it
      // would read its residuals' rows again. Its spec is put back from the plan if it is gone
      // too, and healing rebuilds the record with its cuts (healing.cpp).
      rewrite_spec(s, false);
      damage[s.spec.id] =
          Damage{0, true, ctx_.clock.now(), "missing (residuals cut from it exist)", std::nullopt};
      continue;
    }
    slice.push_back(&s);
  }
  return slice;
}

core::SplitRecord Leadership::seed_record(const PlannedSplit& s) const {
  core::SplitRecord rec;
  rec.id = s.spec.id;
  rec.weight = s.spec.weight;
  const auto lease = views_.leases().find(s.spec.id);
  rec.epoch =
      core::seeded_epoch(term_, lease == views_.leases().end() ? 0 : lease->second.rec.epoch);
  if (s.seed_progress) rec.progress = *s.seed_progress;
  return rec;
}

namespace {
// Requests over owned keys and values (CreateRequest holds views).
struct CreateBatch {
  std::vector<std::string> keys;
  std::vector<std::string> values;
  void add(std::string key, std::string value) {
    keys.push_back(std::move(key));
    values.push_back(std::move(value));
  }
  std::vector<CreateRequest> requests() const {
    std::vector<CreateRequest> out;
    out.reserve(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) out.push_back({keys[i], values[i]});
    return out;
  }
};
// The worst error among `outcomes` (unknown_outcome before unavailable), counted into `failed`.
void note_errors(const std::vector<CreateOutcome>& outcomes, std::optional<StoreErrc>& worst,
                 std::size_t& failed) {
  for (const CreateOutcome& o : outcomes) {
    if (!o.error) continue;
    ++failed;
    if (!worst || *o.error == StoreErrc::unknown_outcome) worst = o.error;
  }
}
}  // namespace

// Seeds at most bulk_ops_per_step store writes per step as two pipelined batches
// (KvStore::create_many): the slice's specs, then the split records of the splits whose spec
// exists (created now, or there already: a spec is immutable), so that a split record never
// exists without its spec. A record that exists already is fine (the split.* watch delivers it).
// An outcome that is unknown or unavailable proves nothing: the step fails with it after the
// batch (the member backs off) and seeding rescans the plan from the start, skipping the splits
// the view knows by then.
void Leadership::seed_slice() {
  SeedJob& job = *seeding_;
  std::vector<const PlannedSplit*> slice;
  try {
    slice = next_seed_slice();  // a repair re-plan writes there too (repair_seeded)
  } catch (const StoreError&) {
    job.next = 0;  // the splits passed since the error would be skipped: rescan them
    throw;
  }
  if (slice.empty()) return;
  CreateBatch specs;
  for (const PlannedSplit* s : slice) {
    specs.add(core::spec_key(s->spec.id), core::encode(core::SpecRecord{s->spec}));
  }
  std::vector<CreateOutcome> spec_out;
  std::vector<CreateOutcome> record_out;
  std::vector<core::SplitRecord> records;
  try {
    spec_out = ctx_.store.create_many(specs.requests());
    CreateBatch record_batch;
    for (std::size_t i = 0; i < slice.size(); ++i) {
      if (spec_out[i].error) continue;
      records.push_back(seed_record(*slice[i]));
      record_batch.add(core::split_key(slice[i]->spec.id), core::encode(records.back()));
    }
    record_out = ctx_.store.create_many(record_batch.requests());
  } catch (...) {
    job.next = 0;  // closed, or a bug: rescan from the start (known splits are skipped cheaply)
    throw;
  }
  // New records nobody holds count in unheld_added (publish.cpp decides what they need).
  for (std::size_t i = 0; i < records.size(); ++i) {
    const CreateOutcome& o = record_out[i];
    if (!o.error && o.result.ok &&
        leader_views_.put_split(records[i].id, records[i], o.result.revision)) {
      assignment_dirty_ = true;
    }
  }
  std::optional<StoreErrc> worst;
  std::size_t failed = 0;
  note_errors(spec_out, worst, failed);
  note_errors(record_out, worst, failed);
  if (!worst) return;
  job.next = 0;
  throw StoreError(*worst, fmt::format("seeding: {} of {} creates without a known outcome; "
                                       "rescanning the plan at the next step",
                                       failed, spec_out.size() + record_out.size()));
}

void Leadership::finish_seeding() {
  if (!requeues_settled()) return;  // its plan write carries the tallies; the next step retries
  SeedJob job = std::move(*seeding_);
  seeding_.reset();
  // One computation over the whole plan once seeded, whatever the slices skipped (publish.cpp).
  if (leader_views_.unheld_added() > 0) assignment_dirty_ = true;
  if (job.repair) {
    // A parked split the planner no longer lists stays parked: the job's named end state.
    std::unordered_set<std::string_view> listed;
    for (const PlannedSplit& s : job.splits) listed.insert(s.spec.id);
    for (const std::string& id : leader_views_.parked_specs()) {
      if (!listed.count(id) && unrepairable_.insert(id).second) {
        log().error(
            "etlc: {}: split '{}' stays parked: its spec is unusable and the planner no longer "
            "lists it (restore spec.{} and run `etlc requeue {}`)",
            ctx_.instance, id, id, id);
      }
    }
  }
  core::PlanRecord next = views_.plan_view()->first;
  next.term = term_;
  next.planned = true;
  next.finality = to_core(job.finality);
  next.cursor = job.cursor;
  // Residuals count as update_tallies counts them: the planner lists none, and one whose record
  // is damaged is in no view (sim operator 34533: a repair re-plan wrote `complete` over one
  // split too few).
  next.split_count = next.finality == core::Finality::final
                         ? std::max<std::uint64_t>(job.splits.size(), splits_counted())
                         : splits_counted();
  set_tallies(next);  // the header must never carry older tallies than the view (a requeue)
  if (!write_plan(next)) {
    seeding_ = std::move(job);  // retry the header write next step (seeding is idempotent)
    seeding_->next = seeding_->splits.size();
    return;
  }
  next_plan_at_ = ctx_.clock.now() + ctx_.config.replan_interval;
  log().info("etlc: {}: plan published: {} splits ({})", ctx_.instance, next.split_count,
             core::to_string(next.finality));
}

// Split records are never deleted, so a view holding fewer than the plan counts is missing some
// (a snapshot that ended early): assigning from it would revoke splits from their live owners.
// Wait for the watch to deliver the rest; after a lease, re-watch once; if a fresh snapshot is
// short too, records really were deleted while no leader watched: rebuild them from their specs.
bool Leadership::split_view_short(TimePoint now) {
  const auto& view = views_.plan_view();
  if (!view || !view->first.planned || seeding_) return false;
  const std::uint64_t known = leader_views_.known_split_count();
  const std::uint64_t planned = view->first.split_count;
  if (known >= planned) {
    split_view_short_since_.reset();
    split_view_rewatched_ = false;
    missing_splits_listed_ = false;
    // With residuals the count proves nothing: those named since the plan record's count was
    // written make up for a planned record deleted while no leader watched, which then stays
    // missing and uncounted (sim operator 282: a job "stalled" over 25 of its 26 splits). Every
    // spec names a split: list them once per snapshot of a view that holds residuals.
    if (leader_views_.residuals() > 0 && specs_listed_for_ != leader_views_.split_snapshots()) {
      find_missing_splits();
      specs_listed_for_ = leader_views_.split_snapshots();
    }
    return false;
  }
  if (split_view_rewatched_) {
    if (split_view_short_since_) {
      log().error(
          "etlc: {}: a fresh snapshot holds {} of the plan's {} split records: records were "
          "deleted from the store; rebuilding them",
          ctx_.instance, known, planned);
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
        ctx_.instance, known, planned);
  } else if (now - *split_view_short_since_ >= ctx_.config.lease_duration) {
    leader_views_.rewatch_splits();  // drain() re-opens it: a fresh snapshot
    split_view_rewatched_ = true;
  }
  return true;
}

// Writes the plan record at our term by CAS on the revision we last saw. A loss means someone
// else wrote it: if they hold a newer term we step down, else retry next step.
bool Leadership::write_plan(const core::PlanRecord& next) {
  const auto& view = views_.plan_view();
  if (!view) return false;
  WriteResult r;
  try {
    r = ctx_.store.update(core::kPlanKey, core::encode(next), view->second);
  } catch (const StoreError& e) {
    if (e.code() == StoreErrc::unknown_outcome) plan_in_doubt_ = view->second;
    throw;
  }
  if (r.ok) {
    plan_in_doubt_.reset();
    views_.set_plan_view(next, r.revision);
    return true;
  }
  auto cur = ctx_.store.get(core::kPlanKey);
  if (!cur) {
    views_.set_plan_damage(Damage{0, true, ctx_.clock.now(), "deleted", std::nullopt});
    return false;
  }
  core::PlanRecord seen;
  try {
    seen = core::decode_plan(core::kPlanKey, cur->value);
  } catch (const core::RecordError& e) {
    views_.set_plan_damage(Damage{cur->revision, false, ctx_.clock.now(), e.what(), std::nullopt});
    return false;  // heal_plan() rewrites it next step
  }
  if (seen.term > term_) {
    step_down("plan term moved past ours");
    return false;
  }
  ETLC_ASSERT(term_ >= seen.term, "leading at term {} over a plan of term {}", term_, seen.term);
  views_.set_plan_view(std::move(seen), cur->revision);
  return false;
}

// The completed/quarantined tallies of the split view, and the verdict they give.
void Leadership::set_tallies(core::PlanRecord& next) const {
  next.completed = leader_views_.completed();
  next.quarantined = leader_views_.quarantined();
  // A split parked for its spec that a repair re-plan may still requeue is not a final
  // quarantine: the job is not stalled until the planner has had its say.
  std::uint64_t pending = 0;
  for (const std::string& id : leader_views_.parked_specs()) {
    pending += unrepairable_.count(id) ? 0 : 1;
  }
  try {
    next.verdict = core::completion_verdict(next.finality, next.split_count, next.completed,
                                            next.quarantined - std::min(pending, next.quarantined));
  } catch (const ConfigError& e) {
    log().error("etlc: {}: inconsistent tallies, verdict left as it was: {}", ctx_.instance,
                e.what());
  }
}

// The standby's warm views may lag the store by the events in flight, and a requeue, the one
// write that lowers a tally, may be among them: the term's first tallies would count a quarantine
// the store no longer holds (sim operator 28069: the leader requeued a parked split and was
// deposed at once). Each quarantine in the view is read once (they are few); a newer record
// replaces the view's. A store error leaves it for the next step.
void Leadership::confirm_quarantines() {
  std::vector<std::pair<std::string, Revision>> quarantined;
  for (const auto& [id, v] : leader_views_.splits()) {
    if (v.rec.status == core::SplitStatus::quarantined) quarantined.emplace_back(id, v.rev);
  }
  for (const auto& [id, rev] : quarantined) {
    const std::string key = core::split_key(id);
    const std::optional<Entry> cur = ctx_.store.get(key);
    if (!cur || cur->revision <= rev) continue;  // deleted (damage) or no newer: as the view says
    try {
      if (leader_views_.put_split(id, core::decode_split(key, cur->value), cur->revision)) {
        assignment_dirty_ = true;
      }
    } catch (const core::RecordError&) {
    }  // damage: the watch reports it
  }
  confirm_quarantines_ = false;
}

void Leadership::update_tallies(TimePoint now) {
  const auto& view = views_.plan_view();
  if (!view || !view->first.planned) return;
  if (confirm_quarantines_) confirm_quarantines();
  const core::PlanRecord& plan = view->first;
  if (plan.verdict == core::Verdict::failed) return;  // sticky until an operator clears it
  core::PlanRecord next = plan;
  next.term = term_;
  // Count every split record that exists: after seeding that is at least the planned set, and a
  // stray record (an operator's, an earlier plan's) is work the fleet assigns too, so the
  // tallies can never exceed the count.
  // Residuals their parents name count before they are runnable: the job is not complete while
  // one waits to be made runnable.
  next.split_count = std::max<std::uint64_t>(
      splits_counted(), plan.finality == core::Finality::final ? plan.split_count : 0);
  set_tallies(next);
  ctx_.metrics.set_job_tallies(next.split_count, next.completed, next.quarantined);
  if (next == plan) return;
  const bool verdict_changed = next.verdict != plan.verdict;
  if (!verdict_changed && now - last_tally_write_ < kTallyInterval) return;
  if (!requeues_settled()) return;
  if (write_plan(next)) last_tally_write_ = now;
}

}  // namespace etlc::runtime
