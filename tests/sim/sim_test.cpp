// The simulation suite (ctest label "sim"): a fixed set of seeds across the scenario mixes,
// determinism, proof that the checker can fail, the seeds of every bug the simulator found, and
// tests of the simulator's own machinery (clocks, watch reordering).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "etlc/fault_injecting_store.hpp"
#include "etlc/memory_store.hpp"
#include "history.hpp"
#include "recording_store.hpp"
#include "rng.hpp"
#include "scenario.hpp"
#include "sim_clock.hpp"
#include "sim_store.hpp"
#include "world.hpp"

namespace etlc::sim {
namespace {

RunResult run(std::uint64_t seed, const std::string& scenario, const std::string& faults = "",
              bool full_trace = false) {
  RunOptions opts;
  opts.keep_full_trace = full_trace;
  return run_simulation(make_params(seed, scenario, faults), opts);
}

// The seed of a bug as it was found: before the simulated lanes answered split requests, which
// the fault mixes now draw per seed (a run with its lanes cutting is another run).
RunResult regress(std::uint64_t seed, const std::string& scenario, const std::string& faults = "") {
  std::string off = faults;
  off.append(off.empty() ? "split=0" : ",split=0");
  return run(seed, scenario, off);
}

// --- every scenario, a fixed set of seeds --------------------------------------------------------

struct Sweep {
  const char* scenario;
  std::uint64_t from;
  std::uint64_t count;
};

void PrintTo(const Sweep& s, std::ostream* os) {
  *os << s.scenario << " seeds " << s.from << ".." << s.from + s.count - 1;
}

class SimSweep : public ::testing::TestWithParam<Sweep> {};

TEST_P(SimSweep, EveryInvariantHolds) {
  const Sweep& s = GetParam();
  for (std::uint64_t seed = s.from; seed < s.from + s.count; ++seed) {
    const RunResult r = run(seed, s.scenario);
    ASSERT_TRUE(r.ok()) << r.report();
    // The run reached the end of every phase (it did not stop early without a verdict).
    EXPECT_GE(r.stats.converged_after, 0) << r.report();
    EXPECT_GE(r.stats.completed_after, 0) << r.report();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, SimSweep,
    ::testing::Values(Sweep{"calm", 101, 3}, Sweep{"crash", 201, 5}, Sweep{"pause", 301, 5},
                      Sweep{"store", 401, 5}, Sweep{"watch", 501, 5}, Sweep{"stale", 601, 5},
                      Sweep{"leader", 701, 5}, Sweep{"skew", 801, 4}, Sweep{"open", 901, 5},
                      Sweep{"poison", 1001, 5}, Sweep{"chaos", 1101, 6}, Sweep{"operator", 1201, 6},
                      Sweep{"lone", 1301, 6}, Sweep{"tail", 1401, 4}, Sweep{"straggler", 1501, 4}),
    [](const ::testing::TestParamInfo<Sweep>& p) { return std::string(p.param.scenario); });

// --- the faults a scenario promises are really injected
// -------------------------------------------

TEST(SimFaults, ChaosInjectsEveryKindOfFault) {
  RunStats total;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const RunResult r = run(seed, "chaos");
    ASSERT_TRUE(r.ok()) << r.report();
    total.crashes += r.stats.crashes;
    total.pauses += r.stats.pauses;
    total.partitions += r.stats.partitions;
    total.watch_drops += r.stats.watch_drops;
    total.slow_watches += r.stats.slow_watches;
    total.stale_episodes += r.stats.stale_episodes;
    total.late_writes += r.stats.late_writes;
  }
  EXPECT_GT(total.crashes, 0u);
  EXPECT_GT(total.pauses, 0u);
  EXPECT_GT(total.partitions, 0u);
  EXPECT_GT(total.watch_drops, 0u);
  EXPECT_GT(total.slow_watches, 0u);
  EXPECT_GT(total.stale_episodes, 0u);
  EXPECT_GT(total.late_writes, 0u);
}

TEST(SimFaults, LeaderCrashesLandMidPlanAndMidPublish) {
  std::uint64_t mid_plan = 0, mid_publish = 0;
  // Two dozen seeds: a crash lands mid-publish only when the leader publishes within the few
  // store operations it has left, which the leader's own (worker) traffic makes rarer (seeds
  // 1-12 had none once a release stopped costing a second delete and a read; 1-24 have two).
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    const RunResult r = run(seed, "leader");
    ASSERT_TRUE(r.ok()) << r.report();
    mid_plan += r.stats.mid_plan;
    mid_publish += r.stats.mid_publish;
  }
  EXPECT_GT(mid_plan, 0u);
  EXPECT_GT(mid_publish, 0u);
}

// The operator damages every kind of record, and the fleet rebuilds split records, parks splits
// whose spec it lost and requeues them once a repair re-plan rewrote the spec. Without splitting:
// a residual parked for its spec cannot be requeued by a re-plan (the planner does not list
// residuals; an open finding in docs/testing.md), so with cuts `requeued` may fall short.
TEST(SimFaults, OperatorDamageIsInjectedAndHealed) {
  HistoryStats total;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const RunResult r = run(seed, "operator", "split=0");
    ASSERT_TRUE(r.ok()) << r.report();
    total.operator_writes += r.history.operator_writes;
    total.rebuilds += r.history.rebuilds;
    total.parked += r.history.parked;
    total.requeued += r.history.requeued;
  }
  EXPECT_GT(total.operator_writes, 20u);
  EXPECT_GT(total.rebuilds, 0u);
  EXPECT_GT(total.parked, 0u);
  EXPECT_EQ(total.requeued, total.parked);
}

// A job of one member: after a partition longer than its lease it must take leadership back
// from its own earlier session (nobody else can), or nothing is assigned again (issue 18).
TEST(SimRegression, ALoneMemberRecoversFromAnOutageLongerThanItsLease_Lone) {
  std::uint64_t partitions = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const RunResult r = regress(seed, "lone");
    ASSERT_TRUE(r.ok()) << r.report();
    EXPECT_EQ(r.params.members, 1);
    partitions += r.stats.partitions;
  }
  EXPECT_GT(partitions, 0u);
}

// The operator twice overwrote a live member's own session record; the member replaced it, but
// that renewal did not move the deadline its lanes check: a lane stopped as if the session had
// lapsed while the control loop kept the split, and nobody worked it again.
TEST(SimRegression, ReplacingAnUnreadableSessionRenewsItForTheLanesToo_Operator197) {
  const RunResult r = regress(197, "operator");
  EXPECT_TRUE(r.ok()) << r.report();
}

// --- determinism
// ----------------------------------------------------------------------------------

// Small fleets and short fault phases keep the full traces cheap; every fault still fires.
constexpr const char* kSmall = "members=4,splits=10,fault_s=12";

TEST(SimDeterminism, OneSeedGivesTheSameTraceEventForEvent) {
  for (const char* scenario : {"chaos", "stale", "open"}) {
    const RunResult a = run(7, scenario, kSmall, true);
    const RunResult b = run(7, scenario, kSmall, true);
    ASSERT_GT(a.full.size(), 1000u) << scenario;
    EXPECT_EQ(a.trace_hash, b.trace_hash) << scenario;
    ASSERT_EQ(a.full.size(), b.full.size()) << scenario;
    for (std::size_t i = 0; i < a.full.size(); ++i) {
      ASSERT_TRUE(a.full[i] == b.full[i])
          << scenario << ": traces diverge at event " << i << ":\n  "
          << Trace::format(a.full[i], a.actors) << "\n  " << Trace::format(b.full[i], b.actors);
    }
    EXPECT_EQ(a.virtual_ns, b.virtual_ns);
  }
}

TEST(SimDeterminism, DifferentSeedsGiveDifferentRuns) {
  EXPECT_NE(run(7, "chaos", kSmall).trace_hash, run(8, "chaos", kSmall).trace_hash);
}

TEST(SimDeterminism, ReplayingARunOfAllUnderItsScenarioNameIsTheSameRun) {
  const RunParams p = make_params(42, "all", kSmall);
  const RunResult a = run_simulation(p);
  const RunResult b = run(42, p.scenario, kSmall);
  EXPECT_EQ(a.trace_hash, b.trace_hash) << "replay command: " << replay_command(p);
}

// --- the checker can fail
// -------------------------------------------------------------------------

// With the epoch check on commits switched off (UnsafeTestHooks::commit_without_fence), a
// zombie that resumes after its split was taken over overwrites the new owner's record. The
// checker must see it within a bounded number of seeds; the same seed with the fence on passes.
// A protocol assertion (ETLC_ASSERT) failing inside a run is a finding like an invariant: the
// run stops and its report names the seed and the replay command.
TEST(SimChecker, AFailedProtocolAssertionIsAFindingWithItsSeed) {
#if !ETLC_ASSERTIONS
  GTEST_SKIP() << "ETLC_ASSERT is compiled out in this build (ETLC_ASSERTIONS=OFF, the default "
                  "in Release): there is no assertion to fail; the campaign build "
                  "(docs/testing.md) turns it on in Release.";
#endif
  RunParams p = make_params(11, "calm", "");
  RunOptions o;
  o.assert_in_planner = true;
  const RunResult r = run_simulation(p, o);
  ASSERT_TRUE(r.violation.has_value());
  EXPECT_EQ(r.violation->invariant, 0);
  EXPECT_NE(r.violation->message.find("protocol assertion failed"), std::string::npos);
  EXPECT_NE(r.report().find("seed 11"), std::string::npos) << r.report();
  EXPECT_NE(r.report().find("replay:"), std::string::npos);
  EXPECT_TRUE(run_simulation(p).ok());  // the same seed without the failing assertion
}

TEST(SimChecker, CommitsWithoutTheFenceAreCaught) {
  constexpr std::uint64_t kSeeds = 40;
  std::optional<RunResult> caught;
  for (std::uint64_t seed = 1; seed <= kSeeds && !caught; ++seed) {
    RunResult r = run(seed, "zombie", "unsafe=1");
    if (!r.ok()) caught = std::move(r);
  }
  ASSERT_TRUE(caught.has_value()) << "no violation in " << kSeeds
                                  << " zombie seeds with the fence off";
  EXPECT_TRUE(caught->violation->invariant == 1 || caught->violation->invariant == 2)
      << caught->report();
  const RunResult fenced = run(caught->params.seed, "zombie");
  EXPECT_TRUE(fenced.ok()) << fenced.report();
}

// With the sink's fence off (the sink accepts a batch whatever its epoch), a zombie's batch after
// a takeover writes records the new owner writes again: invariant 7 must catch it, and the same
// seed with the fence passes.
TEST(SimChecker, SinkWritesWithoutTheFenceAreCaught) {
  constexpr std::uint64_t kSeeds = 40;
  std::optional<RunResult> caught;
  for (std::uint64_t seed = 1; seed <= kSeeds && !caught; ++seed) {
    RunResult r = run(seed, "zombie", "unsafe_sink=1");
    if (!r.ok()) caught = std::move(r);
  }
  ASSERT_TRUE(caught.has_value()) << "no violation in " << kSeeds
                                  << " zombie seeds with the sink fence off";
  EXPECT_EQ(caught->violation->invariant, 7) << caught->report();
  EXPECT_NE(caught->violation->message.find("written to the sink twice"), std::string::npos)
      << caught->report();
  const RunResult fenced = run(caught->params.seed, "zombie");
  EXPECT_TRUE(fenced.ok()) << fenced.report();
}

// Lanes of half the processes stop when their session may have lapsed (as the Driver's do) and
// are held to it: a call or sink write only while their session is live in the store. With that
// check skipped by those lanes, a woken zombie writes at once: invariant 8 must catch it.
TEST(SimChecker, LanesThatIgnoreTheLapseAreCaught) {
  constexpr std::uint64_t kSeeds = 40;
  std::optional<RunResult> caught;
  for (std::uint64_t seed = 1; seed <= kSeeds && !caught; ++seed) {
    RunResult r = run(seed, "zombie", "unsafe_lapse=1");
    if (!r.ok()) caught = std::move(r);
  }
  ASSERT_TRUE(caught.has_value()) << "no violation in " << kSeeds << " zombie seeds";
  EXPECT_EQ(caught->violation->invariant, 8) << caught->report();
  const RunResult checked = run(caught->params.seed, "zombie");
  EXPECT_TRUE(checked.ok()) << checked.report();
  EXPECT_GT(checked.sink.lapsed_lanes, 0u) << "the lapse check stopped lanes";
}

// The sink's own faults are injected and survived: transactions that fail, unknown outcomes
// (some landing late, some found landed on a re-read), refusals of zombies' batches answered
// fenced by the coordination store, grants resumed from the sink's watermark.
TEST(SimFaults, TheSinkFailsLosesAndDelaysTransactionsAndTheFenceRefusesZombies) {
  SinkStats total;
  // A zombie reaches the sink only when its pause outlasts its session's deadline by less than
  // the takeover takes, which is rare: 4 of the `pause` seeds 25..40 do (28, 32, 34, 38).
  std::vector<std::pair<std::uint64_t, const char*>> runs;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) runs.emplace_back(seed, "store");
  for (std::uint64_t seed = 25; seed <= 40; ++seed) runs.emplace_back(seed, "pause");
  for (const auto& [seed, scenario] : runs) {
    const RunResult r = run(seed, scenario, "sink_fail=0.03,sink_unknown=0.03");
    ASSERT_TRUE(r.ok()) << r.report();
    total.failed += r.sink.failed;
    total.unknown += r.sink.unknown;
    total.late += r.sink.late;
    total.settled_landed += r.sink.settled_landed;
    total.refused += r.sink.refused;
    total.zombie_refusals += r.sink.zombie_refusals;
    total.sink_resumes += r.sink.sink_resumes;
    total.lapsed_lanes += r.sink.lapsed_lanes;
    EXPECT_EQ(r.history.duplicates, 0u) << "a record reached the sink twice";
  }
  EXPECT_GT(total.failed, 0u);
  EXPECT_GT(total.unknown, 0u);
  EXPECT_GT(total.late, 0u);
  EXPECT_GT(total.settled_landed, 0u);
  EXPECT_GT(total.refused, 0u);
  EXPECT_GT(total.zombie_refusals, 0u);
  EXPECT_GT(total.sink_resumes, 0u);
  EXPECT_GT(total.lapsed_lanes, 0u);
}

// With lanes that cut one record below their next (giving away a record they emitted), invariant
// 3 must catch the cut; the same seed with honest cuts passes.
TEST(SimChecker, CutsGivingAwayEmittedRecordsAreCaught) {
  std::optional<RunResult> caught;
  for (std::uint64_t seed = 1; seed <= 10 && !caught; ++seed) {
    RunResult r = run(seed, "straggler", "unsafe_cut=1");
    if (!r.ok()) caught = std::move(r);
  }
  ASSERT_TRUE(caught.has_value()) << "no violation in 10 straggler seeds";
  EXPECT_EQ(caught->violation->invariant, 3) << caught->report();
  const RunResult honest = run(caught->params.seed, "straggler");
  EXPECT_TRUE(honest.ok()) << honest.report();
  EXPECT_GT(honest.history.cuts, 0u);
}

// --- dynamic splitting (issue 17) ----------------------------------------------------------------

// The straggler is cut, every residual the parents name is made runnable and completes (the end
// of run checks, invariant 9, passed), and the job ends sooner than with lanes that refuse.
TEST(SimSplit, StragglersAreCutAndEveryNamedResidualCompletes) {
  double cut_s = 0, refused_s = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const RunResult r = run(seed, "straggler");
    ASSERT_TRUE(r.ok()) << r.report();
    EXPECT_GT(r.history.cuts, 0u) << "seed " << seed;
    EXPECT_EQ(r.history.flips, r.history.cuts) << "seed " << seed;
    const RunResult off = run(seed, "straggler", "split=0");
    ASSERT_TRUE(off.ok()) << off.report();
    EXPECT_EQ(off.history.cuts, 0u);
    EXPECT_EQ(off.stats.cuts_made, 0u);
    cut_s += static_cast<double>(r.stats.completed_after);
    refused_s += static_cast<double>(off.stats.completed_after);
  }
  EXPECT_LT(cut_s, refused_s);
}

// A process dying part-way through a cut (after the residual's spec, after its record, or with
// the parent's CAS landed) leaves a residual nobody names, which the leader deletes, or a named
// one it makes runnable; the job completes either way.
TEST(SimSplit, CrashesMidCutLeaveOrphansTheLeaderDeletes) {
  // Which seed arms a crash mid-cut shifts with any change to the protocol's timing, so the test
  // searches a bounded range of each fault scenario instead of naming seeds.
  for (const std::string scenario : {"crash", "chaos"}) {
    std::uint64_t orphans = 0, crashes = 0;
    for (std::uint64_t seed = 1; seed <= 40 && (orphans == 0 || crashes == 0); ++seed) {
      const RunResult r = run(seed, scenario);
      ASSERT_TRUE(r.ok()) << r.report();
      orphans += r.history.orphans;
      crashes += r.stats.cut_crashes;
    }
    EXPECT_GT(orphans, 0u) << "no residual deleted unnamed in 40 " << scenario << " seeds";
    EXPECT_GT(crashes, 0u) << "no process died mid-cut in 40 " << scenario << " seeds";
  }
}

TEST(SimChecker, AViolationReportNamesSeedInvariantReplayAndTrace) {
  std::optional<RunResult> caught;
  for (std::uint64_t seed = 1; seed <= 40 && !caught; ++seed) {
    RunResult r = run(seed, "zombie", "unsafe=1");
    if (!r.ok()) caught = std::move(r);
  }
  ASSERT_TRUE(caught.has_value());
  const std::string report = caught->report();
  EXPECT_NE(report.find(fmt::format("seed {}", caught->params.seed)), std::string::npos);
  EXPECT_NE(report.find(fmt::format("invariant {}", caught->violation->invariant)),
            std::string::npos);
  EXPECT_NE(report.find(fmt::format("etlc-sim --seeds 1 --from {} --scenario zombie --faults "
                                    "'unsafe=1' --trace",
                                    caught->params.seed)),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("last "), std::string::npos);
  EXPECT_GT(caught->tail.size(), 10u);
}

// --- regressions: the seeds of the bugs the simulator found (see docs/testing.md)
// -----------------

// The control loop busy-spun once a claim-retry deadline of a split no longer assigned had passed.
TEST(SimRegression, IdleMemberSleeps_Calm1) {
  const RunResult r = regress(1, "calm");
  EXPECT_TRUE(r.ok()) << r.report();
  EXPECT_LT(r.stats.steps, 20'000u) << "the fleet should sleep between events";
}

// A re-claim right after fail()/release adopted the lease it had just deleted (its lease view
// lagged), so it held the split without a lease and a peer took it over from a live owner.
TEST(SimRegression, ReclaimCreatesItsLease_Poison4_11_19) {
  for (std::uint64_t seed : {4, 11, 19}) {
    const RunResult r = regress(seed, "poison");
    EXPECT_TRUE(r.ok()) << r.report();
    EXPECT_EQ(r.history.claims_without_lease, 0u) << "seed " << seed;
  }
}

// A claim whose record CAS failed with 'unavailable' left its lease behind for ever.
TEST(SimRegression, OrphanedLeaseIsGivenBack_Store186) {
  const RunResult r = regress(186, "store");
  EXPECT_TRUE(r.ok()) << r.report();
}

// An election whose take_term() hit a store error left a member that neither led nor let anyone
// else lead.
TEST(SimRegression, HalfDoneElectionIsFinished_Store201) {
  const RunResult r = regress(201, "store");
  EXPECT_TRUE(r.ok()) << r.report();
}

// A claim-time quarantine trusted a lagging lease view and parked a live owner's split.
TEST(SimRegression, QuarantineOnlyAfterTakingTheLease_Chaos10121) {
  const RunResult r = regress(10121, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// After an unknown outcome, a stale re-read made a commit that had landed report 'fenced'.
TEST(SimRegression, StaleReadNeverTurnsALandedCommitIntoFenced_Chaos11930_16828) {
  for (std::uint64_t seed : {11930, 16828}) {
    const RunResult r = regress(seed, "chaos");
    EXPECT_TRUE(r.ok()) << r.report();
  }
}

// A commit's CAS had an unknown outcome and landed, and the re-read came from a stale replica
// that did not have split.s0012 yet: an absent record made write_record() report 'fenced'
// although its write had landed (invariant 2).
TEST(SimRegression, StaleAbsentReadNeverTurnsALandedCommitIntoFenced_Chaos101680) {
  const RunResult r = regress(101680, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// A claim CAS that landed late named a live member that never held the split; taking it over
// consumed a delivery attempt.
TEST(SimRegression, PhantomOwnerTakeoverConsumesNoAttempt_Chaos12851) {
  const RunResult r = regress(12851, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// A renewal adopted from a stale read (or an unknown-outcome renewal adopted later) counted as
// a fresh renewal: the member thought it was live while peers expired it with splits in hand.
TEST(SimRegression, SelfFencingPrecedesExpiry_Chaos104658_107487_155977) {
  for (std::uint64_t seed : {104658, 107487, 155977}) {
    const RunResult r = regress(seed, "chaos");
    EXPECT_TRUE(r.ok()) << r.report();
  }
}

// The waiver for a takeover from a live phantom owner trusted the member view: a crashed owner
// whose expiry the claimer's session watch had not delivered yet looked live, and its split was
// taken over without consuming an attempt.
TEST(SimRegression, TakeoverFromADeadOwnerConsumesAnAttempt_Chaos78714) {
  const RunResult r = regress(78714, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// The orphan sweep refreshed the lease view from a stale read, putting an older revision (naming
// another member) over its own lease: the member waited for ever on a lease that was its own.
TEST(SimRegression, TheLeaseViewNeverGoesBackInTime_Stale21364) {
  const RunResult r = regress(21364, "stale");
  EXPECT_TRUE(r.ok()) << r.report();
}

// The leader's write of assign.m03 had an unknown outcome and landed late, after the leader had
// moved that split to another member and (its view still showing the old record) seen no need to
// rewrite m03: two members were assigned one split and the leader never republished.
TEST(SimRegression, ALateLandingAssignmentIsRepublished_Chaos500489) {
  const RunResult r = regress(500489, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// The orphan-lease sweep retried a wrong (stale-read) lease revision for ever.
TEST(SimRegression, OrphanSweepRefreshesTheLeaseRevision_Chaos60217_60348) {
  for (std::uint64_t seed : {60217, 60348}) {
    const RunResult r = regress(seed, "chaos");
    EXPECT_TRUE(r.ok()) << r.report();
  }
}

// After an operator deleted split.s0001, the leader's repair read it from a stale replica (the
// record before the delete), took it for repaired and never rebuilt it: the job never completed.
TEST(SimRegression, AStaleReadDoesNotMakeADeletedSplitRecordLookRepaired_Chaos1957) {
  const RunResult r = regress(1957, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// The operator deleted split.s0014 (epoch 0, never claimed) during a re-plan; the new leader,
// which never saw the record, seeded it again at epoch 0. No tenancy existed to fence off, so
// that is no violation (the checker used to call it a rebuild at a stale epoch).
TEST(SimRegression, ReseedingANeverClaimedSplitAtEpochZeroIsNoRebuild_Operator26547) {
  const RunResult r = regress(26547, "operator");
  EXPECT_TRUE(r.ok()) << r.report();
  EXPECT_GT(r.history.rebuilds, 0u);
}

// The operator deleted split.s0000 (epoch 1, held by a paused member) before the next leader's
// views existed; that leader's repair re-plan seeded it again at epoch 0, below the tenancy it
// had (seeding in a later term now starts above the term floor: core::seeded_epoch).
TEST(SimRegression, ASplitDeletedBeforeTheLeaderLookedIsSeededAboveItsEpochs_Operator3791) {
  for (const auto& [seed, scenario] : std::vector<std::pair<std::uint64_t, std::string>>{
           {3791, "operator"}, {26875, "operator"}}) {
    const RunResult r = regress(seed, scenario);
    EXPECT_TRUE(r.ok()) << r.report();
  }
}

// A split parked for its spec and requeued kept the park's reason; when a member's crashes later
// quarantined it, the record looked parked again, for a re-plan to requeue (a poison split
// requeued for ever). The quarantine now says why it happened.
TEST(SimRegression, AQuarantineAfterARequeuedParkIsNoPark_Lone3291) {
  for (const auto& [seed, scenario] :
       std::vector<std::pair<std::uint64_t, std::string>>{{3291, "lone"}, {4794, "operator"}}) {
    const RunResult r = regress(seed, scenario);
    EXPECT_TRUE(r.ok()) << r.report();
  }
}

// A lone member restarted after the operator deleted a split record it held; its new term's
// listing of the missing records hit a store error once and was never retried: the split was
// never seeded again (find_missing_splits now counts as done only when it got through).
TEST(SimRegression, AFailedListingOfMissingSplitsIsRetried_Lone40626) {
  const RunResult r = regress(40626, "lone");
  EXPECT_TRUE(r.ok()) << r.report();
}

// A parked split was requeued; the next leader's term write carried the old tallies (one
// quarantined) over. Carried tallies are no count (the checker judged them as one).
TEST(SimRegression, TalliesCarriedOverATermBumpAreNoCount_Chaos41363) {
  const RunResult r = regress(41363, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// After the job completed, the operator destroyed two completed split records; a new leader's
// split view was short of the plan, so it waited before recounting and the `complete` verdict it
// carried over stood while one of them was rebuilt runnable: a restarted member reported
// AllComplete. The leader now recounts before waiting (a short view counts less, never more).
TEST(SimRegression, AShortSplitViewRecountsBeforeItWaits_Operator18617) {
  const RunResult r = regress(18617, "operator");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 20: a fenced owner adopted its split on a stale read of its own old tenancy, after the
// leader had rebuilt the record (the adopt is now a no-op CAS at the revision read).
TEST(SimRegression, AnAdoptIsConfirmedByACas_Chaos13509) {
  const RunResult r = regress(13509, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 21: a parked split was requeued on a stale read of its damaged spec.
TEST(SimRegression, ARequeueNeedsASpecConfirmedCurrent_Chaos18020) {
  const RunResult r = regress(18020, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 25: a claimer parked a requeued split after a stale read of its damaged spec (the leader had
// rewritten it). A park now proves the damage current by erasing the value at the revision read.
TEST(SimRegression, AParkNeedsTheSpecDamageProvenCurrent_Chaos29276) {
  const RunResult r = regress(29276, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 26: a stale point read put a deleted lease into a claimer's view just after the key's watch
// opened (its "absent" snapshot could not correct it), and the claimer waited on it for ever. The
// claimer now reads the lease again after waiting a lease on it.
TEST(SimRegression, AWaitedLeaseIsReadAgain_Chaos15393) {
  const RunResult r = regress(15393, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 27: a plan write with an unknown outcome landed after the leader had requeued a parked
// split, tallying a quarantine the store no longer held. A requeue now waits until no plan write
// is in doubt.
TEST(SimRegression, ARequeueWaitsForEveryPlanWriteInDoubt_Chaos39939) {
  const RunResult r = regress(39939, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 28: a stale claimer's lease stayed beside a released record at the lease's own epoch (its
// give-back had an unknown outcome and its view lost the entry); the orphan rule only knew leases
// above the record's epoch, so the assignee waited for ever. Any lease the record does not name
// is now an orphan once it lasts a lease.
TEST(SimRegression, ALeaseTheRecordDoesNotNameIsAnOrphan_Chaos5747) {
  const RunResult r = regress(5747, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 22: a worker watching only its own keys judged a dead owner live on a stale point read, so
// its takeover consumed no attempt (it now follows the owner's session: view and read agree).
TEST(SimRegression, AWorkerJudgesAPeerByItsSessionViewAndARead_Chaos16550_25134_43135) {
  for (std::uint64_t seed : {16550, 25134, 43135}) {
    const RunResult r = regress(seed, "chaos");
    EXPECT_TRUE(r.ok()) << r.report();
  }
}

// Bug 23: two rebuilds in one term reached the epoch a memoryless rebuild of the next term took.
TEST(SimRegression, OneTermsRebuildsStayBelowTheNextTermsFloor_Operator15832) {
  const RunResult r = regress(15832, "operator");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 24: a lease create that landed late, unseen by its sender, held a split for ever.
TEST(SimRegression, AnOrphanLeaseOfALiveMemberIsRemoved_Chaos29254) {
  const RunResult r = regress(29254, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 32: a claimer's stale point read showed the owner's session under its old nonce while the
// view had its new one: the owner, live, was taken for dead and its split quarantined. A takeover
// now waits until the view and the read agree.
TEST(SimRegression, ATakeoverWaitsWhileTheViewAndAReadDisagree_Chaos6848) {
  const RunResult r = regress(6848, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 38: the leader requeued a parked split and was deposed at once; the standby took over with
// warm split views that had not seen the requeue yet, and its first tallies counted a quarantine
// the store no longer held. A leader elected from warm views reads its quarantines first.
TEST(SimRegression, WarmViewsConfirmTheirQuarantinesBeforeTheFirstTallies_Operator28069) {
  const RunResult r = run(28069, "operator", "split=1");
  EXPECT_TRUE(r.ok()) << r.report();
}

// Bug 39: a simulated lane cut while a sink batch was in doubt; the batch had landed with the old
// end, ahead of the cut's commit, and the next owner resumed from the sink's progress past the
// cut (a duplicate in the exactly-once sink). Lanes now settle or decline, as the contract says.
TEST(SimRegression, NoCutWhileASinkBatchIsInDoubt_Chaos7511) {
  const RunResult r = regress(7511, "chaos");
  EXPECT_TRUE(r.ok()) << r.report();
}

// --- the simulator's machinery
// --------------------------------------------------------------------

// Leader repairs after operator damage in a job with residuals (dynamic splitting): a residual's
// record rebuilt from its spec as runnable though unnamed (318), a planned record deleted while no
// leader watched left missing because residuals made up for it in the count (282), a parent
// rebuilt from its spec without its residuals (131).
TEST(SimRegression, RepairsKeepResidualsRight_Operator318_282_131) {
  // 22985: a repair re-plan rebuilt a parent whose spec had been deleted from the plan's spec,
  // without its residuals (it now rebuilds as healing does, with the cuts). 34533: a residual
  // whose record and spec were both destroyed could not be rebuilt, and the re-plan's header
  // counted one split too few and wrote `complete` (it is now parked for its spec: stalled).
  // 44943: an unnamed residual's damaged spec with no record is removed, not rebuilt. 649: a
  // pending record garbled was rebuilt at the epoch it had (the leader looked for it in the
  // runnable splits only).
  for (std::uint64_t seed : {318, 282, 131, 22985, 34533, 44943, 649}) {
    const RunResult r = run(seed, "operator", "split=1");
    EXPECT_TRUE(r.ok()) << r.report();
    EXPECT_GT(r.history.cuts, 0u) << "seed " << seed;
  }
}

TEST(SimClockTest, VirtualAtInvertsLocalAt) {
  VirtualTime vt;
  for (std::int64_t ppm : {-30'000, -1'999, 0, 7, 2'000, 99'999}) {
    SimClock c(vt, 1'000, 3'600'000'000'000, ppm);
    for (VirtualNs v :
         {VirtualNs{1'000}, VirtualNs{1'001}, VirtualNs{123'456'789}, VirtualNs{987'654'321'012}}) {
      const Clock::time_point local(Clock::duration(c.local_at(v)));
      const VirtualNs back = c.virtual_at(local);
      EXPECT_LE(back, v) << ppm;
      EXPECT_GE(c.local_at(back), c.local_at(v)) << ppm;
      EXPECT_LT(c.local_at(back - 1), c.local_at(v)) << ppm;
    }
  }
}

TEST(SimClockTest, ClocksDriftAtTheirRate) {
  VirtualTime vt;
  SimClock fast(vt, 0, 0, 10'000), slow(vt, 0, 0, -10'000);
  EXPECT_EQ(fast.local_at(kNsPerS), kNsPerS + kNsPerS / 100);
  EXPECT_EQ(slow.local_at(kNsPerS), kNsPerS - kNsPerS / 100);
}

TEST(SimRngTest, StreamsAreReproducibleAndIndependent) {
  Rng a = Rng::stream(5, 1), b = Rng::stream(5, 1), c = Rng::stream(5, 2);
  int same = 0;
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    same += x == c.next() ? 1 : 0;
  }
  EXPECT_EQ(same, 0);
  Rng r(9);
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t v = r.range(-3, 3);
    EXPECT_GE(v, -3);
    EXPECT_LE(v, 3);
  }
}

class NoFleet final : public FleetView {
 public:
  const SimClock* clock_of(std::int32_t) const override { return nullptr; }
  bool running_since(std::int32_t, VirtualNs) const override { return false; }
  std::size_t held_count(std::int32_t) const override { return 0; }
};

// Slow watches deliver each key's events in order, the snapshot before caught_up and everything
// after it, but reorder events of different keys.
TEST(SimStoreTest, SlowWatchKeepsPerKeyOrderButReordersAcrossKeys) {
  RunParams params;
  VirtualTime time;
  Trace trace(0);
  NoFleet fleet;
  History history(params, time, trace, fleet);
  Rng rng(3);
  std::uint64_t call = 0;
  SimEnv env;
  env.time = &time;
  env.rng = &rng;
  env.trace = &trace;
  env.history = &history;
  env.current_call = &call;
  env.schedule_late = [](LateWrite) {};
  auto mem = std::make_shared<MemoryStore>();
  auto rec = std::make_shared<RecordingStore>(mem, history);
  auto fis = std::make_shared<FaultInjectingStore>(rec, 0);
  SimStore store(env, 0, "w", nullptr, fis, rec);
  for (const char* k : {"k.a", "k.b"}) mem->create(k, "0");
  store.faults.slow_watch_until = 100 * kNsPerS;
  store.faults.slow_watch_max = 50 * kNsPerMs;
  auto watch = store.watch("k.", {});
  std::map<std::string, Revision> last;
  const char* keys[] = {"k.a", "k.b", "k.c"};
  for (int i = 0; i < 300; ++i) {
    time.advance_to(time.now() + kNsPerMs);
    const char* k = keys[rng.below(3)];
    auto cur = mem->get(k);
    if (cur) {
      mem->update(k, std::to_string(i), cur->revision);
    } else {
      mem->create(k, std::to_string(i));
    }
    store.pump();
  }
  time.advance_to(time.now() + kNsPerS);
  std::vector<WatchEvent> events;
  watch->poll(events, 100'000);
  ASSERT_GT(events.size(), 300u);
  std::size_t snapshot = 0;
  bool caught_up = false, reordered = false;
  Revision prev = 0;
  for (const auto& e : events) {
    if (e.kind == WatchEvent::Kind::caught_up) {
      EXPECT_FALSE(caught_up);
      caught_up = true;
      EXPECT_EQ(snapshot, 2u);
      continue;
    }
    if (!caught_up) ++snapshot;
    EXPECT_GT(e.revision, last[e.key]) << e.key;
    last[e.key] = e.revision;
    if (caught_up && e.revision < prev) reordered = true;
    if (caught_up) prev = e.revision;
  }
  EXPECT_TRUE(caught_up);
  EXPECT_TRUE(reordered) << "a slow watch should reorder events of different keys";
}

TEST(SimStoreTest, CrashPointLandsTheKthOperationThenFailsEverything) {
  RunParams params;
  VirtualTime time;
  Trace trace(0);
  NoFleet fleet;
  History history(params, time, trace, fleet);
  Rng rng(3);
  std::uint64_t call = 0;
  SimEnv env;
  env.time = &time;
  env.rng = &rng;
  env.trace = &trace;
  env.history = &history;
  env.current_call = &call;
  env.schedule_late = [](LateWrite) {};
  auto mem = std::make_shared<MemoryStore>();
  auto rec = std::make_shared<RecordingStore>(mem, history);
  auto fis = std::make_shared<FaultInjectingStore>(rec, 0);
  SimStore store(env, 0, "w", nullptr, fis, rec);
  store.faults.crash_after = 2;
  EXPECT_TRUE(store.create("x.a", "1").ok);
  EXPECT_THROW(store.create("x.b", "1"), StoreError);  // the crash point: lands, then dies
  EXPECT_TRUE(store.faults.crash_hit);
  EXPECT_TRUE(mem->get("x.b").has_value());
  EXPECT_THROW(store.create("x.c", "1"), StoreError);
  EXPECT_FALSE(mem->get("x.c").has_value());
  EXPECT_THROW(store.get("x.a"), StoreError);
}

// One SimStore over a shared MemoryStore, as the World builds it, for the store's own tests.
struct SimStoreRig {
  explicit SimStoreRig(std::uint64_t seed) : rng(seed) {}
  // Called while the members are initialised in order: `store` copies the environment.
  SimEnv make_env() {
    SimEnv e;
    e.time = &time;
    e.rng = &rng;
    e.trace = &trace;
    e.history = &history;
    e.current_call = &call;
    e.schedule_late = [this](LateWrite lw) { late.push_back(std::move(lw)); };
    return e;
  }
  RunParams params;
  VirtualTime time;
  Trace trace{0};
  NoFleet fleet;
  History history{params, time, trace, fleet};
  Rng rng;
  std::uint64_t call = 0;
  std::vector<LateWrite> late;
  SimEnv env = make_env();
  std::shared_ptr<MemoryStore> mem = std::make_shared<MemoryStore>();
  std::shared_ptr<RecordingStore> rec = std::make_shared<RecordingStore>(mem, history);
  std::shared_ptr<FaultInjectingStore> fis = std::make_shared<FaultInjectingStore>(rec);
  SimStore store{env, 0, "w", nullptr, fis, rec};
};

// A key watch under slow-watch delays: only its keys, the snapshot before caught_up, each key
// in order, keys reordered; break_watches loses what was not delivered.
TEST(SimStoreTest, SlowKeyWatchKeepsPerKeyOrderOfItsKeysOnly) {
  SimStoreRig rig(5);
  rig.mem->create("k.a", "0");
  rig.store.faults.slow_watch_until = 100 * kNsPerS;
  rig.store.faults.slow_watch_max = 50 * kNsPerMs;
  const std::vector<std::string> watched = {"k.c", "k.a"};
  auto watch = rig.store.watch_keys(watched, {});
  auto doomed = rig.store.watch_keys(watched, {});
  const char* keys[] = {"k.a", "k.b", "k.c"};
  for (int i = 0; i < 300; ++i) {
    rig.time.advance_to(rig.time.now() + kNsPerMs);
    const char* k = keys[rig.rng.below(3)];
    auto cur = rig.mem->get(k);
    if (cur) {
      rig.mem->update(k, std::to_string(i), cur->revision);
    } else {
      rig.mem->create(k, std::to_string(i));
    }
    rig.store.pump();
  }
  EXPECT_EQ(rig.store.live_watches(), 2u);
  rig.store.break_watches();  // `doomed` loses everything it had not delivered
  std::vector<WatchEvent> lost;
  EXPECT_THROW(doomed->poll(lost, 100'000), StoreError);
  rig.time.advance_to(rig.time.now() + kNsPerS);
  // `watch` was broken too: what it had not delivered is lost as well.
  std::vector<WatchEvent> events;
  EXPECT_THROW(watch->poll(events, 100'000), StoreError);
  EXPECT_TRUE(events.empty());

  const std::size_t live_at_open =
      rig.mem->get("k.a").has_value() + rig.mem->get("k.c").has_value();
  auto again = rig.store.watch_keys(watched, {});
  for (int i = 0; i < 200; ++i) {
    rig.time.advance_to(rig.time.now() + kNsPerMs);
    const char* k = keys[i % 3];
    auto cur = rig.mem->get(k);
    const std::string value = fmt::format("x{}", i);  // ("x" + to_string: GCC 12 -O3 -Wrestrict)
    if (cur) {
      rig.mem->update(k, value, cur->revision);
    } else {
      rig.mem->create(k, value);
    }
    rig.store.pump();
  }
  rig.time.advance_to(rig.time.now() + kNsPerS);
  again->poll(events, 100'000);
  std::map<std::string, Revision> last;
  std::size_t snapshot = 0;
  bool caught_up = false;
  bool reordered = false;
  Revision prev = 0;
  for (const auto& e : events) {
    if (e.kind == WatchEvent::Kind::caught_up) {
      EXPECT_FALSE(caught_up);
      caught_up = true;
      continue;
    }
    EXPECT_TRUE(e.key == "k.a" || e.key == "k.c") << e.key;
    if (!caught_up) ++snapshot;
    EXPECT_GT(e.revision, last[e.key]) << e.key;
    last[e.key] = e.revision;
    if (caught_up && e.revision < prev) reordered = true;
    if (caught_up) prev = e.revision;
  }
  EXPECT_TRUE(caught_up);
  EXPECT_EQ(snapshot, live_at_open);
  EXPECT_EQ(last["k.a"], rig.mem->get("k.a")->revision);
  EXPECT_EQ(last["k.c"], rig.mem->get("k.c")->revision);
  EXPECT_TRUE(reordered) << "a slow key watch should reorder events of different keys";
}

struct BatchRun {
  std::vector<std::string> outcomes;  // per request: ok, lost, or the error
  std::vector<std::string> stored;    // per request: the stored value, or "-"
  std::size_t late = 0;
};

BatchRun run_faulty_batch(std::uint64_t seed) {
  SimStoreRig rig(seed);
  rig.mem->create("b.k007", "before");
  rig.store.faults.op_fail = 0.2;
  rig.store.faults.op_unknown = 0.3;
  std::vector<std::string> keys;
  for (int i = 0; i < 200; ++i) keys.push_back(fmt::format("b.k{:03}", i));
  // CreateRequest holds views: the values live in `values` for the call.
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& k : keys) values.push_back("v" + k);
  std::vector<CreateRequest> batch;
  for (std::size_t i = 0; i < keys.size(); ++i) batch.push_back(CreateRequest{keys[i], values[i]});
  const std::vector<CreateOutcome> out = rig.store.create_many(batch);
  BatchRun run;
  run.late = rig.late.size();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const CreateOutcome& o = out.at(i);
    run.outcomes.push_back(o.error       ? std::string(to_string(*o.error))
                           : o.result.ok ? "ok"
                                         : "lost");
    const auto e = rig.mem->get(keys[i]);
    run.stored.push_back(e ? e->value : "-");
    if (!o.error && o.result.ok) {
      EXPECT_TRUE(e && e->revision == o.result.revision) << keys[i];
    }
    if (o.error == StoreErrc::unavailable) {
      EXPECT_FALSE(e) << keys[i] << ": an unavailable request was applied";
    }
  }
  EXPECT_EQ(rig.fis->op_count(OpKind::create_many), 1u) << "the requests sent went as one batch";
  EXPECT_EQ(rig.fis->op_count(OpKind::create), 0u);
  EXPECT_EQ(rig.history.violation_count(), 0u);
  return run;
}

TEST(SimStoreTest, CreateManyDrawsTheWriteFaultsPerRequestDeterministically) {
  const BatchRun run = run_faulty_batch(11);
  std::map<std::string, int> count;
  for (const std::string& o : run.outcomes) ++count[o];
  EXPECT_GT(count["ok"], 0);
  EXPECT_GT(count["unavailable"], 0);
  EXPECT_GT(count["unknown_outcome"], 0);
  EXPECT_GT(run.late, 0u) << "some unknown outcomes land late";
  EXPECT_NE(run.outcomes[7], "ok") << "b.k007 existed";
  std::size_t unknown_landed = 0;
  for (std::size_t i = 0; i < run.outcomes.size(); ++i) {
    if (run.outcomes[i] == "unknown_outcome" && run.stored[i] != "-") ++unknown_landed;
  }
  EXPECT_GT(unknown_landed, 0u) << "some unknown outcomes were applied";
  const BatchRun again = run_faulty_batch(11);
  EXPECT_EQ(run.outcomes, again.outcomes) << "one seed, one run";
  EXPECT_EQ(run.stored, again.stored);
  EXPECT_NE(run.outcomes, run_faulty_batch(12).outcomes);
}

TEST(SimStoreTest, CreateManyFailsEveryRequestWhenPartitionedAndLandsAPrefixAtACrash) {
  SimStoreRig rig(3);
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) keys.push_back(fmt::format("c.k{:02}", i));
  std::vector<CreateRequest> batch;
  for (const std::string& k : keys) batch.push_back(CreateRequest{k, "v"});
  rig.store.faults.partition_until = kNsPerS;
  for (const CreateOutcome& o : rig.store.create_many(batch)) {
    EXPECT_EQ(o.error, StoreErrc::unavailable);
  }
  EXPECT_EQ(rig.mem->size(), 0u);
  rig.time.advance_to(2 * kNsPerS);
  rig.store.faults.crash_after = 1;
  for (const CreateOutcome& o : rig.store.create_many(batch)) {
    EXPECT_EQ(o.error, StoreErrc::unavailable);
  }
  EXPECT_TRUE(rig.store.faults.crash_hit);
  const std::size_t landed = rig.mem->size();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(rig.mem->get(keys[i]).has_value(), i < landed) << "a prefix of the batch landed";
  }
  rig.store.create_many(batch);
  EXPECT_EQ(rig.mem->size(), landed) << "nothing lands after the crash";
}

}  // namespace
}  // namespace etlc::sim
