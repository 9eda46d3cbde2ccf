// NatsStore's start-up wait (NatsStoreOptions::startup_wait_ms): open the connection and the
// bucket, retrying while the servers cannot be reached.
#pragma once

#include <memory>

#include "etlc/nats_store.hpp"
#include "store/nats/nats_core.hpp"

namespace etlc::nats_detail {

// A fresh Core per attempt (a failed one is discarded with its connection). Retries only
// StoreError(unavailable), sleeping 250 ms doubling to 5 s, one warning per failed attempt,
// while the next attempt would still start within startup_wait_ms; then rethrows the last
// failure (naming the attempts). ConfigError and every other StoreError propagate at once.
std::shared_ptr<Core> open_with_startup_wait(NatsStoreOptions options);

}  // namespace etlc::nats_detail
