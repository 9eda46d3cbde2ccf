// Session liveness: one member.{instance} record per process, renewed by CAS every lease/3.
//
// The renewal is the first thing every step does, and every other slice of work in a step is
// bounded, so bulk work never delays it. A member that has not had a renewal acknowledged within
// lease - op_timeout of the *send* time of its last successful one stops its lanes itself
// (starved) before any peer may expire it. A renewal that finds the record gone was expired by
// peers; one that finds another nonce means a second live process uses this instance id: the
// newer process wins (it adopted the record), the older one stops with a Fatal event.
#include <fmt/format.h>
#include "log.hpp"

#include <random>

#include "core/keys.hpp"
#include "runtime/member.hpp"

namespace etlc::runtime {

std::string Member::fresh_nonce() {
  if (options_.nonce_source) return options_.nonce_source();
  std::random_device rd;
  std::uniform_int_distribution<std::uint64_t> dist;
  return fmt::format("{:016x}{:016x}", dist(rd), dist(rd));
}

void Member::ensure_session(TimePoint now) {
  if (!session_open_) {
    open_session(now);
    return;
  }
  check_starvation(now);
  if (session_open_ && now >= next_renew_) renew_session(now);
}

void Member::open_session(TimePoint now) {
  const std::string key = core::member_key(instance_);
  core::MemberRecord rec;
  rec.instance = instance_;
  rec.nonce = nonce_;
  rec.fingerprint = fingerprint_;
  rec.max_in_flight = config_.max_in_flight;
  rec.lease_ms = static_cast<std::uint64_t>(config_.lease_duration.count());
  rec.counter = 0;

  auto existing = store_->get(key);
  WriteResult r;
  if (!existing) {
    r = store_->create(key, core::encode(rec));
  } else {
    // A record under our id: our own earlier process (crashed or restarted), our own
    // unknown-outcome create, or a live twin. Newer wins: adopt it; a live twin will find our
    // nonce at its next renewal and stop.
    std::optional<core::MemberRecord> old;
    try {
      old = core::decode_member(key, existing->value);
    } catch (const core::RecordError& e) {
      log().warn("etlc: {}: replacing unreadable session record: {}", instance_, e.what());
    }
    if (old && old->nonce != nonce_) {
      log().info("etlc: {}: adopting the session of an earlier process (nonce {})", instance_,
                 old->nonce);
    }
    if (old) rec.counter = old->counter + 1;
    r = store_->update(key, core::encode(rec), existing->revision);
  }
  if (!r.ok) {
    // Lost a race for our own record (a twin starting at the same moment); retry next step.
    retry_at_ = now + std::chrono::milliseconds(50);
    return;
  }
  session_rec_ = rec;
  session_rev_ = r.revision;
  session_open_ = true;
  last_renew_sent_ok_ = now;
  live_.begin(live_until(now));
  next_renew_ = now + config_.lease_duration / 3;
  log().info("etlc: {}: session open (nonce {})", instance_, nonce_);
}

void Member::renew_session(TimePoint now) {
  const std::string key = core::member_key(instance_);
  core::MemberRecord next = session_rec_;
  next.counter += 1;
  WriteResult r;
  try {
    r = store_->update(key, core::encode(next), session_rev_);
  } catch (const StoreError& e) {
    if (!e.retryable()) throw;
    // Retry soon; starvation is judged from the last successful send, not from this failure.
    next_renew_ =
        now + std::max<Duration>(config_.lease_duration / 30, std::chrono::milliseconds(20));
    metrics_.store_failure();
    return;
  }
  if (r.ok) {
    session_rec_ = next;
    session_rev_ = r.revision;
    renewed(now);
    next_renew_ = now + config_.lease_duration / 3;
    return;
  }
  // Conflict: find out why.
  auto cur = store_->get(key);
  if (cur && cur->revision <= session_rev_) {
    // Our CAS at session_rev_ lost, so the record has moved past it: this read is stale and
    // proves nothing. Retry soon; starvation keeps counting from the last renewal we saw land.
    next_renew_ =
        now + std::max<Duration>(config_.lease_duration / 30, std::chrono::milliseconds(20));
    return;
  }
  if (!cur) {
    log().warn("etlc: {}: session expired by peers; stopping lanes and rejoining", instance_);
    lose_all(LossReason::session_expired);
    return;
  }
  core::MemberRecord seen;
  try {
    seen = core::decode_member(key, cur->value);
  } catch (const core::RecordError& e) {
    // Garbage over our own key (it moved past our revision, so it is not a stale read). We own
    // the key: put our record back over it. A twin cannot hide behind garbage: it would find our
    // nonce at its next renewal.
    log().warn("etlc: {}: replacing its unreadable session record: {}", instance_, e.what());
    WriteResult replaced = store_->update(key, core::encode(next), cur->revision);
    if (replaced.ok) {
      session_rec_ = next;
      session_rev_ = replaced.revision;
      renewed(now);
      next_renew_ = now + config_.lease_duration / 3;
    } else {
      next_renew_ = now;  // it moved again: look once more at the next step
    }
    return;
  }
  if (seen.nonce == nonce_) {
    // Our own write landed earlier with an unknown outcome: adopt its revision and renew on top
    // of it at once. When it was sent is unknown, so it does not count as a renewal: peers judge
    // us from when it landed, and starvation must not be judged from anything later.
    session_rec_ = seen;
    session_rev_ = cur->revision;
    next_renew_ = now;
    return;
  }
  go_fatal(fmt::format(
      "another live process uses instance id '{}' (its nonce {}, ours {}); this one stops",
      instance_, seen.nonce, nonce_));
}

// The session is provably live until lease - op_timeout after the send time of its last
// acknowledged renewal: the one rule check_starvation() and session_live() both apply.
TimePoint Member::live_until(TimePoint sent) const {
  return sent + config_.lease_duration - config_.op_timeout;
}

// A renewal sent at `sent` was acknowledged. Every acknowledged renewal goes through here, so the
// lock-free deadline lanes read never lags the control loop's own (check_starvation).
void Member::renewed(TimePoint sent) {
  last_renew_sent_ok_ = sent;
  live_.extend(live_until(sent));
}

void Member::check_starvation(TimePoint now) {
  if (now < live_until(last_renew_sent_ok_)) return;
  log().warn(
      "etlc: {}: no session renewal acknowledged for {} ms; stopping lanes (starved)", instance_,
      std::chrono::duration_cast<std::chrono::milliseconds>(now - last_renew_sent_ok_).count());
  lose_all(LossReason::starved);
}

// Drops every held split without writing (the session can no longer be trusted), steps down,
// and arranges a rejoin under a new nonce. Our leases become "stale own leases" that the next
// session reclaims.
void Member::lose_all(LossReason reason) {
  live_.lapse();  // first: lanes checking their session stop writing before anything else
  std::vector<std::shared_ptr<Held>> all;
  {
    std::lock_guard lk(shared_mu_);
    for (auto& [id, h] : held_) all.push_back(h);
  }
  for (auto& h : all) {
    std::lock_guard io(h->io);
    if (!h->gone) drop_held(*h, reason);
  }
  if (leader_) step_down("session lost");
  session_open_ = false;
  if (reason == LossReason::starved || reason == LossReason::session_expired) {
    benign_nonces_.push_back(nonce_);
    if (benign_nonces_.size() > 16) benign_nonces_.pop_front();
  }
  std::lock_guard lk(shared_mu_);
  nonce_ = fresh_nonce();
}

void Member::go_fatal(const std::string& message, LossReason reason) {
  log().error("etlc: {}: {}", instance_, message);
  lose_all(reason);
  stopped_ = true;
  push_event(Fatal{message});
}

}  // namespace etlc::runtime
