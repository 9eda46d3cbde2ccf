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

// Another prober wrote the shared key while we checked it: not evidence against the store.
struct Interfered {};

std::string random_token() {
  std::random_device device;
  const std::uint64_t token = (std::uint64_t{device()} << 32) ^ std::uint64_t{device()};
  return fmt::format("{:016x}", token);
}

// Leaves no scratch key behind if the probe stopped half way; failures here are ignored because
// the probe's own error is the one to report.
void remove_quietly(KvStore& store, const std::string& key, std::string_view token) noexcept {
  try {
    for (int attempt = 0; attempt < 3; ++attempt) {
      const std::optional<Entry> entry = store.get(key);
      if (!entry || entry->value.find(token) == std::string::npos) return;  // not ours
      if (store.erase(key, entry->revision).ok) return;
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): best effort, see above
  }
}

// One run of the checks on one key. Every value written carries `token`, so a broken store shows
// our own values, while a foreign or missing value on a key other probers share (`shared`) means
// one of them used it meanwhile: Interfered, and the caller retries on a key of its own.
class Checks {
 public:
  Checks(KvStore& store, std::string key, std::string token, bool shared)
      : store_(store), key_(std::move(key)), token_(std::move(token)), shared_(shared) {}

  std::string value(std::string_view name) const { return fmt::format("{}-{}", name, token_); }

  [[noreturn]] void fail(std::string_view primitive, std::string_view what) const {
    if (shared_) {
      const std::optional<Entry> e = store_.get(key_);
      if (!e || e->value.find(token_) == std::string::npos) throw Interfered{};
    }
    incompatible(primitive, what, key_);
  }

  void expect_entry(std::string_view name, Revision revision, std::string_view primitive,
                    std::string_view after) const {
    const std::optional<Entry> entry = store_.get(key_);
    if (!entry) fail(primitive, fmt::format("the key reads as absent after {}", after));
    if (entry->value != value(name) || entry->revision != revision) {
      fail(primitive, fmt::format("after {} the key holds revision {} instead of {}", after,
                                  entry->revision, revision));
    }
  }

  // The checks, on a key that `create` just created at revision r1 with value("probe-1").
  void run(Revision r1) const;

 private:
  KvStore& store_;
  std::string key_;
  std::string token_;
  bool shared_;
};

void Checks::run(Revision r1) const {
  KvStore& s = store_;
  const std::string& k = key_;
  if (r1 == 0) fail("revision assignment", "create returned revision 0");
  if (s.create(k, value("probe-2")).ok) {
    fail("create-if-absent", "a second create of an existing key won");
  }
  expect_entry("probe-1", r1, "create-if-absent", "a losing create");
  if (s.update(k, value("probe-zero"), 0).ok) {
    fail("compare-and-swap", "expected revision 0 matched a live key");
  }
  const WriteResult cas = s.update(k, value("probe-3"), r1);
  if (!cas.ok) fail("compare-and-swap", "a CAS with the current revision lost");
  const Revision r2 = cas.revision;
  if (r2 <= r1) {
    fail("revision assignment",
         fmt::format("a CAS moved the revision from {} to {}, not upwards", r1, r2));
  }
  if (s.update(k, value("probe-stale"), r1).ok) {
    fail("compare-and-swap", "a CAS with a stale revision won");
  }
  expect_entry("probe-3", r2, "compare-and-swap", "a winning and a losing CAS");
  if (s.erase(k, r1).ok) fail("guarded delete", "a delete with a stale revision won");
  expect_entry("probe-3", r2, "guarded delete", "a losing delete");
  const WriteResult del = s.erase(k, r2);
  if (!del.ok) fail("guarded delete", "a delete with the current revision lost");
  const Revision r3 = del.revision;
  if (r3 <= r2) {
    fail("revision assignment",
         fmt::format("a delete got revision {}, not above the key's {}", r3, r2));
  }
  if (s.get(k)) fail("guarded delete", "a deleted key still reads as live");
  const WriteResult again = s.create(k, value("probe-4"));
  if (!again.ok) fail("create-if-absent", "a deleted key did not count as absent");
  const Revision r4 = again.revision;
  if (r4 <= r3) {
    fail("revision assignment",
         fmt::format("a re-created key got revision {}, not above its delete's {} (ABA)", r4, r3));
  }
  if (s.update(k, value("probe-aba"), r2).ok) {
    fail("compare-and-swap", "a revision from before the delete matched the re-created key (ABA)");
  }
  if (!s.erase(k, r4).ok) fail("guarded delete", "a delete with the current revision lost");
}

// Creates `key` and runs the checks on it. False if the key was live already (someone else's).
bool probe_key(KvStore& store, const std::string& key, const std::string& token, bool shared) {
  const Checks checks(store, key, token, shared);
  try {
    const WriteResult created = store.create(key, checks.value("probe-1"));
    if (!created.ok) return false;
    checks.run(created.revision);
    return true;
  } catch (...) {
    remove_quietly(store, key, token);
    throw;
  }
}

}  // namespace

std::string verify_fencing(KvStore& store, std::string_view scratch_prefix) {
  validate_prefix(scratch_prefix);
  const std::string token = random_token();
  // The fixed key first: a prober that starts again under the same prefix reuses it, so restarts
  // leave at most one delete marker behind. If another prober holds or takes it meanwhile (a twin
  // starting at once, an interrupted probe's leftover), a random key of our own.
  const std::string fixed = std::string(scratch_prefix) + "probe";
  try {
    if (probe_key(store, fixed, token, true)) return fixed;
  } catch (const Interfered&) {
  }
  // A fresh random key that already exists is astronomically unlikely unless create-if-absent
  // refuses absent keys; three tries tell the two apart.
  std::string key;
  for (int attempt = 0; attempt < 3; ++attempt) {
    key = fmt::format("{}probe-{}", scratch_prefix, random_token());
    if (probe_key(store, key, token, false)) return key;
  }
  incompatible("create-if-absent", "three creates of fresh random keys all lost", key);
}

}  // namespace etlc
