// The fleet harness: store backends (one shared MemoryStore, or one NatsStore connection per
// member to a nats-server), a planner of N equal splits, members in thread mode (Coordinator::start
// on SystemClock) each with its own user thread answering events, and a timeline of protocol
// steps observed at the store (claims, leader records, assignment publishes, seeding).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "counting_store.hpp"
#include "etlc/clock.hpp"
#include "etlc/config.hpp"
#include "etlc/coordinator.hpp"
#include "etlc/planner.hpp"

namespace etlc::testing {
class NatsServer;
}

namespace etlc::bench {

using Time = Clock::time_point;
inline Time now() {
  return SystemClock::instance().now();
}
inline double ms_between(Time a, Time b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
inline std::int64_t to_ns(Time t) {
  return t.time_since_epoch().count();
}
inline Time from_ns(std::int64_t ns) {
  return Time(Clock::duration(ns));
}

// Where members' stores come from. One Backend per measured run: a fresh MemoryStore, or a fresh
// nats-server (or, with an external URL, a fresh bucket) so runs never see each other's keys.
class Backend {
 public:
  virtual ~Backend() = default;
  // A store handle for one member (NATS: its own connection).
  virtual std::shared_ptr<KvStore> connect(const std::string& member) = 0;
  // Closes a member's connection (a crashed process's socket closes). No-op for memory.
  virtual void disconnect(const std::shared_ptr<KvStore>& store) = 0;
  virtual std::string name() const = 0;
  // Watches this connection's store broke so far (NATS: NatsStoreStats::watches_broken).
  virtual std::uint64_t watches_broken(const std::shared_ptr<KvStore>& store) const = 0;

  // Member::Options::targeted_watches for every member a Fleet on this backend builds (decision
  // 0009); nullopt leaves the library's default. Set by make_backend from BackendOptions.
  std::optional<bool> targeted_watches() const { return targeted_watches_; }
  void set_targeted_watches(std::optional<bool> on) { targeted_watches_ = on; }

 private:
  std::optional<bool> targeted_watches_;
};

struct BackendOptions {
  std::string store = "memory";  // memory | nats
  std::string nats_url;          // empty: start a nats-server per run (tests/support fixture)
  int nats_history = 1;          // NatsStoreOptions::history of the bucket
  std::int64_t nats_op_timeout_ms = 0;  // NatsStoreOptions::op_timeout_ms (0: the default)
  // Every member's Member::Options::targeted_watches (fleet_bench --targeted-watches on|off);
  // nullopt: the library's default.
  std::optional<bool> targeted_watches;
};

// The library's default for Member::Options::targeted_watches.
bool library_default_targeted_watches();
// What members of a fleet built from `options` use: the override, else the library's default.
bool effective_targeted_watches(const BackendOptions& options);

std::unique_ptr<Backend> make_backend(const BackendOptions& options);

// N splits "s0000000".., weight 1, small descriptors; a final plan.
class BenchPlanner final : public Planner {
 public:
  explicit BenchPlanner(std::size_t splits) : splits_(splits) {}
  std::string fingerprint() const override { return "fleet-bench-v1"; }
  Plan plan(const PlanContext& context) override;
  static std::string split_id(std::size_t i);

 private:
  std::size_t splits_;
};

// Protocol steps observed through every member's CountingStore.
class Timeline {
 public:
  struct Claim {
    std::string member;
    std::uint64_t epoch = 0;
    Time at{};
  };
  struct Mark {
    std::string member;
    Time at{};
  };

  // Claims: a successful split.* CAS naming its writer as owner at a new epoch.
  void record_claim(const std::string& split, const std::string& member, std::uint64_t epoch,
                    Time at);
  // Waits until `split` is claimed by someone other than `not_by` at a time >= after.
  std::optional<Claim> wait_claim(const std::string& split, const std::string& not_by, Time after,
                                  std::chrono::milliseconds timeout);
  // Waits until every split in `splits` was claimed (not by `not_by`) at or after `after`;
  // returns the time of the last such claim.
  std::optional<Time> wait_all_claimed(const std::vector<std::string>& splits,
                                       const std::string& not_by, Time after,
                                       std::chrono::milliseconds timeout);
  std::uint64_t claims_since(Time after) const;

  void record_leader_write(const std::string& member, Time at);
  void record_assign_write(const std::string& member, Time at);
  void record_plan_published(const std::string& member, Time at);
  void record_split_create(Time at);
  void record_spec_create(Time at);

  std::optional<Mark> first_leader_write_after(Time t, const std::string& not_by) const;
  std::optional<Mark> first_assign_write_after(Time t, const std::string& not_by) const;
  std::optional<Time> plan_published() const;
  std::uint64_t split_creates() const { return split_creates_.load(); }
  std::uint64_t spec_creates() const { return spec_creates_.load(); }
  std::optional<Time> first_split_create() const;
  std::optional<Time> last_split_create() const;
  std::optional<Time> first_create() const;  // first spec or split create

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Claim> last_claim_;
  std::vector<Time> claim_times_;
  std::vector<Mark> leader_writes_;
  std::vector<Mark> assign_writes_;
  std::optional<Time> plan_published_;
  std::atomic<std::uint64_t> split_creates_{0};
  std::atomic<std::uint64_t> spec_creates_{0};
  std::atomic<std::int64_t> first_split_ns_{0};
  std::atomic<std::int64_t> last_split_ns_{0};
  std::atomic<std::int64_t> first_create_ns_{0};
};

// How a member's user thread answers RevokeRequested.
enum class RevokePolicy : std::uint8_t {
  release_now,  // release_drained at once (a lane with nothing left to drain)
  queue,        // park it; the scenario releases (Fleet::take_revocation)
};

struct MemberSlot {
  std::string id;
  std::shared_ptr<KvStore> connection;
  std::shared_ptr<CountingStore> store;
  std::unique_ptr<Coordinator> coord;
  std::thread user;
  std::atomic<bool> running{false};
  std::atomic<std::uint64_t> granted{0};
  std::atomic<std::uint64_t> revoked{0};
  std::atomic<std::uint64_t> lost{0};
  std::array<std::atomic<std::uint64_t>, 8> lost_by_reason{};  // indexed by LossReason
  std::atomic<std::uint64_t> fatal{0};
  std::atomic<std::int64_t> last_renew_ns{0};  // last acknowledged session write (ns, steady)
};

struct FleetOptions {
  std::size_t splits = 0;
  CoordinatorConfig base;      // instance_id is set per member
  bool track_timeline = true;  // decode split writes in the store observer (off for commits)
  RevokePolicy revoke = RevokePolicy::release_now;
};

class Fleet {
 public:
  Fleet(Backend& backend, FleetOptions options);
  ~Fleet();  // stops every user thread, shuts members down (bounded), disconnects

  // Connects a store and builds the member (not started). `tweak` edits its config.
  MemberSlot& add(const std::string& id, const std::function<void(CoordinatorConfig&)>& tweak = {});
  // Starts one member (joins on this thread) and its user thread.
  void start(MemberSlot& m);
  // Starts several members from `threads` threads at once.
  void start_all(const std::vector<MemberSlot*>& members, std::size_t threads);
  // Crash: abandon (no release, no store write), stop its user thread, close its connection.
  void kill(MemberSlot& m);

  std::vector<MemberSlot*> live() const;
  MemberSlot* leader() const;
  Timeline& timeline() { return timeline_; }
  const std::shared_ptr<Planner>& planner() const { return planner_; }

  // Watches broken so far, summed over every member's connection (each break is a re-watch
  // and a fresh snapshot).
  std::uint64_t watches_broken() const;
  // Total splits held by live members.
  std::size_t held_total() const;
  // Every live member holds exactly what its assignment names (and has one), and no revocation
  // is parked in the queue.
  bool settled() const;
  // Polls `pred` every kPollInterval until true or `timeout`; returns the last answer. (Polling
  // copies every member's held ids, so it is kept coarse: the bench must not eat the CPU it
  // measures. Exact times come from the Timeline, not from polling.)
  static constexpr std::chrono::milliseconds kPollInterval{20};
  static bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

  // RevokePolicy::queue: the oldest parked revocation of member `m`, waiting up to `timeout`.
  std::optional<std::string> take_revocation(MemberSlot& m, std::chrono::milliseconds timeout);
  std::size_t parked_revocations() const;

 private:
  void user_loop(MemberSlot& m);
  void stop_user(MemberSlot& m);

  Backend& backend_;
  FleetOptions options_;
  std::shared_ptr<Planner> planner_;
  Timeline timeline_;
  std::vector<std::unique_ptr<MemberSlot>> members_;

  mutable std::mutex revoke_mu_;
  std::condition_variable revoke_cv_;
  std::map<std::string, std::vector<std::string>> parked_;  // member -> split ids
};

// The member job.standby names (empty: none or unreadable). Store errors propagate.
std::string standby_of(KvStore& store);

// Nearest-rank percentile of `v` (p in [0, 100]); NaN for an empty sample.
double percentile(std::vector<double> v, double p);
double median(std::vector<double> v);

// /proc/loadavg's first figure, and this process's CPU seconds (user + system).
double load_average();
double process_cpu_seconds();

// This process's resident memory from /proc/self/status, in MiB: VmRSS now, VmHWM (the peak so
// far). NaN where the file or the field is missing.
struct MemoryUse {
  double rss_mib = 0;
  double peak_mib = 0;
};
MemoryUse process_memory();

}  // namespace etlc::bench
