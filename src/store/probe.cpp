// verify_fencing: the startup probe (see include/etlc/store.hpp and docs/store-contract.md).
//
// Fencing is the protocol's only correctness mechanism, and it rests entirely on the store
// enforcing create-if-absent, compare-and-swap and guarded delete with revisions that never
// repeat. A misconfigured or non-conforming backend would let stale owners write silently, so a
// member proves those primitives on a scratch key before it trusts the store.
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "etlc/store.hpp"

namespace etlc {
namespace {

[[noreturn]] void incompatible(std::string_view primitive, std::string_view what,
                               std::string_view key) {
  throw StoreError(StoreErrc::incompatible,
                   fmt::format("{} is not enforced: {} (probe key '{}'); the store cannot be "
                               "trusted with fencing",
                               primitive, what, key));
}

// Unique per call so that members probing the same bucket at once never collide.
std::string scratch_key(std::string_view prefix) {
  std::random_device device;
  const std::uint64_t token = (std::uint64_t{device()} << 32) ^ std::uint64_t{device()};
  return fmt::format("{}probe-{:016x}", prefix, token);
}

// Leaves no scratch key behind if the probe stopped half way; failures here are ignored because
// the probe's own error is the one to report.
void remove_quietly(KvStore& store, const std::string& key) noexcept {
  try {
    for (int attempt = 0; attempt < 3; ++attempt) {
      const std::optional<Entry> entry = store.get(key);
      if (!entry || store.erase(key, entry->revision).ok) return;
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): best effort, see above
  }
}

void expect_entry(KvStore& store, const std::string& key, std::string_view value, Revision revision,
                  std::string_view primitive, std::string_view after) {
  const std::optional<Entry> entry = store.get(key);
  if (!entry) incompatible(primitive, fmt::format("the key reads as absent after {}", after), key);
  if (entry->value != value || entry->revision != revision) {
    incompatible(primitive,
                 fmt::format("after {} the key holds revision {} instead of {}", after,
                             entry->revision, revision),
                 key);
  }
}

// The checks, on a key that `create` just created at revision r1 with value "probe-1".
void run_checks(KvStore& store, const std::string& key, Revision r1) {
  if (r1 == 0) incompatible("revision assignment", "create returned revision 0", key);

  if (store.create(key, "probe-2").ok) {
    incompatible("create-if-absent", "a second create of an existing key won", key);
  }
  expect_entry(store, key, "probe-1", r1, "create-if-absent", "a losing create");

  if (store.update(key, "probe-zero", 0).ok) {
    incompatible("compare-and-swap", "expected revision 0 matched a live key", key);
  }
  const WriteResult cas = store.update(key, "probe-3", r1);
  if (!cas.ok) incompatible("compare-and-swap", "a CAS with the current revision lost", key);
  const Revision r2 = cas.revision;
  if (r2 <= r1) {
    incompatible("revision assignment",
                 fmt::format("a CAS moved the revision from {} to {}, not upwards", r1, r2), key);
  }
  if (store.update(key, "probe-stale", r1).ok) {
    incompatible("compare-and-swap", "a CAS with a stale revision won", key);
  }
  expect_entry(store, key, "probe-3", r2, "compare-and-swap", "a winning and a losing CAS");

  if (store.erase(key, r1).ok) {
    incompatible("guarded delete", "a delete with a stale revision won", key);
  }
  expect_entry(store, key, "probe-3", r2, "guarded delete", "a losing delete");
  const WriteResult del = store.erase(key, r2);
  if (!del.ok) incompatible("guarded delete", "a delete with the current revision lost", key);
  const Revision r3 = del.revision;
  if (r3 <= r2) {
    incompatible("revision assignment",
                 fmt::format("a delete got revision {}, not above the key's {}", r3, r2), key);
  }
  if (store.get(key)) incompatible("guarded delete", "a deleted key still reads as live", key);

  const WriteResult again = store.create(key, "probe-4");
  if (!again.ok) incompatible("create-if-absent", "a deleted key did not count as absent", key);
  const Revision r4 = again.revision;
  if (r4 <= r3) {
    incompatible(
        "revision assignment",
        fmt::format("a re-created key got revision {}, not above its delete's {} (ABA)", r4, r3),
        key);
  }
  if (store.update(key, "probe-aba", r2).ok) {
    incompatible("compare-and-swap",
                 "a revision from before the delete matched the re-created key (ABA)", key);
  }
  if (!store.erase(key, r4).ok) {
    incompatible("guarded delete", "a delete with the current revision lost", key);
  }
}

}  // namespace

void verify_fencing(KvStore& store, std::string_view scratch_prefix) {
  validate_prefix(scratch_prefix);
  std::string key;
  try {
    // A fresh random key that already exists is astronomically unlikely unless create-if-absent
    // refuses absent keys; three tries tell the two apart.
    for (int attempt = 0; attempt < 3; ++attempt) {
      key = scratch_key(scratch_prefix);
      const WriteResult created = store.create(key, "probe-1");
      if (created.ok) {
        run_checks(store, key, created.revision);
        return;
      }
    }
    incompatible("create-if-absent", "three creates of fresh random keys all lost", key);
  } catch (...) {
    if (!key.empty()) remove_quietly(store, key);
    throw;
  }
}

}  // namespace etlc
