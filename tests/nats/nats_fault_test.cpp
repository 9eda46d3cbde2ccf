// NatsStore under faults of a single server it does not share: the server killed and restarted on
// the same port and store directory, a server that stops answering (SIGSTOP) so a write's outcome
// is unknown, wrong credentials, and TLS with a CA made by the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "etlc/nats_store.hpp"
#include "nats/nats_test_env.hpp"
#include "store_conformance/conformance.hpp"

namespace etlc::testing {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// The StoreErrc `f` throws; fails the test if it returns.
StoreErrc failure_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const StoreError& e) {
    return e.code();
  }
  ADD_FAILURE() << "the call succeeded during an outage";
  return StoreErrc::closed;
}

// The ConfigError message constructing a store with `o` throws.
std::string config_error(const NatsStoreOptions& o) {
  try {
    NatsStore store(o);
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ConfigError, got: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "the store opened";
  return {};
}

// nats-server 2.9.10 (Debian 12) lists a stream while it is still being created, before its
// message store exists; a publish in that window finds no responder and a
// $JS.API.STREAM.MSG.GET crashes the whole server (nil dereference in jsMsgGetRequest). Members
// of a new job all create the bucket at once, so the store must not use a stream before it
// accepts messages. Each round opens one new bucket from several connections at the same moment,
// half of them without the fencing probe so that their first request is a read; every member
// must open, write and read, and the server must survive every round. Without the readiness
// wait this failed in 7 of 8 runs, 4 of them by crashing the server.
TEST(NatsFaults, MembersOpeningANewBucketAtOnceAllOpenAndTheServerSurvives) {
  NatsServer server;
  constexpr int kRounds = 40;
  constexpr int kMembers = 8;
  for (int round = 0; round < kRounds; ++round) {
    const std::string bucket = unique_bucket();
    std::atomic<int> arrived{0};
    std::vector<std::string> errors(kMembers);
    std::vector<std::thread> members;
    for (int m = 0; m < kMembers; ++m) {
      members.emplace_back([&, m] {
        arrived.fetch_add(1);
        while (arrived.load() < kMembers) std::this_thread::yield();
        try {
          NatsStoreOptions o = test_options({server.url()}, bucket);
          o.probe_on_open = m % 2 == 0;
          NatsStore store(o);
          const std::string key = "m" + std::to_string(m);
          if (store.get(key)) errors[m] = "a key nobody wrote exists";
          if (!store.create(key, "v").ok) errors[m] = "create lost";
          if (!store.get(key)) errors[m] = "get found nothing";
        } catch (const std::exception& e) {
          errors[m] = e.what();
        }
      });
    }
    for (auto& t : members) t.join();
    ASSERT_TRUE(server.healthy()) << "round " << round << ": " << server.diagnostics();
    for (int m = 0; m < kMembers; ++m) {
      EXPECT_EQ(errors[m], "") << "round " << round << ", member " << m;
    }
  }
}

TEST(NatsFaults, ServerKilledAndRestartedDataSurvivesWatchesResumeOutageWritesAreHonest) {
  NatsServer server;
  NatsStoreOptions o = test_options({server.url()}, unique_bucket());
  o.op_timeout_ms = 1000;
  NatsStore store(o);

  std::map<std::string, Entry> acked;
  for (int i = 0; i < 20; ++i) {
    std::string k = "r.k" + std::to_string(i);
    auto r = store.create(k, "v" + std::to_string(i));
    ASSERT_TRUE(r.ok);
    acked[k] = Entry{k, "v" + std::to_string(i), r.revision};
  }
  auto w = open_watch(store, "r.");
  ASSERT_TRUE(poll_until(*w, [](const TestWatch& t) { return t.caught_up(); }));
  EXPECT_EQ(w->snapshot().size(), 20u);

  server.kill(SIGKILL);
  ASSERT_TRUE(eventually([&] { return !store.connected(); }, 5s));

  // Every call during the outage fails; a write reports unavailable (nothing sent) or
  // unknown_outcome (sent, no answer), never success or a conflict.
  std::map<std::string, StoreErrc> outage_writes;
  for (int i = 0; i < 5; ++i) {
    const Entry& e = acked["r.k" + std::to_string(i)];
    outage_writes[e.key] = failure_of([&] { store.update(e.key, "during-outage", e.revision); });
    EXPECT_THAT(outage_writes[e.key], AnyOf(StoreErrc::unavailable, StoreErrc::unknown_outcome));
  }
  EXPECT_EQ(failure_of([&] { store.get("r.k0"); }), StoreErrc::unavailable);
  EXPECT_EQ(failure_of([&] { store.list("r."); }), StoreErrc::unavailable);
  EXPECT_EQ(failure_of([&] { store.watch("r.", {}); }), StoreErrc::unavailable);
  EXPECT_EQ(failure_of([&] { store.create("r.new", "x"); }), StoreErrc::unavailable);

  server.restart();
  ASSERT_TRUE(eventually([&] { return store.connected(); }, 15s)) << server.log_tail();
  // The reconnected callback runs on nats.c's callback thread, possibly after the status flips.
  EXPECT_TRUE(eventually([&] { return store.stats().reconnects >= 1; }, 5s));

  // The data survived; writes reported unavailable did not apply; an unknown outcome may have.
  for (const auto& [key, e] : acked) {
    std::optional<Entry> got;
    ASSERT_TRUE(eventually(
        [&] {
          try {
            got = store.get(key);
            return true;
          } catch (const StoreError&) {
            return false;
          }
        },
        10s));
    ASSERT_TRUE(got.has_value()) << key;
    auto it = outage_writes.find(key);
    if (it != outage_writes.end() && it->second == StoreErrc::unknown_outcome) {
      EXPECT_THAT(got->value, AnyOf(e.value, std::string("during-outage")));
    } else {
      EXPECT_EQ(got->value, e.value) << key;
      EXPECT_EQ(got->revision, e.revision) << key;
    }
  }

  // The old watch resumes by itself: it sees a write made after the restart, and did not break.
  WriteResult after;
  ASSERT_TRUE(eventually(
      [&] {
        try {
          after = store.create("r.after", "x");
          return true;
        } catch (const StoreError&) {
          return false;
        }
      },
      10s));
  ASSERT_TRUE(after.ok);
  EXPECT_TRUE(poll_until(*w, [&](const TestWatch& t) { return t.saw("r.after", after.revision); }))
      << (w->broken ? w->broken_message : "silent");
  EXPECT_FALSE(w->broken);
  // No event of the outage writes that were reported unavailable.
  for (const auto& ev : w->live()) EXPECT_NE(ev.value, "during-outage") << ev.key;
}

TEST(NatsFaults, AWriteThatTimesOutIsAnUnknownOutcomeAndMayApplyLater) {
  NatsServer server;
  NatsStoreOptions o = test_options({server.url()}, unique_bucket());
  o.op_timeout_ms = 300;
  NatsStore store(o);
  auto r1 = store.create("k", "v1");
  ASSERT_TRUE(r1.ok);

  server.kill(SIGSTOP);  // the connection stays up; the server just stops answering
  EXPECT_EQ(failure_of([&] { store.update("k", "v2", r1.revision); }), StoreErrc::unknown_outcome);
  EXPECT_EQ(failure_of([&] { store.get("k"); }), StoreErrc::unavailable);
  server.kill(SIGCONT);

  // The write was in flight: the server applies it once it runs again. A caller that got
  // unknown_outcome re-reads and adopts it.
  std::optional<Entry> got;
  ASSERT_TRUE(eventually(
      [&] {
        try {
          got = store.get("k");
          return got.has_value() && got->value == "v2";
        } catch (const StoreError&) {
          return false;
        }
      },
      10s));
  EXPECT_GT(got->revision, r1.revision);
  EXPECT_TRUE(store.update("k", "v3", got->revision).ok);
}

TEST(NatsFaults, WrongPasswordOrNoCredentialsIsAClearConfigError) {
  NatsServerConfig config;
  config.user = "app";
  config.password = "s3cret-right";
  NatsServer server(config);
  NatsStoreOptions o = test_options({server.url()}, unique_bucket());
  o.connect_timeout_ms = 2000;

  o.user = "app";
  o.password = "pw-wrong-4711";
  std::string msg = config_error(o);
  EXPECT_THAT(msg, HasSubstr("authentication failed with user/password (user 'app')"));
  EXPECT_THAT(msg, Not(HasSubstr("pw-wrong-4711")));

  NatsStoreOptions none = test_options({server.url()}, unique_bucket());
  none.connect_timeout_ms = 2000;
  EXPECT_THAT(config_error(none), HasSubstr("no credentials"));

  // Credentials in the URL are redacted too.
  NatsStoreOptions in_url = test_options(
      {"nats://app:pw-url-0815@127.0.0.1:" + std::to_string(server.port())}, unique_bucket());
  in_url.connect_timeout_ms = 2000;
  const std::string url_msg = config_error(in_url);
  EXPECT_THAT(url_msg, Not(HasSubstr("pw-url-0815")));
  // The message says which credentials were refused: those of the URL, not "none".
  EXPECT_THAT(url_msg, HasSubstr("user/password in the server URL (user 'app')"));
  EXPECT_THAT(url_msg, Not(HasSubstr("no credentials")));

  o.password = "s3cret-right";
  NatsStore ok(o);
  EXPECT_TRUE(ok.create("k", "v").ok);
  EXPECT_THAT(o.to_string(), Not(HasSubstr("s3cret-right")));
}

TEST(NatsFaults, WrongTokenIsAClearConfigError) {
  NatsServerConfig config;
  config.token = "tok-right-1";
  NatsServer server(config);
  NatsStoreOptions o = test_options({server.url()}, unique_bucket());
  o.connect_timeout_ms = 2000;
  o.token = "tok-wrong-2";
  std::string msg = config_error(o);
  EXPECT_THAT(msg, HasSubstr("authentication failed with token"));
  EXPECT_THAT(msg, Not(HasSubstr("tok-wrong-2")));
  o.token = "tok-right-1";
  NatsStore ok(o);
  EXPECT_TRUE(ok.create("k", "v").ok);
}

TEST(NatsFaults, AMissingCredentialsFileIsAClearConfigError) {
  NatsServer server;
  NatsStoreOptions o = test_options({server.url()}, unique_bucket());
  o.credentials_file = "/nonexistent/etlc-test.creds";
  std::string msg = config_error(o);
  EXPECT_THAT(msg, HasSubstr("credentials_file"));
  EXPECT_THAT(msg, HasSubstr("/nonexistent/etlc-test.creds"));
}

class NatsTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("etlc-tls");
    certs_ = new TestCertificates(make_test_certificates(dir_->path()));
  }
  static void TearDownTestSuite() {
    delete certs_;
    delete dir_;
  }
  static TempDir* dir_;
  static TestCertificates* certs_;
};
TempDir* NatsTls::dir_ = nullptr;
TestCertificates* NatsTls::certs_ = nullptr;

TEST_F(NatsTls, TlsWithTheTestCaWorks) {
  NatsServerConfig config;
  config.tls.cert_file = certs_->server_cert.string();
  config.tls.key_file = certs_->server_key.string();
  NatsServer server(config);
  ASSERT_THAT(server.url(), HasSubstr("tls://"));

  NatsStoreOptions o = test_options({server.url()}, unique_bucket());
  o.tls.ca_file = certs_->ca_cert.string();
  {
    NatsStore store(o);
    auto r = store.create("k", "over tls");
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(store.get("k")->value, "over tls");
  }
  // nats:// plus tls.required is the same thing.
  NatsStoreOptions required = o;
  required.servers = {"nats://127.0.0.1:" + std::to_string(server.port())};
  required.tls.required = true;
  NatsStore store(required);
  EXPECT_EQ(store.get("k")->value, "over tls");
}

TEST_F(NatsTls, AnUntrustedServerCertificateOrPlainClientIsAClearConfigError) {
  NatsServerConfig config;
  config.tls.cert_file = certs_->server_cert.string();
  config.tls.key_file = certs_->server_key.string();
  NatsServer server(config);

  NatsStoreOptions untrusted = test_options({server.url()}, unique_bucket());
  untrusted.connect_timeout_ms = 2000;  // no ca_file: the system store does not know our CA
  EXPECT_THAT(config_error(untrusted), HasSubstr("TLS"));

  NatsStoreOptions plain =
      test_options({"nats://127.0.0.1:" + std::to_string(server.port())}, unique_bucket());
  plain.connect_timeout_ms = 2000;
  EXPECT_THAT(config_error(plain), HasSubstr("TLS"));
}

TEST_F(NatsTls, MutualTlsNeedsTheClientCertificate) {
  NatsServerConfig config;
  config.tls.cert_file = certs_->server_cert.string();
  config.tls.key_file = certs_->server_key.string();
  config.tls.ca_file = certs_->ca_cert.string();
  config.tls.verify_clients = true;
  NatsServer server(config);

  NatsStoreOptions o = test_options({server.url()}, unique_bucket());
  o.connect_timeout_ms = 2000;
  o.tls.ca_file = certs_->ca_cert.string();
  EXPECT_THROW(NatsStore{o}, Error);

  o.tls.cert_file = certs_->client_cert.string();
  o.tls.key_file = certs_->client_key.string();
  NatsStore store(o);
  EXPECT_TRUE(store.create("k", "mutual").ok);
}

}  // namespace
}  // namespace etlc::testing
