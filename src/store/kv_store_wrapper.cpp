// KvStoreWrapper (see include/etlc/kv_store_wrapper.hpp): the null check; the forwards are inline.
#include "etlc/kv_store_wrapper.hpp"

#include <utility>

#include "etlc/errors.hpp"

namespace etlc {

namespace {
std::shared_ptr<KvStore> checked(std::shared_ptr<KvStore> inner) {
  if (!inner) throw UsageError("a KvStore decorator needs an inner store (got null)");
  return inner;
}
}  // namespace

KvStoreWrapper::KvStoreWrapper(std::shared_ptr<KvStore> inner)
    : inner_(checked(std::move(inner))) {}

KvStoreWrapper::~KvStoreWrapper() = default;

}  // namespace etlc
