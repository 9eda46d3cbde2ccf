// WatchSlot: one watch of a member's views (a prefix watch, or a key watch of a few exact keys)
// and whether its snapshot has arrived.
//
// Every view keeps only each key's latest state, so watches are latest-only: a skipped
// intermediate value (a commit, a renewal) changes nothing a view decides, while re-watching
// costs a snapshot of the prefix. A watch that breaks is dropped and re-opened by the next step
// from a fresh snapshot, which rebuilds its view. Not thread-safe: the control loop owns it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "etlc/store.hpp"
#include "runtime/member_context.hpp"

namespace etlc::runtime {

class WatchSlot {
 public:
  // Events handled per watch per step, so one busy prefix cannot hold the step up.
  static constexpr std::size_t kEventsPerStep = 4096;

  explicit WatchSlot(std::string_view prefix) : prefix_(prefix), what_(prefix) {}
  // A key watch of `keys` (1..kMaxWatchKeys distinct keys).
  explicit WatchSlot(std::vector<std::string> keys);

  const std::string& prefix() const { return prefix_; }
  const std::vector<std::string>& keys() const { return keys_; }
  bool open() const { return watch_ != nullptr; }
  bool caught_up() const { return caught_up_; }
  void start(KvStore& store, const std::function<void()>& notify);
  void reset();

  // Hands every pending event (at most kEventsPerStep) to `handle`; an event whose value
  // `handle` cannot decode (it threw RecordError or ConfigError) is counted, logged and, for a
  // put, handed to `unreadable` with the reason. Returns true if events remain. A broken watch
  // is reset and reported as "events remain" (the next step re-opens it).
  bool drain(const MemberContext& ctx, const std::function<void(const WatchEvent&)>& handle,
             const std::function<void(const WatchEvent&, const std::string&)>& unreadable);

 private:
  std::string prefix_;
  std::vector<std::string> keys_;  // non-empty: a key watch
  std::string what_;               // for the log
  std::unique_ptr<Watch> watch_;
  bool caught_up_ = false;
  std::vector<WatchEvent> batch_;
};

}  // namespace etlc::runtime
