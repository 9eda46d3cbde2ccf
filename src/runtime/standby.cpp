// Standby: warm fleet-wide views for a fast failover (standby.hpp).
#include "runtime/standby.hpp"

#include "core/keys.hpp"
#include "log.hpp"

namespace etlc::runtime {

bool Standby::named(const std::string& nonce) const {
  const auto& s = views_.standby_view();
  return s && s->first.owner == ctx_.instance && s->first.nonce == nonce;
}

void Standby::step(TimePoint now, const std::string& nonce, bool may_take) {
  (void)now;
  if (!views_.caught_up()) return;
  const auto& leader = views_.leader_view();
  const bool vacant = !views_.standby_view() && !views_.standby_damage();
  if (may_take && vacant && leader && leader->first.owner != ctx_.instance) {
    const core::StandbyRecord rec{ctx_.instance, nonce};
    const WriteResult r = ctx_.store.create(core::kStandbyKey, core::encode(rec));
    if (r.ok) views_.set_standby_view(std::make_pair(rec, r.revision));
  }
  const bool mine = named(nonce);
  if (mine && !active()) activate();
  if (!mine && active()) deactivate();
}

void Standby::activate() {
  log().info("etlc: {}: standby: keeping fleet-wide views for a fast failover", ctx_.instance);
  views_.set_scope(ViewScope::fleet);
  warm_ = std::make_unique<LeaderViews>(ctx_);
  warm_->ensure_watches();
}

void Standby::deactivate() {
  log().info("etlc: {}: no longer the standby", ctx_.instance);
  warm_.reset();
  views_.set_scope(ViewScope::worker);
}

bool Standby::drain(TimePoint now) {
  if (!warm_) return false;
  warm_->ensure_watches();
  bool more = false;
  warm_->drain(now, more);
  return more;
}

bool Standby::defer_election(TimePoint now, const std::string& nonce) {
  if (views_.leader_view() || views_.leader_damage()) {
    leaderless_since_.reset();
    return false;
  }
  if (!leaderless_since_) leaderless_since_ = now;
  const auto& s = views_.standby_view();
  if (!s || named(nonce)) return false;
  return now - *leaderless_since_ < grace();
}

std::optional<TimePoint> Standby::election_due() const {
  if (!leaderless_since_ || !views_.standby_view()) return std::nullopt;
  return *leaderless_since_ + grace();
}

std::optional<LeaderViews> Standby::hand_over(const std::string& nonce) {
  std::optional<LeaderViews> out;
  if (warm_) out.emplace(std::move(*warm_));
  warm_.reset();
  leaderless_since_.reset();
  try {
    resign(nonce);
  } catch (const StoreError& e) {
    // The leader removes a standby record naming itself (Liveness): nothing waits on this.
    log().debug("etlc: {}: could not give the standby record up yet: {}", ctx_.instance, e.what());
  }
  return out;
}

void Standby::resign(const std::string& nonce) {
  if (warm_) deactivate();  // back to a worker's own keys (hand_over took the views first)
  if (!named(nonce)) return;
  const Revision rev = views_.standby_view()->second;
  if (ctx_.store.erase(core::kStandbyKey, rev).ok) views_.set_standby_view(std::nullopt);
}

}  // namespace etlc::runtime
