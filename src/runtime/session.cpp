// Session: open, renew, starve, expire, twin (session.hpp).
#include "runtime/session.hpp"

#include <fmt/format.h>

#include <random>

#include "core/keys.hpp"
#include "log.hpp"

namespace etlc::runtime {

namespace {
constexpr std::size_t kMaxBenignNonces = 16;

std::string random_nonce() {
  std::random_device rd;
  std::uniform_int_distribution<std::uint64_t> dist;
  return fmt::format("{:016x}{:016x}", dist(rd), dist(rd));
}
}  // namespace

Session::Session(const MemberContext& ctx, std::string first_nonce,
                 std::function<std::string()> nonce_source)
    : ctx_(ctx), nonce_source_(std::move(nonce_source)), nonce_(std::move(first_nonce)) {
  if (!nonce_source_) nonce_source_ = random_nonce;
  if (nonce_.empty()) nonce_ = nonce_source_();
}

Session::Tick Session::tick(TimePoint now) {
  Tick out;
  if (!open_) {
    out.status = now >= retry_at_ && open(now) ? Status::live : Status::joining;
    return out;
  }
  if (starved(now)) {
    log().warn(
        "etlc: {}: no session renewal acknowledged for {} ms; stopping lanes (starved)",
        ctx_.instance,
        std::chrono::duration_cast<std::chrono::milliseconds>(now - last_renew_sent_ok_).count());
    out.status = Status::starved;
    return out;
  }
  if (now >= next_renew_) renew(now, out);
  return out;
}

bool Session::starved(TimePoint now) const {
  return now - last_renew_sent_ok_ >= ctx_.config.lease_duration - ctx_.config.op_timeout;
}

bool Session::open(TimePoint now) {
  const std::string key = core::member_key(ctx_.instance);
  core::MemberRecord rec;
  rec.instance = ctx_.instance;
  rec.nonce = nonce_;
  rec.fingerprint = ctx_.fingerprint;
  rec.max_in_flight = ctx_.config.max_in_flight;
  rec.lease_ms = static_cast<std::uint64_t>(ctx_.config.lease_duration.count());
  rec.counter = 0;
  auto existing = ctx_.store.get(key);
  WriteResult r;
  if (!existing) {
    r = ctx_.store.create(key, core::encode(rec));
  } else {
    // A record under our id: our own earlier process (crashed or restarted), our own
    // unknown-outcome create, or a live twin. Newer wins: adopt it; a live twin will find our
    // nonce at its next renewal and stop.
    try {
      const core::MemberRecord old = core::decode_member(key, existing->value);
      if (old.nonce != nonce_) {
        log().info("etlc: {}: adopting the session of an earlier process (nonce {})", ctx_.instance,
                   old.nonce);
      }
      rec.counter = old.counter + 1;
    } catch (const core::RecordError& e) {
      log().warn("etlc: {}: replacing unreadable session record: {}", ctx_.instance, e.what());
    }
    r = ctx_.store.update(key, core::encode(rec), existing->revision);
  }
  if (!r.ok) {
    // Lost a race for our own record (a twin starting at the same moment); retry soon.
    retry_at_ = now + std::chrono::milliseconds(50);
    return false;
  }
  open_ = true;
  live_.begin(now + ctx_.config.lease_duration - ctx_.config.op_timeout);
  renewed(now, rec, r.revision);
  log().info("etlc: {}: session open (nonce {})", ctx_.instance, nonce_);
  return true;
}

// A renewal sent at `now` was acknowledged: the one place that moves the session's deadline, for
// the control loop (starved) and for the lanes (live_) alike, so the two never disagree.
void Session::renewed(TimePoint now, const core::MemberRecord& rec, Revision rev) {
  rec_ = rec;
  rev_ = rev;
  last_renew_sent_ok_ = now;
  live_.extend(now + ctx_.config.lease_duration - ctx_.config.op_timeout);
  next_renew_ = now + ctx_.config.lease_duration / 3;
}

void Session::retry_soon(TimePoint now) {
  next_renew_ =
      now + std::max<Duration>(ctx_.config.lease_duration / 30, std::chrono::milliseconds(20));
}

void Session::renew(TimePoint now, Tick& out) {
  core::MemberRecord next = rec_;
  next.counter += 1;
  WriteResult r;
  try {
    r = ctx_.store.update(core::member_key(ctx_.instance), core::encode(next), rev_);
  } catch (const StoreError& e) {
    if (!e.retryable()) throw;
    // Retry soon; starvation is judged from the last successful send, not from this failure.
    retry_soon(now);
    ctx_.metrics.store_failure();
    return;
  }
  if (r.ok) {
    renewed(now, next, r.revision);
    return;
  }
  judge_conflict(now, next, out);
}

// The renewal CAS lost: find out why.
void Session::judge_conflict(TimePoint now, const core::MemberRecord& next, Tick& out) {
  const std::string key = core::member_key(ctx_.instance);
  auto cur = ctx_.store.get(key);
  if (cur && cur->revision <= rev_) {
    // Our CAS at rev_ lost, so the record has moved past it: this read is stale and proves
    // nothing. Retry soon; starvation keeps counting from the last renewal we saw land.
    retry_soon(now);
    return;
  }
  if (!cur) {
    log().warn("etlc: {}: session expired by peers; stopping lanes and rejoining", ctx_.instance);
    out.status = Status::expired;
    return;
  }
  core::MemberRecord seen;
  try {
    seen = core::decode_member(key, cur->value);
  } catch (const core::RecordError& e) {
    // Garbage over our own key (it moved past our revision, so it is not a stale read). We own
    // the key: put our record back over it. A twin cannot hide behind garbage: it would find our
    // nonce at its next renewal.
    log().warn("etlc: {}: replacing its unreadable session record: {}", ctx_.instance, e.what());
    WriteResult replaced = ctx_.store.update(key, core::encode(next), cur->revision);
    if (replaced.ok) {
      renewed(now, next, replaced.revision);
    } else {
      next_renew_ = now;  // it moved again: look once more at the next step
    }
    return;
  }
  if (seen.nonce == nonce_) {
    // Our own write landed earlier with an unknown outcome: adopt its revision and renew on top
    // of it at once. When it was sent is unknown, so it does not count as a renewal: peers judge
    // us from when it landed, and starvation must not be judged from anything later.
    rec_ = seen;
    rev_ = cur->revision;
    next_renew_ = now;
    return;
  }
  out.status = Status::twin;
  out.message = fmt::format(
      "another live process uses instance id '{}' (member.{} holds its nonce {}, ours is {}); "
      "this one stops: give every process its own instance id",
      ctx_.instance, ctx_.instance, seen.nonce, nonce_);
}

void Session::end(LossReason why) {
  live_.lapse();  // first: lanes checking their session stop writing before anything else
  open_ = false;
  if (why == LossReason::starved || why == LossReason::session_expired) {
    benign_nonces_.push_back(nonce_);
    if (benign_nonces_.size() > kMaxBenignNonces) benign_nonces_.pop_front();
  }
  nonce_ = nonce_source_();
}

void Session::leave() {
  if (!open_) return;
  live_.lapse();
  open_ = false;
  ctx_.store.erase(core::member_key(ctx_.instance), rev_);
}

bool Session::benign(const std::string& nonce) const {
  return std::find(benign_nonces_.begin(), benign_nonces_.end(), nonce) != benign_nonces_.end();
}

}  // namespace etlc::runtime
