// Session: this member's own liveness record, member.{instance}, one per process incarnation.
//
// It is created (or adopted from an earlier process of this instance id: newer wins) and renewed
// by CAS every lease / 3. The renewal is the first thing every step does, and every other slice
// of work in a step is bounded, so bulk work never delays it. A member that has not had a renewal
// acknowledged within lease - op_timeout of the *send* time of its last successful one must stop
// its lanes itself (starved) before any peer may expire it. A renewal that finds the record gone
// was expired by peers; one that finds another nonce means a second live process uses this
// instance id (a twin): the newer one wins, this one must stop. Garbage over our own key is
// replaced: we own it.
//
// Session only decides; the Member acts on what tick() reports (drop the lanes, step down,
// rejoin under a new nonce, or stop). The same deadline the loop judges starvation by is kept in
// a SessionDeadline the lanes read without a lock (docs/exactly-once.md).
//
// Not thread-safe: the control loop owns it (except deadline(), which is).
#pragma once

#include <deque>
#include <functional>
#include <string>

#include "core/records.hpp"
#include "runtime/member_context.hpp"
#include "runtime/session_deadline.hpp"

namespace etlc::runtime {

class Session {
 public:
  enum class Status : std::uint8_t {
    live,     // open and renewed as due
    joining,  // not open yet (a race for our own record, or the store failed): retry later
    starved,  // no renewal acknowledged within lease - op_timeout: stop every lane now
    expired,  // peers deleted our record: stop every lane, rejoin under a new nonce
    twin,     // another live process uses this instance id: stop for good (message says why)
  };
  struct Tick {
    Status status = Status::live;
    std::string message;  // for twin
  };

  // `nonce_source` makes the nonce of every new session (after the first one, `first_nonce`).
  Session(const MemberContext& ctx, std::string first_nonce,
          std::function<std::string()> nonce_source);

  // Opens the session if it is not open, else judges starvation and renews when due.
  Tick tick(TimePoint now);
  // Opens it now (the synchronous first join); false if it could not (retry later).
  bool open(TimePoint now);
  // The session ended (starved, expired, a twin, shutdown): its lanes must already be gone.
  // The next tick() opens a new one under a fresh nonce. An ended session that stopped its
  // lanes itself (starved, expired) is remembered as benign: reclaiming its splits is not poison.
  void end(LossReason why);
  // Shutdown: deletes our record (guarded). Store errors propagate.
  void leave();
  // From now on no lane may write for this session (shutdown begins, or the process crashes).
  void lapse() { live_.lapse(); }
  // A crash: the session is over without a write.
  void abandon() {
    live_.lapse();
    open_ = false;
  }

  bool is_open() const { return open_; }
  const std::string& nonce() const { return nonce_; }
  // An earlier session of this process that ended without a crash.
  bool benign(const std::string& nonce) const;
  // Until when (our clock) the current session is provably live; read by lane threads.
  const SessionDeadline& deadline() const { return live_; }
  std::uint64_t serial() const { return live_.serial(); }
  // When tick() next has something to do (a renewal, or an open to retry).
  TimePoint next_due() const { return open_ ? next_renew_ : retry_at_; }

 private:
  void renew(TimePoint now, Tick& out);
  void renewed(TimePoint now, const core::MemberRecord& rec, Revision rev);
  void judge_conflict(TimePoint now, const core::MemberRecord& next, Tick& out);
  bool starved(TimePoint now) const;
  void retry_soon(TimePoint now);

  const MemberContext& ctx_;
  std::function<std::string()> nonce_source_;
  std::string nonce_;
  bool open_ = false;
  core::MemberRecord rec_;
  Revision rev_ = 0;
  TimePoint last_renew_sent_ok_{};
  TimePoint next_renew_{};
  TimePoint retry_at_{};
  SessionDeadline live_;
  // Nonces of this process's earlier sessions that ended without a crash. Bounded.
  std::deque<std::string> benign_nonces_;
};

}  // namespace etlc::runtime
