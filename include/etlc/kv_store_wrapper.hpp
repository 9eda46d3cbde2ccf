// KvStoreWrapper: a KvStore that passes every call to another KvStore, unchanged.
//
// The base of every store decorator (FaultInjectingStore, the member's metering, the simulator's
// and the benchmarks' stores): a decorator derives from it and overrides only the calls it
// changes, calling the wrapper's own method (KvStoreWrapper::get(key), ...) or inner() for the
// rest of the work. A decorator that leaves a call alone inherits a forward that is correct
// by construction, and a call added to KvStore needs one new forward here, not one per decorator.
//
//   class CountingGets final : public KvStoreWrapper {
//    public:
//     using KvStoreWrapper::KvStoreWrapper;
//     std::optional<Entry> get(std::string_view key) override {
//       ++gets;
//       return KvStoreWrapper::get(key);
//     }
//     std::atomic<std::uint64_t> gets{0};
//   };
//
// Ownership: the wrapper shares ownership of the inner store; it never changes it afterwards.
// Thread safety: as the inner store (every forward is one call of it, with no state here).
// Errors: every forward returns or throws exactly what the inner call does.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "etlc/store.hpp"

namespace etlc {

class KvStoreWrapper : public KvStore {
 public:
  // Throws UsageError if `inner` is null.
  explicit KvStoreWrapper(std::shared_ptr<KvStore> inner);
  ~KvStoreWrapper() override;

  KvStoreWrapper(const KvStoreWrapper&) = delete;
  KvStoreWrapper& operator=(const KvStoreWrapper&) = delete;

  // Each forward is one call of the inner store, defined here so it is read in one place.
  WriteResult create(std::string_view key, std::string_view value) override {
    return inner_->create(key, value);
  }
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override {
    return inner_->update(key, value, expected);
  }
  WriteResult erase(std::string_view key, Revision expected) override {
    return inner_->erase(key, expected);
  }
  std::optional<Entry> get(std::string_view key) override { return inner_->get(key); }
  std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) override {
    return inner_->watch(prefix, std::move(options));
  }
  std::vector<Entry> list(std::string_view prefix) override { return inner_->list(prefix); }
  std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys,
                                    WatchOptions options) override {
    return inner_->watch_keys(keys, std::move(options));
  }
  std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests) override {
    return inner_->create_many(requests);
  }

  // The store every call goes to; never null.
  const std::shared_ptr<KvStore>& inner() const noexcept { return inner_; }

 private:
  const std::shared_ptr<KvStore> inner_;
};

}  // namespace etlc
