// OpCountingStore: the outermost decorator of a projected member's store stack (projection.hpp).
// It counts what the member asks of the store, by call, and what its watches deliver, and keeps
// the scope of every watch the member holds open (a prefix or a set of keys) so the projection
// can size the member's views and the NATS resources they would take.
//
//   Member -> OpCountingStore -> SimStore (no faults) -> FaultInjectingStore -> RecordingStore
//          -> MemoryStore (shared)
//
// Counts are of calls made (a failed call counts too; the projection injects no faults). A
// create_many is one call carrying `create_many_requests` creates. Deliveries are put and erase
// events returned by poll(); the caught_up marker is not a delivery.
//
// Thread safety: none; the projection drives every member on one thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "etlc/kv_store_wrapper.hpp"

namespace etlc::sim {

// Key families of the protocol (core/keys.hpp), for deliveries.
enum class KeyFamily : std::uint8_t { job, member, lease, assign, split, other };
inline constexpr std::size_t kKeyFamilies = 6;
KeyFamily key_family(std::string_view key);
std::string_view to_string(KeyFamily f);

struct OpCounts {
  std::uint64_t get = 0, list = 0, create = 0, update = 0, erase = 0;
  std::uint64_t watch_prefix = 0;  // prefix watches opened
  std::uint64_t watch_keys = 0;    // key watches opened
  std::uint64_t create_many = 0;   // batches
  std::uint64_t create_many_requests = 0;
  std::array<std::uint64_t, kKeyFamilies> delivered{};  // put/erase events, by key family

  std::uint64_t deliveries() const;
  // Every call to the store (a batch is one call).
  std::uint64_t operations() const {
    return get + list + create + update + erase + watch_prefix + watch_keys + create_many;
  }
  OpCounts operator-(const OpCounts& earlier) const;
  OpCounts& operator+=(const OpCounts& other);
};

// The scope of one open watch: a prefix, or exact keys.
struct WatchScope {
  bool prefix = false;
  std::vector<std::string> keys;  // one entry (the prefix) for a prefix watch
};

class OpCountingStore final : public KvStoreWrapper {
 public:
  explicit OpCountingStore(std::shared_ptr<KvStore> inner);

  WriteResult create(std::string_view key, std::string_view value) override;
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override;
  WriteResult erase(std::string_view key, Revision expected) override;
  std::optional<Entry> get(std::string_view key) override;
  std::vector<Entry> list(std::string_view prefix) override;
  std::unique_ptr<Watch> watch(std::string_view prefix, WatchOptions options) override;
  std::unique_ptr<Watch> watch_keys(std::span<const std::string> keys,
                                    WatchOptions options) override;
  std::vector<CreateOutcome> create_many(std::span<const CreateRequest> requests) override;

  const OpCounts& counts() const { return *counts_; }
  // The scopes of the watches still open (their handles not yet destroyed).
  std::vector<WatchScope> open_scopes() const;

 private:
  struct Open;
  std::unique_ptr<Watch> track(std::unique_ptr<Watch> inner, WatchScope scope);

  std::shared_ptr<OpCounts> counts_ = std::make_shared<OpCounts>();
  std::vector<std::weak_ptr<Open>> open_;
};

}  // namespace etlc::sim
