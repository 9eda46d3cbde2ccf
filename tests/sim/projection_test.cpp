// The projection runner (projection.hpp) at a tiny size: its counts add up, and they show what
// decision 0009 claims (a worker's traffic does not grow with the fleet with targeted watches,
// and does with fleet-wide ones).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "projection.hpp"
#include "projection_report.hpp"

namespace etlc::sim {
namespace {

ProjectionParams tiny(int members, bool targeted) {
  ProjectionParams p;
  p.members = members;
  p.targeted = targeted;
  p.splits = 400;
  p.lanes = 4;
  p.lease_ms = 3'000;
  p.rebalance_delay_ms = 1'000;
  p.steady_leases = 3;
  p.phase_leases = 3;
  p.bound_leases = 30;
  p.quiet_ms = 3'000;
  return p;
}

const PhaseResult& phase(const ProjectionResult& r, const std::string& name) {
  for (const PhaseResult& p : r.phases) {
    if (p.name == name) return p;
  }
  throw std::runtime_error("no phase " + name);
}

std::uint64_t median_worker_deliveries(const PhaseResult& p) {
  return worker_spread(p, [](const MemberPhase& m) { return m.ops.deliveries(); }).median;
}

class ProjectionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (bool t : {false, true}) {
      for (int m : {20, 40}) runs_[{t, m}] = run_projection(tiny(m, t));
    }
  }
  static const ProjectionResult& run(bool t, int m) { return runs_.at({t, m}); }
  static inline std::map<std::pair<bool, int>, ProjectionResult> runs_;
};

TEST_F(ProjectionTest, EveryPhaseRanAndTheTotalsAreTheSumOfTheMembers) {
  for (const auto& [key, r] : runs_) {
    ASSERT_EQ(r.phases.size(), 5u);
    for (const PhaseResult& p : r.phases) {
      OpCounts sum;
      for (const MemberPhase& m : p.members) sum += m.ops;
      EXPECT_EQ(sum.operations(), p.total.operations()) << p.name;
      EXPECT_EQ(sum.deliveries(), p.total.deliveries()) << p.name;
      EXPECT_NE(member_with(p, Role::leader), nullptr) << p.name;
      EXPECT_GT(p.total.deliveries(), 0u) << p.name;
    }
    // The cold start seeds every split through create_many and the leader computes an
    // assignment; the join adds a member; the leave and the failover lose one each.
    const PhaseResult& cold = phase(r, "cold start");
    EXPECT_GE(cold.total.create_many_requests, r.params.splits);
    EXPECT_GE(cold.assignments, 1u);
    EXPECT_EQ(phase(r, "join").members.size(), cold.members.size() + 1);
    EXPECT_EQ(phase(r, "leave").members.size(), cold.members.size());
    EXPECT_EQ(phase(r, "failover").members.size(), cold.members.size() - 1);
  }
}

TEST_F(ProjectionTest, SteadyWritesAreThreeRenewalsPerMemberPerLease) {
  for (const auto& [key, r] : runs_) {
    const PhaseResult& p = phase(r, "steady");
    const double leases = p.virtual_s * 1000 / static_cast<double>(r.params.lease_ms);
    const double expected = 3.0 * r.params.members * leases;
    EXPECT_EQ(p.total.create + p.total.erase + p.total.create_many_requests, 0u);
    EXPECT_NEAR(static_cast<double>(p.total.update), expected, 0.1 * expected + r.params.members)
        << "targeted " << key.first << " members " << key.second;
  }
}

TEST_F(ProjectionTest, FleetWideWorkersHearEveryRenewalAndTheirTrafficGrowsWithTheFleet) {
  for (int m : {20, 40}) {
    const ProjectionResult& r = run(false, m);
    const PhaseResult& p = phase(r, "steady");
    const double leases = p.virtual_s * 1000 / static_cast<double>(r.params.lease_ms);
    const double peers = 3.0 * (m - 1) * leases;  // every other member's renewals
    EXPECT_GE(static_cast<double>(median_worker_deliveries(p)), 0.9 * peers) << m;
  }
  const auto d20 = median_worker_deliveries(phase(run(false, 20), "steady"));
  const auto d40 = median_worker_deliveries(phase(run(false, 40), "steady"));
  EXPECT_GE(static_cast<double>(d40), 1.7 * static_cast<double>(d20));
}

TEST_F(ProjectionTest, TargetedWorkersTrafficDoesNotGrowFrom20To40Members) {
  for (const char* name : {"steady", "join", "leave"}) {
    const PhaseResult& p20 = phase(run(true, 20), name);
    const PhaseResult& p40 = phase(run(true, 40), name);
    auto max_deliv = [](const PhaseResult& p) {
      return worker_spread(p, [](const MemberPhase& m) { return m.ops.deliveries(); }).max;
    };
    // The same phase length in leases at both sizes (a lease of slack for settling).
    const double scale = p40.virtual_s / p20.virtual_s;
    EXPECT_LE(static_cast<double>(max_deliv(p40)),
              1.2 * scale * static_cast<double>(max_deliv(p20)) + 4)
        << name;
    EXPECT_LT(median_worker_deliveries(p40), median_worker_deliveries(phase(run(false, 40), name)))
        << name;
  }
  // Only the leader and the standby hold prefix watches (NATS consumers).
  const PhaseResult& steady = phase(run(true, 40), "steady");
  for (const MemberPhase& m : steady.members) {
    if (m.role == Role::worker) {
      EXPECT_EQ(m.consumers, 0u) << m.id;
    }
  }
  EXPECT_NE(member_with(steady, Role::standby), nullptr);
}

TEST(ProjectionParamsTest, BadParametersAndTooLargeRunsAreRefusedByName) {
  ProjectionParams p = tiny(2, false);
  EXPECT_THROW(run_projection(p), std::invalid_argument);
  p = tiny(20, false);
  p.lanes = 0;
  EXPECT_THROW(validate(p), std::invalid_argument);
  p = tiny(20, false);
  p.bound_leases = p.phase_leases - 1;
  EXPECT_THROW(validate(p), std::invalid_argument);
  p = tiny(20, false);
  p.max_view_entries = estimated_view_entries(p) - 1;
  EXPECT_THROW(run_projection(p), ProjectionTooLarge);
  // The targeted estimate is far below the fleet-wide one at scale.
  ProjectionParams big;
  big.members = 10'000;
  const auto off = estimated_view_entries(big);
  big.targeted = true;
  EXPECT_GT(off, 1000 * estimated_view_entries(big));
}

TEST(ProjectionFitTest, APowerLawIsRecoveredExactly) {
  const PowerLaw f = fit_power_law({10, 100, 1000}, {300, 30'000, 3'000'000});
  ASSERT_TRUE(f.ok);
  EXPECT_NEAR(f.b, 2.0, 1e-9);
  EXPECT_NEAR(f.at(10'000), 3e8, 1e-3 * 3e8);
  for (double r : f.residuals) EXPECT_NEAR(r, 1.0, 1e-9);
  EXPECT_FALSE(fit_power_law({10}, {5}).ok);
  EXPECT_FALSE(fit_power_law({10, 20}, {0, 0}).ok);
}

}  // namespace
}  // namespace etlc::sim
