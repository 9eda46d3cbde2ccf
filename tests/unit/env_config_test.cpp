// Configuration from the environment (etlc/env_config.hpp): what each variable sets, the identity
// fallbacks, and that every wrong value is a ConfigError naming its variable (never a secret).
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>

#include "etlc/env_config.hpp"
#include "etlc/errors.hpp"

namespace etlc {
namespace {

using Env = std::map<std::string, std::string, std::less<>>;

EnvLookup lookup_in(const Env& env) {
  return [&env](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const Env& env) {
  try {
    coordinator_config_from_env({}, lookup_in(env));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

TEST(EnvConfig, every_knob_is_read) {
  const Env env{{"ETLC_INSTANCE_ID", "m-7"},
                {"ETLC_LEASE_MS", "9000"},
                {"ETLC_MAX_IN_FLIGHT", "3"},
                {"ETLC_REBALANCE_DELAY_MS", "0"},
                {"ETLC_DRAIN_DEADLINE_MS", "4000"},
                {"ETLC_OP_TIMEOUT_MS", "1000"},
                {"ETLC_MAX_ATTEMPTS", "7"},
                {"ETLC_REPLAN_INTERVAL_MS", "5000"},
                {"ETLC_ASSIGNMENT_INTERVAL_MS", "20"},
                {"ETLC_BULK_OPS_PER_STEP", "64"},
                {"ETLC_MAX_PLANNER_FAILURES", "5"},
                {"ETLC_STARTUP_WAIT_MS", "1500"}};
  const CoordinatorConfig c = coordinator_config_from_env({}, lookup_in(env));
  EXPECT_EQ(c.instance_id, "m-7");
  EXPECT_EQ(c.lease_duration.count(), 9000);
  EXPECT_EQ(c.max_in_flight, 3u);
  EXPECT_EQ(c.rebalance_delay.count(), 0);
  EXPECT_EQ(c.drain_deadline.count(), 4000);
  EXPECT_EQ(c.op_timeout.count(), 1000);
  EXPECT_EQ(c.max_attempts, 7u);
  EXPECT_EQ(c.replan_interval.count(), 5000);
  EXPECT_EQ(c.assignment_interval.count(), 20);
  EXPECT_EQ(c.bulk_ops_per_step, 64u);
  EXPECT_EQ(c.max_planner_failures, 5u);
  EXPECT_EQ(c.startup_wait.count(), 1500);
}

TEST(EnvConfig, the_instance_id_comes_from_etlc_instance_id_then_pod_name_then_the_host_name) {
  EXPECT_EQ(
      coordinator_config_from_env({}, lookup_in({{"ETLC_INSTANCE_ID", "a"}, {"POD_NAME", "b"}}))
          .instance_id,
      "a");
  EXPECT_EQ(coordinator_config_from_env({}, lookup_in({{"POD_NAME", "b"}})).instance_id, "b");
  EXPECT_EQ(coordinator_config_from_env({}, lookup_in({{"POD_NAME", ""}})).instance_id, host_name())
      << "an empty variable counts as unset";
  CoordinatorConfig defaults;
  defaults.instance_id = "from-the-program";
  EXPECT_EQ(coordinator_config_from_env(defaults, lookup_in({})).instance_id, "from-the-program");
  EXPECT_EQ(coordinator_config_from_env(defaults, lookup_in({{"POD_NAME", "p"}})).instance_id, "p");
}

TEST(EnvConfig, unset_variables_keep_the_defaults) {
  CoordinatorConfig defaults;
  defaults.instance_id = "d";
  defaults.max_in_flight = 5;
  const CoordinatorConfig c = coordinator_config_from_env(defaults, lookup_in({}));
  EXPECT_EQ(c.max_in_flight, 5u);
  EXPECT_EQ(c.lease_duration, CoordinatorConfig{}.lease_duration);
}

TEST(EnvConfig, a_value_that_does_not_parse_names_its_variable) {
  EXPECT_NE(error_of({{"ETLC_LEASE_MS", "15s"}}).find("ETLC_LEASE_MS='15s'"), std::string::npos)
      << error_of({{"ETLC_LEASE_MS", "15s"}});
  EXPECT_NE(error_of({{"ETLC_MAX_IN_FLIGHT", "-1"}}).find("ETLC_MAX_IN_FLIGHT"), std::string::npos);
  EXPECT_NE(error_of({{"ETLC_MAX_IN_FLIGHT", "99999999999"}}).find("out of range"),
            std::string::npos);
}

TEST(EnvConfig, a_broken_rule_names_the_variables_behind_it) {
  const std::string one = error_of({{"ETLC_MAX_IN_FLIGHT", "5000"}});
  EXPECT_NE(one.find("max_in_flight"), std::string::npos) << one;
  EXPECT_NE(one.find("set by ETLC_MAX_IN_FLIGHT=5000"), std::string::npos) << one;
  const std::string two = error_of(
      {{"ETLC_LEASE_MS", "3000"}, {"ETLC_OP_TIMEOUT_MS", "2000"}, {"ETLC_MAX_ATTEMPTS", "3"}});
  EXPECT_NE(two.find("ETLC_LEASE_MS=3000"), std::string::npos) << two;
  EXPECT_NE(two.find("ETLC_OP_TIMEOUT_MS=2000"), std::string::npos) << two;
  EXPECT_EQ(two.find("ETLC_MAX_ATTEMPTS"), std::string::npos) << "not involved: " << two;
  const std::string id = error_of({{"POD_NAME", std::string(300, 'x')}});
  EXPECT_NE(id.find("POD_NAME="), std::string::npos) << id;
}

#if defined(ETLC_WITH_NATS)
std::string nats_error_of(const Env& env) {
  try {
    config_from_env({}, lookup_in(env));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(EnvConfig, the_nats_store_options_are_read_like_etlc_reads_them) {
  const Env env{{"NATS_URL", "nats://a:4222, nats://b:4222"},
                {"ETLC_JOB", "orders"},
                {"ETLC_NATS_REPLICAS", "3"},
                {"ETLC_NATS_USER", "alice"},
                {"ETLC_NATS_PASSWORD", "pw-secret"},
                {"ETLC_NATS_CONNECT_TIMEOUT_MS", "700"},
                {"ETLC_NATS_OP_TIMEOUT_MS", "800"},
                {"ETLC_STARTUP_WAIT_MS", "900"},
                {"POD_NAME", "orders-0"}};
  const EnvConfig c = config_from_env({}, lookup_in(env));
  EXPECT_EQ(c.nats.servers, (std::vector<std::string>{"nats://a:4222", "nats://b:4222"}));
  EXPECT_EQ(c.nats.job, "orders");
  EXPECT_EQ(c.nats.replicas, 3);
  EXPECT_EQ(c.nats.user, "alice");
  EXPECT_EQ(c.nats.password, "pw-secret");
  EXPECT_EQ(c.nats.connect_timeout_ms, 700);
  EXPECT_EQ(c.nats.op_timeout_ms, 800);
  EXPECT_EQ(c.nats.startup_wait_ms, 900);
  EXPECT_EQ(c.coordinator.startup_wait.count(), 900);
  EXPECT_EQ(c.coordinator.instance_id, "orders-0");
  EXPECT_EQ(c.summary,
            "instance orders-0 (POD_NAME), job orders, nats [nats://a:4222, nats://b:4222]");
  EXPECT_EQ(c.summary.find("pw-secret"), std::string::npos);
}

TEST(EnvConfig, nats_defaults_to_the_local_server_and_needs_a_job) {
  EXPECT_NE(nats_error_of({}).find("ETLC_JOB"), std::string::npos) << nats_error_of({});
  const EnvConfig c = config_from_env({}, lookup_in({{"ETLC_JOB", "j"}}));
  EXPECT_EQ(c.nats.servers, (std::vector<std::string>{"nats://127.0.0.1:4222"}));
}

TEST(EnvConfig, a_wrong_nats_variable_is_named_and_no_secret_is_repeated) {
  const std::string replicas = nats_error_of({{"ETLC_JOB", "j"}, {"ETLC_NATS_REPLICAS", "2"}});
  EXPECT_NE(replicas.find("ETLC_NATS_REPLICAS=2"), std::string::npos) << replicas;
  const std::string both = nats_error_of({{"ETLC_JOB", "j"},
                                          {"ETLC_NATS_TOKEN", "tok-secret"},
                                          {"ETLC_NATS_CREDS", "/nonexistent.creds"}});
  EXPECT_NE(both.find("ETLC_NATS_TOKEN=***"), std::string::npos) << both;
  EXPECT_NE(both.find("ETLC_NATS_CREDS"), std::string::npos) << both;
  EXPECT_EQ(both.find("tok-secret"), std::string::npos) << both;
  const std::string url = nats_error_of({{"ETLC_JOB", "j"}, {"NATS_URL", "http://u:pw-x@h:1"}});
  EXPECT_NE(url.find("NATS_URL="), std::string::npos) << url;
  EXPECT_EQ(url.find("pw-x"), std::string::npos) << url;
  const std::string tls = nats_error_of({{"ETLC_JOB", "j"}, {"ETLC_NATS_TLS", "maybe"}});
  EXPECT_NE(tls.find("ETLC_NATS_TLS='maybe'"), std::string::npos) << tls;
}
#endif

}  // namespace
}  // namespace etlc
