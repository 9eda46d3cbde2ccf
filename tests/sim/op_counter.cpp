#include "op_counter.hpp"

#include <algorithm>
#include <utility>

#include "core/keys.hpp"

namespace etlc::sim {

KeyFamily key_family(std::string_view key) {
  auto starts = [&](std::string_view p) { return key.substr(0, p.size()) == p; };
  if (starts(core::kJobPrefix)) return KeyFamily::job;
  if (starts(core::kMemberPrefix)) return KeyFamily::member;
  if (starts(core::kLeasePrefix)) return KeyFamily::lease;
  if (starts(core::kAssignPrefix)) return KeyFamily::assign;
  if (starts(core::kSplitPrefix)) return KeyFamily::split;
  return KeyFamily::other;
}

std::string_view to_string(KeyFamily f) {
  switch (f) {
    case KeyFamily::job:
      return "job";
    case KeyFamily::member:
      return "member";
    case KeyFamily::lease:
      return "lease";
    case KeyFamily::assign:
      return "assign";
    case KeyFamily::split:
      return "split";
    case KeyFamily::other:
      return "other";
  }
  return "?";
}

std::uint64_t OpCounts::deliveries() const {
  std::uint64_t n = 0;
  for (auto d : delivered) n += d;
  return n;
}

OpCounts OpCounts::operator-(const OpCounts& e) const {
  OpCounts d = *this;
  d.get -= e.get;
  d.list -= e.list;
  d.create -= e.create;
  d.update -= e.update;
  d.erase -= e.erase;
  d.watch_prefix -= e.watch_prefix;
  d.watch_keys -= e.watch_keys;
  d.create_many -= e.create_many;
  d.create_many_requests -= e.create_many_requests;
  for (std::size_t i = 0; i < kKeyFamilies; ++i) d.delivered[i] -= e.delivered[i];
  return d;
}

OpCounts& OpCounts::operator+=(const OpCounts& o) {
  get += o.get;
  list += o.list;
  create += o.create;
  update += o.update;
  erase += o.erase;
  watch_prefix += o.watch_prefix;
  watch_keys += o.watch_keys;
  create_many += o.create_many;
  create_many_requests += o.create_many_requests;
  for (std::size_t i = 0; i < kKeyFamilies; ++i) delivered[i] += o.delivered[i];
  return *this;
}

// What the counting store knows of an open watch: its scope. Owned by the handle.
struct OpCountingStore::Open {
  WatchScope scope;
};

namespace {

class CountedWatch final : public Watch {
 public:
  CountedWatch(std::unique_ptr<Watch> inner, std::shared_ptr<OpCounts> counts,
               std::shared_ptr<void> open)
      : inner_(std::move(inner)), counts_(std::move(counts)), open_(std::move(open)) {}

  std::size_t poll(std::vector<WatchEvent>& out, std::size_t max_events) override {
    const std::size_t first = out.size();
    const std::size_t n = inner_->poll(out, max_events);
    for (std::size_t i = first; i < out.size(); ++i) {
      if (out[i].kind == WatchEvent::Kind::caught_up) continue;
      ++counts_->delivered[static_cast<std::size_t>(key_family(out[i].key))];
    }
    return n;
  }

 private:
  std::unique_ptr<Watch> inner_;
  std::shared_ptr<OpCounts> counts_;
  std::shared_ptr<void> open_;  // keeps the scope alive exactly while the handle is
};

}  // namespace

OpCountingStore::OpCountingStore(std::shared_ptr<KvStore> inner)
    : KvStoreWrapper(std::move(inner)) {}

WriteResult OpCountingStore::create(std::string_view key, std::string_view value) {
  ++counts_->create;
  return KvStoreWrapper::create(key, value);
}

WriteResult OpCountingStore::update(std::string_view key, std::string_view value,
                                    Revision expected) {
  ++counts_->update;
  return KvStoreWrapper::update(key, value, expected);
}

WriteResult OpCountingStore::erase(std::string_view key, Revision expected) {
  ++counts_->erase;
  return KvStoreWrapper::erase(key, expected);
}

std::optional<Entry> OpCountingStore::get(std::string_view key) {
  ++counts_->get;
  return KvStoreWrapper::get(key);
}

std::vector<Entry> OpCountingStore::list(std::string_view prefix) {
  ++counts_->list;
  return KvStoreWrapper::list(prefix);
}

std::unique_ptr<Watch> OpCountingStore::watch(std::string_view prefix, WatchOptions options) {
  ++counts_->watch_prefix;
  auto inner = KvStoreWrapper::watch(prefix, std::move(options));
  return track(std::move(inner), WatchScope{true, {std::string(prefix)}});
}

std::unique_ptr<Watch> OpCountingStore::watch_keys(std::span<const std::string> keys,
                                                   WatchOptions options) {
  ++counts_->watch_keys;
  auto inner = KvStoreWrapper::watch_keys(keys, std::move(options));
  return track(std::move(inner), WatchScope{false, {keys.begin(), keys.end()}});
}

std::vector<CreateOutcome> OpCountingStore::create_many(std::span<const CreateRequest> requests) {
  ++counts_->create_many;
  counts_->create_many_requests += requests.size();
  return KvStoreWrapper::create_many(requests);
}

std::unique_ptr<Watch> OpCountingStore::track(std::unique_ptr<Watch> inner, WatchScope scope) {
  auto open = std::make_shared<Open>();
  open->scope = std::move(scope);
  open_.erase(std::remove_if(open_.begin(), open_.end(),
                             [](const std::weak_ptr<Open>& w) { return w.expired(); }),
              open_.end());
  open_.push_back(open);
  return std::make_unique<CountedWatch>(std::move(inner), counts_, std::move(open));
}

std::vector<WatchScope> OpCountingStore::open_scopes() const {
  std::vector<WatchScope> out;
  for (const auto& w : open_) {
    if (auto o = w.lock()) out.push_back(o->scope);
  }
  return out;
}

}  // namespace etlc::sim
