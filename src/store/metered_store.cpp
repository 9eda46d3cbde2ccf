#include "store/metered_store.hpp"

#include <type_traits>

namespace etlc {

namespace {
constexpr std::array<double, 14> kOpBuckets = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0};
constexpr std::array<const char*, 8> kOpNames = {"create", "update", "erase",      "get",
                                                 "watch",  "list",   "watch_keys", "create_many"};
constexpr std::array<const char*, 3> kResultNames = {"ok", "conflict", "error"};
}  // namespace

MeteredStore::MeteredStore(std::shared_ptr<KvStore> inner, MetricsRegistry& registry,
                           const Clock& clock, std::string_view instance)
    : KvStoreWrapper(std::move(inner)), clock_(clock) {
  for (std::size_t op = 0; op < kOps; ++op) {
    seconds_[op] = &registry.histogram(
        "etl_coordination_store_op_seconds", "Store operation latency by operation", kOpBuckets,
        Labels{{"instance", std::string(instance)}, {"op", kOpNames[op]}});
    for (std::size_t r = 0; r < kResults; ++r) {
      count_[op][r] = &registry.counter("etl_coordination_store_ops_total",
                                        "Store operations by operation and result",
                                        Labels{{"instance", std::string(instance)},
                                               {"op", kOpNames[op]},
                                               {"result", kResultNames[r]}});
    }
  }
}

template <typename Fn>
auto MeteredStore::timed(Op op, Fn&& fn) -> decltype(fn()) {
  const auto start = clock_.now();
  try {
    auto out = fn();
    seconds_[op]->observe(std::chrono::duration<double>(clock_.now() - start).count());
    Result r = kOk;
    if constexpr (std::is_same_v<decltype(out), WriteResult>) r = out.ok ? kOk : kConflict;
    count_[op][r]->inc();
    return out;
  } catch (...) {
    seconds_[op]->observe(std::chrono::duration<double>(clock_.now() - start).count());
    count_[op][kError]->inc();
    throw;
  }
}

WriteResult MeteredStore::create(std::string_view key, std::string_view value) {
  return timed(kCreate, [&] { return KvStoreWrapper::create(key, value); });
}
WriteResult MeteredStore::update(std::string_view key, std::string_view value, Revision expected) {
  return timed(kUpdate, [&] { return KvStoreWrapper::update(key, value, expected); });
}
WriteResult MeteredStore::erase(std::string_view key, Revision expected) {
  return timed(kErase, [&] { return KvStoreWrapper::erase(key, expected); });
}
std::optional<Entry> MeteredStore::get(std::string_view key) {
  return timed(kGet, [&] { return KvStoreWrapper::get(key); });
}
std::unique_ptr<Watch> MeteredStore::watch(std::string_view prefix, WatchOptions options) {
  return timed(kWatch, [&] { return KvStoreWrapper::watch(prefix, std::move(options)); });
}
std::vector<Entry> MeteredStore::list(std::string_view prefix) {
  return timed(kList, [&] { return KvStoreWrapper::list(prefix); });
}
std::unique_ptr<Watch> MeteredStore::watch_keys(std::span<const std::string> keys,
                                                WatchOptions options) {
  return timed(kWatchKeys, [&] { return KvStoreWrapper::watch_keys(keys, std::move(options)); });
}
std::vector<CreateOutcome> MeteredStore::create_many(std::span<const CreateRequest> requests) {
  std::vector<CreateOutcome> out =
      timed(kCreateMany, [&] { return KvStoreWrapper::create_many(requests); });
  for (const CreateOutcome& o : out) {
    count_[kCreate][o.error ? kError : (o.result.ok ? kOk : kConflict)]->inc();
  }
  return out;
}

}  // namespace etlc
