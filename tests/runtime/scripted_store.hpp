// A test decorator whose faults aim at one call on one key, where FaultInjectingStore's arm the
// next calls of any kind: "the next update of split.s000 has an unknown outcome and lands, and the
// get that follows fails", "the next get of lease.s001 is answered from an older entry".
// Single-threaded, like the Fleet (tests/runtime/fleet.hpp) that steps the members.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "etlc/fault_injecting_store.hpp"  // OpKind
#include "etlc/kv_store_wrapper.hpp"

namespace etlc::testing {

class ScriptedStore final : public KvStoreWrapper {
 public:
  enum class Fault : std::uint8_t {
    unavailable,      // nothing applied
    unknown_applied,  // the write lands, its answer is lost
    unknown_dropped,  // the write is lost, and so is its answer
    absent,           // a get answers "no such key" (a stale replica)
    stale,            // a get answers `entry` (a stale replica)
    before,           // runs `before` first, then the call goes through
  };
  struct Rule {
    OpKind kind = OpKind::get;
    std::string key;
    Fault fault = Fault::unavailable;
    // Only calls whose value (writes) this accepts; empty: any.
    std::function<bool(std::string_view value)> matches;
    Entry entry;                   // stale
    std::function<void()> before;  // before
    int times = 1;
  };

  using KvStoreWrapper::KvStoreWrapper;

  // A rule for the next call of `kind` on `key`, once.
  static Rule on(OpKind kind, std::string key, Fault fault) {
    Rule r;
    r.kind = kind;
    r.key = std::move(key);
    r.fault = fault;
    return r;
  }
  // Aims a fault at the next matching call(s); rules apply in the order armed.
  void arm(Rule rule) { rules_.push_back(std::move(rule)); }
  // How many calls a rule answered, in all.
  int fired() const { return fired_; }
  WriteResult create(std::string_view key, std::string_view value) override {
    if (auto f = take(OpKind::create, key, value)) {
      return write(*f, [&] { return KvStoreWrapper::create(key, value); });
    }
    return KvStoreWrapper::create(key, value);
  }
  WriteResult update(std::string_view key, std::string_view value, Revision expected) override {
    if (auto f = take(OpKind::update, key, value)) {
      return write(*f, [&] { return KvStoreWrapper::update(key, value, expected); });
    }
    return KvStoreWrapper::update(key, value, expected);
  }
  WriteResult erase(std::string_view key, Revision expected) override {
    if (auto f = take(OpKind::erase, key, {})) {
      return write(*f, [&] { return KvStoreWrapper::erase(key, expected); });
    }
    return KvStoreWrapper::erase(key, expected);
  }
  std::optional<Entry> get(std::string_view key) override {
    if (auto f = take(OpKind::get, key, {})) {
      switch (f->fault) {
        case Fault::absent:
          return std::nullopt;
        case Fault::stale:
          return f->entry;
        case Fault::before:
          f->before();
          break;
        default:
          throw StoreError(StoreErrc::unavailable, "scripted: get failed");
      }
    }
    return KvStoreWrapper::get(key);
  }

 private:
  std::optional<Rule> take(OpKind kind, std::string_view key, std::string_view value) {
    for (auto it = rules_.begin(); it != rules_.end(); ++it) {
      if (it->kind != kind || it->key != key || (it->matches && !it->matches(value))) continue;
      Rule r = *it;
      if (--it->times <= 0) rules_.erase(it);
      ++fired_;
      return r;
    }
    return std::nullopt;
  }
  template <class Send>
  WriteResult write(const Rule& r, const Send& send) {
    switch (r.fault) {
      case Fault::unknown_applied:
        send();
        throw StoreError(StoreErrc::unknown_outcome, "scripted: the answer was lost");
      case Fault::unknown_dropped:
        throw StoreError(StoreErrc::unknown_outcome, "scripted: the write and its answer lost");
      case Fault::before:
        r.before();
        return send();
      default:
        throw StoreError(StoreErrc::unavailable, "scripted: not applied");
    }
  }

  std::vector<Rule> rules_;
  int fired_ = 0;
};

// Puts the store of every member `fleet` adds from now on behind a ScriptedStore of its own,
// found in `scripts` by member id (which must outlive the fleet's adds).
using Scripts = std::map<std::string, std::shared_ptr<ScriptedStore>>;
template <class Fleet>
void script_members(Fleet& fleet, Scripts& scripts) {
  fleet.wrap_store = [&scripts](const std::string& id, std::shared_ptr<KvStore> inner) {
    auto s = std::make_shared<ScriptedStore>(std::move(inner));
    scripts[id] = s;
    return s;
  };
}

}  // namespace etlc::testing
