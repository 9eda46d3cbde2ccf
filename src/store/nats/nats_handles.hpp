// Owning handles for nats.c objects (each destroyed with its own *_Destroy function).
#pragma once

#include <nats/nats.h>

#include <memory>

namespace etlc::nats_detail {

template <typename T, void (*Destroy)(T*)>
struct NatsDeleter {
  void operator()(T* p) const noexcept {
    if (p != nullptr) Destroy(p);
  }
};

using OptionsPtr = std::unique_ptr<natsOptions, NatsDeleter<natsOptions, natsOptions_Destroy>>;
using MsgPtr = std::unique_ptr<natsMsg, NatsDeleter<natsMsg, natsMsg_Destroy>>;
using PubAckPtr = std::unique_ptr<jsPubAck, NatsDeleter<jsPubAck, jsPubAck_Destroy>>;
using StreamInfoPtr =
    std::unique_ptr<jsStreamInfo, NatsDeleter<jsStreamInfo, jsStreamInfo_Destroy>>;
using EntryPtr = std::unique_ptr<kvEntry, NatsDeleter<kvEntry, kvEntry_Destroy>>;
using WatcherPtr = std::unique_ptr<kvWatcher, NatsDeleter<kvWatcher, kvWatcher_Destroy>>;
using KvPtr = std::unique_ptr<kvStore, NatsDeleter<kvStore, kvStore_Destroy>>;
using JsPtr = std::unique_ptr<jsCtx, NatsDeleter<jsCtx, jsCtx_Destroy>>;

}  // namespace etlc::nats_detail
