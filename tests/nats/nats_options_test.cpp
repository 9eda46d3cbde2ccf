// NatsStoreOptions: validation names the option, secrets never print, job -> bucket is
// injective and always a valid bucket name. No server needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <fstream>
#include <string>

#include "etlc/nats_store.hpp"
#include "support/nats_server.hpp"

namespace etlc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

NatsStoreOptions valid() {
  NatsStoreOptions o;
  o.servers = {"nats://127.0.0.1:4222"};
  o.job = "backfill";
  return o;
}

// The ConfigError message validate() throws, or "" if it does not throw.
std::string rejection(const NatsStoreOptions& o) {
  try {
    o.validate();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

TEST(NatsStoreOptions, DefaultsWithServerAndJobAreValid) {
  EXPECT_EQ(rejection(valid()), "");
}

TEST(NatsStoreOptions, EachInvalidOptionIsRejectedByName) {
  struct Case {
    std::string option;
    std::function<void(NatsStoreOptions&)> breakit;
  };
  std::vector<Case> cases{
      {"servers", [](auto& o) { o.servers.clear(); }},
      {"servers[1]", [](auto& o) { o.servers.push_back("http://x:1"); }},
      {"servers[0]", [](auto& o) { o.servers = {"nats://a:1,nats://b:2"}; }},
      {"servers[0]", [](auto& o) { o.servers = {"nats://:4222"}; }},
      {"job", [](auto& o) { o.job.clear(); }},
      {"job", [](auto& o) { o.job = std::string(65, 'j'); }},
      {"bucket", [](auto& o) { o.bucket = "has.dot"; }},
      {"replicas", [](auto& o) { o.replicas = 2; }},
      {"history", [](auto& o) { o.history = 0; }},
      {"history", [](auto& o) { o.history = 65; }},
      {"password", [](auto& o) { o.password = "p"; }},
      {"user", [](auto& o) { o.user = "u"; }},
      {"exclusive",
       [](auto& o) {
         o.user = "u";
         o.password = "p";
         o.token = "t";
       }},
      {"credentials_file", [](auto& o) { o.credentials_file = "/nonexistent/etlc.creds"; }},
      {"tls.ca_file", [](auto& o) { o.tls.ca_file = "/nonexistent/ca.pem"; }},
      {"tls.key_file", [](auto& o) { o.tls.cert_file = "/etc/hostname"; }},
      {"connect_timeout_ms", [](auto& o) { o.connect_timeout_ms = 0; }},
      {"op_timeout_ms", [](auto& o) { o.op_timeout_ms = -5; }},
      {"op_timeout_ms", [](auto& o) { o.op_timeout_ms = 700'000; }},
      {"creates_in_flight", [](auto& o) { o.creates_in_flight = 0; }},
      {"creates_in_flight", [](auto& o) { o.creates_in_flight = 16385; }},
      {"reconnect_wait_ms", [](auto& o) { o.reconnect_wait_ms = -1; }},
      {"max_reconnect_attempts", [](auto& o) { o.max_reconnect_attempts = -2; }},
  };
  for (const auto& c : cases) {
    NatsStoreOptions o = valid();
    c.breakit(o);
    std::string msg = rejection(o);
    EXPECT_THAT(msg, HasSubstr(c.option)) << "case " << c.option << ": " << o.to_string();
  }
}

TEST(NatsStoreOptions, SecretsNeverAppearInToStringOrErrors) {
  NatsStoreOptions o = valid();
  o.servers = {"nats://alice:url-secret-1@127.0.0.1:4222", "tls://tok-secret-2@10.0.0.1:4222"};
  o.user = "alice";
  o.password = "pw-secret-3";
  std::string text = o.to_string();
  EXPECT_THAT(text, Not(HasSubstr("url-secret-1")));
  EXPECT_THAT(text, Not(HasSubstr("tok-secret-2")));
  EXPECT_THAT(text, Not(HasSubstr("pw-secret-3")));
  EXPECT_THAT(text, HasSubstr("alice"));
  EXPECT_THAT(text, HasSubstr("127.0.0.1:4222"));

  o.token = "tk-secret-4";  // now two auth methods: rejected, and the message shows neither
  std::string msg = rejection(o);
  ASSERT_NE(msg, "");
  EXPECT_THAT(msg, Not(HasSubstr("pw-secret-3")));
  EXPECT_THAT(msg, Not(HasSubstr("tk-secret-4")));

  NatsStoreOptions bad = valid();
  bad.servers = {"ftp://bob:url-secret-5@host:1"};
  msg = rejection(bad);
  EXPECT_THAT(msg, HasSubstr("servers[0]"));
  EXPECT_THAT(msg, Not(HasSubstr("url-secret-5")));
}

TEST(NatsStoreOptions, ExistingFilesAreAccepted) {
  testing::TempDir dir("etlc-opts");
  auto creds = dir.path() / "user.creds";
  std::ofstream(creds) << "not checked here\n";
  NatsStoreOptions o = valid();
  o.credentials_file = creds.string();
  o.tls.ca_file = creds.string();
  EXPECT_EQ(rejection(o), "");
}

TEST(NatsStoreOptions, BucketForJobExamples) {
  EXPECT_EQ(NatsStoreOptions::bucket_for_job("backfill-2024"), "etlc_backfill-2024");
  EXPECT_EQ(NatsStoreOptions::bucket_for_job("a_b"), "etlc_a_5Fb");
  EXPECT_EQ(NatsStoreOptions::bucket_for_job("a.b c"), "etlc_a_2Eb_20c");
  EXPECT_NE(NatsStoreOptions::bucket_for_job("a_b"), NatsStoreOptions::bucket_for_job("a_5Fb"));
  EXPECT_THROW(NatsStoreOptions::bucket_for_job(""), ConfigError);
  NatsStoreOptions o = valid();
  EXPECT_EQ(o.bucket_name(), "etlc_backfill");
  o.bucket = "explicit_B-1";
  EXPECT_EQ(o.bucket_name(), "explicit_B-1");
}

RC_GTEST_PROP(NatsStoreOptionsProps, BucketForJobIsInjectiveAndValid, ()) {
  // Any bytes, 1 to kMaxJobBytes of them. (gen::resize(n, gen::string()) does not bound the
  // length by n: it produced a 65-byte job now and then.)
  const auto job = rc::gen::mapcat(
      rc::gen::inRange<std::size_t>(1, NatsStoreOptions::kMaxJobBytes + 1),
      [](std::size_t n) { return rc::gen::container<std::string>(n, rc::gen::arbitrary<char>()); });
  const std::string a = *job;
  const std::string b = *rc::gen::oneOf(rc::gen::just(a), job);  // equal inputs too
  const std::string ba = NatsStoreOptions::bucket_for_job(a);
  const std::string bb = NatsStoreOptions::bucket_for_job(b);
  RC_ASSERT((a == b) == (ba == bb));
  for (char c : ba) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    RC_ASSERT(ok);
  }
  RC_ASSERT(ba.size() <= NatsStoreOptions::kMaxBucketBytes);
}

}  // namespace
}  // namespace etlc
