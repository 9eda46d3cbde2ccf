// RecordingStore: the innermost decorator of a member's store stack. It forwards every call to
// the shared MemoryStore and reports each write, with the identity of the process that sent it,
// to History (which checks the invariants the moment the write lands).
//
// The sender's identity is set by the SimStore above it before each forwarded write (`context`),
// so a write that lands late is still attributed to the process and call that sent it.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "etlc/kv_store_wrapper.hpp"
#include "etlc/memory_store.hpp"
#include "history.hpp"

namespace etlc::sim {

class RecordingStore final : public KvStoreWrapper {
 public:
  RecordingStore(std::shared_ptr<MemoryStore> inner, History& history)
      : KvStoreWrapper(std::move(inner)), history_(history) {}

  WriteResult create(std::string_view key, std::string_view value) override {
    WriteResult r = KvStoreWrapper::create(key, value);
    history_.on_write(OpKind::create, key, value, r, context);
    return r;
  }
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override {
    WriteResult r = KvStoreWrapper::update(key, value, expected);
    history_.on_write(OpKind::update, key, value, r, context);
    return r;
  }
  WriteResult erase(std::string_view key, Revision expected) override {
    WriteResult r = KvStoreWrapper::erase(key, expected);
    history_.on_write(OpKind::erase, key, {}, r, context);
    return r;
  }
  // Each request of a batch is recorded as the create it is, in request order.
  std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests) override {
    std::vector<CreateOutcome> out = KvStoreWrapper::create_many(requests);
    for (std::size_t i = 0; i < out.size() && i < requests.size(); ++i) {
      if (!out[i].error)
        history_.on_write(OpKind::create, requests[i].key, requests[i].value, out[i].result,
                          context);
    }
    return out;
  }
  // get, watch, watch_keys and list pass through unrecorded (KvStoreWrapper).

  // Who is writing (set by the SimStore before each write it forwards).
  Writer context;

 private:
  History& history_;
};

}  // namespace etlc::sim
