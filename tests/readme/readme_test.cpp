// The README's usage sketch as a user runs it: POD_NAME unset (the instance id falls back to the
// host name), the store and job from the environment. It must complete the job and exit 0, and
// name a broken variable with exit code 2.
#include <gtest/gtest.h>

#include "etlc/admin.hpp"
#include "etlc/nats_store.hpp"
#include "ops/run_process.hpp"
#include "support/nats_server.hpp"

namespace etlc::testing {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> sketch(const NatsServer& server, std::vector<std::string> env) {
  std::vector<std::string> argv{
      "/usr/bin/env",   "-u", "POD_NAME", "-u", "ETLC_INSTANCE_ID", "NATS_URL=" + server.url(),
      "ETLC_JOB=readme"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.push_back(README_SKETCH_BIN);
  return argv;
}

TEST(ReadmeSketch, runs_to_completion_with_pod_name_unset) {
  NatsServer server;
  ProcessResult r =
      run_process(sketch(server, {"ETLC_LEASE_MS=3000", "ETLC_OP_TIMEOUT_MS=500"}), 120s);
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  NatsStoreOptions o;
  o.servers = {server.url()};
  o.job = "readme";
  o.create_bucket = false;
  auto store = NatsStore::open(o);
  JobAdmin admin(*store);
  const JobStatus st = admin.status();
  ASSERT_TRUE(st.plan.has_value());
  EXPECT_EQ(st.plan->verdict, PlanVerdict::complete);
  EXPECT_EQ(st.splits.completed, 64u);
  EXPECT_TRUE(st.members.empty() || !st.members.front().has_session)
      << "the member left: its session is gone";
}

TEST(ReadmeSketch, a_wrong_variable_is_named_and_exits_2) {
  NatsServer server;
  ProcessResult r = run_process(sketch(server, {"ETLC_LEASE_MS=soon"}), 60s);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("ETLC_LEASE_MS='soon'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace etlc::testing
