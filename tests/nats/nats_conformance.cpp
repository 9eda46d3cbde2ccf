// The KvStore conformance suite (tests/store_conformance) against NatsStore on a real
// nats-server: single node (R1, also with history 64) and a 3-node cluster (R3). One server or
// cluster per process (started on first use), one bucket per instantiation, a fresh store (connect,
// adopt, probe) per test; the suite keeps each test in its own key namespace.
#include <memory>

#include "etlc/nats_store.hpp"
#include "nats/nats_test_env.hpp"
#include "store_conformance/conformance.hpp"

namespace etlc::testing {
namespace {

std::shared_ptr<KvStore> make_single() {
  static const std::string bucket = unique_bucket();
  return NatsStore::open(test_options({shared_server().url()}, bucket));
}

// A bucket that keeps 64 values per key, so a watch that falls behind under contention still
// receives every revision (history-1 buckets break such a watch instead: see CMakeLists.txt).
std::shared_ptr<KvStore> make_single_history64() {
  static const std::string bucket = unique_bucket();
  NatsStoreOptions o = test_options({shared_server().url()}, bucket);
  o.history = 64;
  return NatsStore::open(o);
}

std::shared_ptr<KvStore> make_r3() {
  static const std::string bucket = unique_bucket();
  return NatsStore::open(test_options(shared_cluster().urls(), bucket, 3));
}

void break_watches(KvStore& store) {
  dynamic_cast<NatsStore&>(store).break_watches("broken by the conformance test");
}

INSTANTIATE_TEST_SUITE_P(NatsSingle, StoreConformance,
                         ::testing::Values(StoreFactory{"nats_r1", make_single, break_watches}),
                         StoreFactoryName{});

INSTANTIATE_TEST_SUITE_P(NatsSingleHistory64, StoreConformance,
                         ::testing::Values(StoreFactory{"nats_r1_history64", make_single_history64,
                                                        break_watches}),
                         StoreFactoryName{});

INSTANTIATE_TEST_SUITE_P(NatsR3, StoreConformance,
                         ::testing::Values(StoreFactory{"nats_r3", make_r3, break_watches}),
                         StoreFactoryName{});

}  // namespace
}  // namespace etlc::testing
