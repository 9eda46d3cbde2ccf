// verify_fencing: accepts conforming stores, rejects stores that let a forbidden write through
// (naming the primitive), cleans up its scratch key, and lets transport errors through.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "etlc/fault_injecting_store.hpp"
#include "etlc/kv_store_wrapper.hpp"
#include "etlc/memory_store.hpp"

namespace etlc {
namespace {

// Forwards to a MemoryStore (`memory`); subclasses break one primitive on purpose.
class ForwardingStore : public KvStoreWrapper {
 public:
  ForwardingStore() : ForwardingStore(std::make_shared<MemoryStore>()) {}

  MemoryStore& memory;

 private:
  explicit ForwardingStore(const std::shared_ptr<MemoryStore>& store)
      : KvStoreWrapper(store), memory(*store) {}
};

// CAS that ignores the expected revision (a "put").
class IgnoresExpectedRevision final : public ForwardingStore {
 public:
  WriteResult update(std::string_view key, std::string_view value, Revision) override {
    const auto e = memory.get(key);
    return e ? memory.update(key, value, e->revision) : WriteResult{};
  }
};

// Expected revision 0 acts as "write if absent or anything" (a common adapter mistake).
class ZeroMatchesAnything final : public ForwardingStore {
 public:
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override {
    if (expected == 0) {
      const auto e = memory.get(key);
      return e ? memory.update(key, value, e->revision) : memory.create(key, value);
    }
    return memory.update(key, value, expected);
  }
};

// Create that overwrites an existing key.
class CreateOverwrites final : public ForwardingStore {
 public:
  WriteResult create(std::string_view key, std::string_view value) override {
    const auto e = memory.get(key);
    return e ? memory.update(key, value, e->revision) : memory.create(key, value);
  }
};

// Delete that ignores the expected revision.
class EraseIgnoresRevision final : public ForwardingStore {
 public:
  WriteResult erase(std::string_view key, Revision) override {
    const auto e = memory.get(key);
    return e ? memory.erase(key, e->revision) : WriteResult{};
  }
};

// A store with per-key revisions that restart at 1 when a key is re-created (ABA).
class PerKeyRevisions final : public KvStore {
 public:
  WriteResult create(std::string_view key, std::string_view value) override {
    auto [it, inserted] = data_.try_emplace(std::string(key), Item{std::string(value), 1});
    return inserted ? WriteResult{true, 1} : WriteResult{false, it->second.revision};
  }
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override {
    auto it = data_.find(std::string(key));
    if (it == data_.end() || it->second.revision != expected) return {};
    it->second = Item{std::string(value), expected + 1};
    return {true, expected + 1};
  }
  WriteResult erase(std::string_view key, Revision expected) override {
    auto it = data_.find(std::string(key));
    if (it == data_.end() || it->second.revision != expected) return {};
    data_.erase(it);
    return {true, expected + 1};
  }
  std::optional<Entry> get(std::string_view key) override {
    auto it = data_.find(std::string(key));
    if (it == data_.end()) return std::nullopt;
    return Entry{it->first, it->second.value, it->second.revision};
  }
  std::unique_ptr<Watch> watch(std::string_view, WatchOptions) override {
    throw StoreError(StoreErrc::unavailable, "not supported");
  }
  std::unique_ptr<Watch> watch_keys(std::span<const std::string>, WatchOptions) override {
    throw StoreError(StoreErrc::unavailable, "not supported");
  }
  std::vector<Entry> list(std::string_view) override { return {}; }
  std::size_t size() const { return data_.size(); }

 private:
  struct Item {
    std::string value;
    Revision revision;
  };
  std::map<std::string, Item> data_;
};

// A store whose deletes do nothing but report success.
class EraseIsANoOp final : public ForwardingStore {
 public:
  WriteResult erase(std::string_view key, Revision expected) override {
    const auto e = memory.get(key);
    return e && e->revision == expected ? WriteResult{true, expected + 1} : WriteResult{};
  }
};

void expect_incompatible(KvStore& store, const std::string& primitive) {
  try {
    verify_fencing(store, "probe.");
    ADD_FAILURE() << "a store that does not enforce " << primitive << " passed the probe";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::incompatible) << e.what();
    EXPECT_NE(std::string(e.what()).find(primitive), std::string::npos)
        << "the message should name '" << primitive << "': " << e.what();
  }
}

TEST(VerifyFencing, AcceptsMemoryStoreAndCleansUp) {
  MemoryStore store;
  store.create("probe.unrelated", "kept");
  const std::size_t before = store.size();
  verify_fencing(store, "probe.");
  EXPECT_EQ(store.size(), before) << "the scratch key was not removed";
  ASSERT_EQ(store.list("probe.").size(), 1u);
  EXPECT_EQ(store.list("probe.")[0].key, "probe.unrelated");
  // create, CAS, delete, re-create, delete: five winning writes, every losing one wrote nothing.
  EXPECT_EQ(store.last_revision(), 1u + 5u);
  verify_fencing(store, "");  // the empty prefix is valid too
  EXPECT_EQ(store.size(), before);
}

TEST(VerifyFencing, UsesOneFixedKeyPerPrefixSoRestartsReuseIt) {
  MemoryStore store;
  EXPECT_EQ(verify_fencing(store, "etlc-probe.m1."), "etlc-probe.m1.probe");
  EXPECT_EQ(verify_fencing(store, "etlc-probe.m1."), "etlc-probe.m1.probe");
  EXPECT_EQ(store.size(), 0u);
}

// Another prober takes the shared key right after our delete (a twin starting at the same
// moment): that is no evidence against the store, so the probe moves to a key of its own.
class ConcurrentProber final : public ForwardingStore {
 public:
  WriteResult erase(std::string_view key, Revision expected) override {
    WriteResult r = memory.erase(key, expected);
    if (r.ok && key == "probe.probe" && !taken) {
      taken = true;
      memory.create(key, "another prober's value");
    }
    return r;
  }
  bool taken = false;
};

TEST(VerifyFencing, AnotherProberOnTheSharedKeyIsNotIncompatibility) {
  ConcurrentProber store;
  const std::string key = verify_fencing(store, "probe.");
  EXPECT_TRUE(store.taken);
  EXPECT_NE(key, "probe.probe");
  EXPECT_EQ(key.rfind("probe.probe-", 0), 0u) << key;
  // The other prober's key is left alone; ours is gone.
  ASSERT_EQ(store.memory.list("probe.").size(), 1u);
  EXPECT_EQ(store.memory.get("probe.probe")->value, "another prober's value");
}

TEST(VerifyFencing, AcceptsTheTransparentDecorator) {
  auto memory = std::make_shared<MemoryStore>();
  FaultInjectingStore store(memory);
  EXPECT_NO_THROW(verify_fencing(store, "probe."));
  EXPECT_EQ(memory->size(), 0u);
  EXPECT_GT(store.op_count(OpKind::update), 0u);
}

TEST(VerifyFencing, RejectsACasThatIgnoresTheExpectedRevision) {
  IgnoresExpectedRevision store;
  expect_incompatible(store, "compare-and-swap");
  EXPECT_EQ(store.memory.size(), 0u) << "the scratch key is removed after a failed probe too";
}

TEST(VerifyFencing, RejectsACasWhereZeroMatches) {
  ZeroMatchesAnything store;
  expect_incompatible(store, "compare-and-swap");
  EXPECT_EQ(store.memory.size(), 0u);
}

TEST(VerifyFencing, RejectsACreateThatOverwrites) {
  CreateOverwrites store;
  expect_incompatible(store, "create-if-absent");
  EXPECT_EQ(store.memory.size(), 0u);
}

TEST(VerifyFencing, RejectsADeleteThatIgnoresTheExpectedRevision) {
  EraseIgnoresRevision store;
  expect_incompatible(store, "guarded delete");
}

TEST(VerifyFencing, RejectsADeleteThatDoesNotDelete) {
  EraseIsANoOp store;
  expect_incompatible(store, "guarded delete");
}

TEST(VerifyFencing, RejectsRevisionsThatRepeatAfterRecreate) {
  PerKeyRevisions store;
  expect_incompatible(store, "revision assignment");
  EXPECT_EQ(store.size(), 0u);
}

TEST(VerifyFencing, RejectsAnInvalidPrefix) {
  MemoryStore store;
  try {
    verify_fencing(store, "no-trailing-dot");
    ADD_FAILURE() << "an invalid prefix was accepted";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::invalid_argument);
  }
}

TEST(VerifyFencing, LetsTransportErrorsThrough) {
  auto memory = std::make_shared<MemoryStore>();
  FaultInjectingStore store(memory);
  store.fail_next(1);
  try {
    verify_fencing(store, "probe.");
    ADD_FAILURE() << "no error";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::unavailable) << "a transport error is not incompatibility";
  }
  // A first write whose outcome is unknown but which landed: reported, and cleaned up.
  store.unknown_outcome_next(1, /*apply=*/true);
  try {
    verify_fencing(store, "probe.");
    ADD_FAILURE() << "no error";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.code(), StoreErrc::unknown_outcome);
  }
  EXPECT_EQ(memory->size(), 0u) << "the scratch key that landed was removed";
  EXPECT_NO_THROW(verify_fencing(store, "probe."));
}

}  // namespace
}  // namespace etlc
