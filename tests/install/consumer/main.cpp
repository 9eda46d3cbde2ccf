// Uses the installed library: a MemoryStore round trip and the startup probe. Exit 0 on success.
#include <etlc/memory_store.hpp>
#include <etlc/store.hpp>

#include <cstdio>

int main() {
  etlc::MemoryStore store;
  const etlc::WriteResult created = store.create("consumer.hello", "world");
  const auto entry = store.get("consumer.hello");
  if (!created.ok || !entry || entry->value != "world" || entry->revision != created.revision) {
    std::fprintf(stderr, "consumer: create/get round trip failed\n");
    return 1;
  }
  try {
    etlc::verify_fencing(store, "probe.");
  } catch (const etlc::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  std::printf("consumer: ok (revision %llu)\n", static_cast<unsigned long long>(entry->revision));
  return 0;
}
