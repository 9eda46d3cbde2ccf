// Create-if-absent on a KV subject, shared by NatsStore::create and create_many.
//
// A create publishes guarded by "expected last subject sequence" = the key's last known delete
// marker (0 when none is known). When that guard fails the subject holds a message: a live value
// (the create loses) or a delete marker (publish again guarded by it, so that of two concurrent
// creates of a deleted key exactly one wins). Thread-safe (Core is).
#pragma once

#include <cstdint>
#include <string_view>

#include "etlc/store.hpp"
#include "store/nats/nats_core.hpp"

namespace etlc::nats_detail {

// The whole create of one valid key (see etlc/nats_store.hpp). Throws like a write.
WriteResult create_key(Core& core, std::string_view key, std::string_view value);

// The rest of a create whose first publish, guarded by `expected`, did not apply (`failed`:
// !ok, with the subject's last revision when the server named it). Takes the same steps
// create_key takes after such an answer. Throws like a write.
WriteResult finish_create(Core& core, std::string_view key, std::string_view value,
                          std::uint64_t expected, const Published& failed);

}  // namespace etlc::nats_detail
