// MeteredStore: a KvStore decorator that times every operation with the member's Clock and
// records etl_coordination_store_op_seconds{op,result} and etl_coordination_store_ops_total.
// Metering wraps the store instead of living in each backend. Thread-safe as the inner store is;
// shares ownership of it (KvStoreWrapper).
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "etlc/clock.hpp"
#include "etlc/kv_store_wrapper.hpp"
#include "etlc/metrics.hpp"
#include "etlc/store.hpp"

namespace etlc {

class MeteredStore final : public KvStoreWrapper {
 public:
  MeteredStore(std::shared_ptr<KvStore> inner, MetricsRegistry& registry, const Clock& clock,
               std::string_view instance);

  WriteResult create(std::string_view key, std::string_view value) override;
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override;
  WriteResult erase(std::string_view key, Revision expected) override;
  std::optional<Entry> get(std::string_view key) override;
  std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) override;
  std::vector<Entry> list(std::string_view prefix) override;
  std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys,
                                    WatchOptions options) override;
  // Forwarded as one batch (the backend's pipelining is kept): the call is timed as op
  // "create_many" and counted as one create_many; each request's outcome is counted as one
  // create (ok, conflict, or error for an unavailable or unknown outcome).
  std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests) override;

 private:
  enum Op : std::size_t {
    kCreate,
    kUpdate,
    kErase,
    kGet,
    kWatch,
    kList,
    kWatchKeys,
    kCreateMany,
    kOps
  };
  enum Result : std::size_t { kOk, kConflict, kError, kResults };
  template <typename Fn>
  auto timed(Op op, Fn&& fn) -> decltype(fn());

  const Clock& clock_;
  std::array<Histogram*, kOps> seconds_{};
  std::array<std::array<Counter*, kResults>, kOps> count_{};
};

}  // namespace etlc
