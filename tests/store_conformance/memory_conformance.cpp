// Runs the conformance suite against MemoryStore: alone, shared between tests (as a networked
// backend's bucket may be), behind a bare KvStoreWrapper (the decorators' forwarding base), and
// behind a FaultInjectingStore with no fault armed (a decorator must be transparent).
#include <memory>

#include "etlc/fault_injecting_store.hpp"
#include "etlc/kv_store_wrapper.hpp"
#include "etlc/memory_store.hpp"
#include "store_conformance/conformance.hpp"

namespace etlc::testing {
namespace {

std::shared_ptr<KvStore> shared_memory_store() {
  static const auto store = std::make_shared<MemoryStore>();
  return store;
}

INSTANTIATE_TEST_SUITE_P(
    Memory, StoreConformance,
    ::testing::Values(
        StoreFactory{"memory", [] { return std::make_shared<MemoryStore>(); },
                     // Each test has its own store, so closing it breaks only that test's watches.
                     [](KvStore& store) { dynamic_cast<MemoryStore&>(store).close(); }},
        StoreFactory{"memory_shared", [] { return shared_memory_store(); }, {}},
        StoreFactory{
            "wrapper_over_memory",
            [] { return std::make_shared<KvStoreWrapper>(std::make_shared<MemoryStore>()); },
            [](KvStore& store) {
              auto& memory =
                  dynamic_cast<MemoryStore&>(*dynamic_cast<KvStoreWrapper&>(store).inner());
              memory.close();
            }},
        StoreFactory{
            "fault_injecting_over_memory",
            [] { return std::make_shared<FaultInjectingStore>(std::make_shared<MemoryStore>()); },
            [](KvStore& store) { dynamic_cast<FaultInjectingStore&>(store).break_watches(); }}),
    StoreFactoryName{});

}  // namespace
}  // namespace etlc::testing
