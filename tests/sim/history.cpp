#include "history.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "core/cut_rules.hpp"
#include "core/keys.hpp"
#include "core/repair_rules.hpp"

namespace etlc::sim {

namespace {

std::string who(const Writer& w) {
  return fmt::format("{} (nonce {}, #{})", w.instance, w.nonce, w.inc);
}

std::string owner_of(const core::SplitRecord& r) {
  return r.owner ? fmt::format("{} (nonce {})", *r.owner, r.owner_nonce.value_or("?")) : "nobody";
}

std::string describe(const core::SplitRecord& r) {
  return fmt::format("epoch {} {} owner {} attempts {} watermark {} children {}", r.epoch,
                     core::to_string(r.status), owner_of(r), r.attempts, r.progress.watermark,
                     r.children.size());
}

// A residual's id, "{parent}~{epoch}.{n}" (core::child_split_id).
struct ChildId {
  std::string parent;
  std::uint64_t epoch = 0;
};
std::optional<ChildId> parse_child_id(std::string_view id) {
  const std::size_t tilde = id.rfind('~');
  if (tilde == std::string_view::npos) return std::nullopt;
  const std::size_t dot = id.find('.', tilde);
  if (dot == std::string_view::npos) return std::nullopt;
  try {
    return ChildId{std::string(id.substr(0, tilde)),
                   std::stoull(std::string(id.substr(tilde + 1, dot - tilde - 1)))};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

History::History(const RunParams& params, const VirtualTime& time, Trace& trace,
                 const FleetView& fleet)
    : params_(params), time_(time), trace_(trace), fleet_(fleet) {
  for (std::size_t i = 0; i < params_.records.size(); ++i) {
    SplitTruth t;
    t.index = i;
    t.hi = params_.records[i];
    splits_.emplace(split_id(i), std::move(t));
    emitted_.emplace_back(params_.records[i], 0);
  }
}

std::string History::residual_descriptor(const ResidualRange& r) {
  return fmt::format("{} {} {}", r.base, r.lo, r.hi);
}

std::optional<ResidualRange> History::parse_residual(std::string_view descriptor) {
  ResidualRange r;
  unsigned long long base = 0, lo = 0, hi = 0;
  char tail = 0;
  const std::string d(descriptor);
  if (std::sscanf(d.c_str(), "%llu %llu %llu%c", &base, &lo, &hi, &tail) != 3) return std::nullopt;
  r.base = static_cast<std::size_t>(base);
  r.lo = lo;
  r.hi = hi;
  return r;
}

std::uint64_t History::end_of(const SplitTruth& t, const core::SplitRecord& rec) const {
  if (rec.children.empty()) return t.hi;
  auto c = splits_.find(rec.children.back());
  return c == splits_.end() ? t.hi : c->second.lo;
}

bool History::named(const std::string& id) const {
  auto it = splits_.find(id);
  if (it == splits_.end() || it->second.parent.empty()) return false;
  auto p = splits_.find(it->second.parent);
  return p != splits_.end() && core::names_child(p->second.rec, id);
}

bool History::job_split(const SplitTruth& t) const {
  return t.parent.empty() || named(t.rec.id);
}

bool History::owned_tenancy(const SplitTruth& parent, std::uint64_t epoch, const Writer& w) const {
  auto it = parent.tenants.find(epoch);
  return it != parent.tenants.end() && it->second.first == w.instance &&
         it->second.second == w.nonce;
}

std::string History::split_id(std::size_t index) {
  return fmt::format("s{:04}", index);
}

std::size_t History::split_index(std::string_view id) const {
  auto it = splits_.find(std::string(id));
  return it == splits_.end() ? std::string::npos : it->second.index;
}

void History::fail(int invariant, std::string message) {
  ++violations_;
  trace_.add(time_.now(), TraceKind::note, -1, fmt::format("VIOLATION {}: {}", invariant, message));
  if (!violation_) violation_ = Violation{invariant, std::move(message), time_.now()};
}

bool History::session_live(const std::string& instance, const std::string& nonce) const {
  auto it = members_.find(instance);
  return it != members_.end() && !it->second.damaged && it->second.rec.nonce == nonce;
}

void History::record_version(std::string_view key, bool live, std::string_view value,
                             Revision rev) {
  auto& q = versions_[std::string(key)];
  const VirtualNs now = time_.now();
  q.push_back(Version{now, live, std::string(value), rev});
  // Keep the newest version older than the stale window (the value at its start) and all newer.
  while (q.size() > 1 && q[1].at <= now - kMaxStaleNs) q.pop_front();
}

std::optional<Entry> History::value_at(std::string_view key, VirtualNs t) const {
  auto it = versions_.find(std::string(key));
  if (it == versions_.end()) return std::nullopt;
  const Version* found = nullptr;
  for (const Version& v : it->second) {
    if (v.at > t) break;
    found = &v;
  }
  if (found == nullptr || !found->live) return std::nullopt;
  return Entry{std::string(key), found->value, found->rev};
}

void History::on_write(OpKind kind, std::string_view key, std::string_view value,
                       const WriteResult& r, const Writer& w) {
  trace_.add(time_.now(), TraceKind::write, w.inc, key,
             r.ok ? static_cast<std::int64_t>(r.revision) : 0, static_cast<std::int64_t>(kind));
  if (!r.ok) return;
  ++stats_.writes;
  const bool erase = kind == OpKind::erase;
  record_version(key, !erase, value, r.revision);
  if (w.inc == kOperatorInc) {
    on_operator_write(kind, key);
    return;
  }
  call_writes_[w.call].emplace_back(key);
  try {
    if (auto id = core::id_from_key(key, core::kSplitPrefix)) {
      check_split_write(kind, *id, value, r.revision, w);
    } else if (auto mid = core::id_from_key(key, core::kMemberPrefix)) {
      check_member_write(kind, *mid, value, r.revision, w);
    } else if (auto lid = core::id_from_key(key, core::kLeasePrefix)) {
      if (erase) {
        leases_.erase(*lid);
      } else {
        core::LeaseRecord l = core::decode_lease(key, value);
        if (l.owner != w.instance || l.nonce != w.nonce) {
          fail(2, fmt::format("lease.{} written by {} names {} (nonce {})", *lid, who(w), l.owner,
                              l.nonce));
        }
        leases_[*lid] = std::move(l);
      }
    } else if (auto aid = core::id_from_key(key, core::kAssignPrefix)) {
      ++assign_writes_;
      if (erase) {
        assigns_.erase(*aid);
      } else {
        assigns_[*aid] = core::decode_assignment(key, value);
      }
    } else if (key == core::kPlanKey) {
      if (erase) {
        fail(4, "the plan record was deleted");
        plan_.reset();
      } else {
        check_plan_write(value);
      }
    } else if (key == core::kLeaderKey) {
      if (erase) {
        leader_.reset();
      } else {
        leader_ = core::decode_leader(key, value);
        if (leader_->owner != w.instance || leader_->nonce != w.nonce) {
          fail(2, fmt::format("job.leader written by {} names {} (nonce {})", who(w),
                              leader_->owner, leader_->nonce));
        }
      }
    } else if (auto sid = core::id_from_key(key, core::kSpecPrefix); sid && parse_child_id(*sid)) {
      on_child_spec(kind, *sid, value, w);
    } else if (sid) {
      if (erase) {
        // A claimer erases an unreadable spec at the revision it read, to prove the damage
        // current before it parks the split; a readable spec is never deleted.
        const auto it = splits_.find(*sid);
        if (it == splits_.end() || !it->second.spec_damaged) {
          fail(1, fmt::format("spec.{} deleted by {} while readable", *sid, who(w)));
        }
      } else {
        const core::SpecRecord spec = core::decode_spec(key, value);
        const std::size_t idx = split_index(*sid);
        if (idx == std::string::npos || spec.spec.weight != params_.records[idx] ||
            spec.spec.descriptor != std::to_string(params_.records[idx])) {
          fail(1, fmt::format("spec.{} does not match the planned split", *sid));
        } else {
          splits_.at(*sid).spec_damaged = false;  // rewritten by a repair re-plan
        }
      }
    }
  } catch (const core::RecordError& e) {
    fail(2, fmt::format("{} wrote an unreadable record at {}: {}", who(w), key, e.what()));
  }
}

void History::check_split_write(OpKind kind, const std::string& id, std::string_view value,
                                Revision rev, const Writer& w) {
  auto it = splits_.find(id);
  if (it == splits_.end()) {
    fail(2, fmt::format("split.{} written by {} was never planned", id, who(w)));
    return;
  }
  SplitTruth& t = it->second;
  if (auto f = fenced_calls_.find(w.call);
      f != fenced_calls_.end() && std::count(f->second.begin(), f->second.end(), id)) {
    fail(2, fmt::format("a write of split.{} sent by {} in call {} landed, but that call was told "
                        "'fenced' (a fenced member must write nothing)",
                        id, who(w), w.call));
  }
  const std::string key = core::split_key(id);
  if (kind == OpKind::erase) {
    if (!check_child_write(t, kind, nullptr, w)) {
      fail(1, fmt::format("split.{} was deleted by {}", id, who(w)));
    }
    t.exists = false;
    return;
  }
  core::SplitRecord next = core::decode_split(key, value);
  // An identical rewrite (a no-op CAS: it proves a read current and fails any write still in
  // flight at the revision read) moves neither ownership nor progress: anyone may send it.
  if (kind == OpKind::update && t.exists && !t.damaged && next == t.rec) {
    t.rev = rev;
    return;
  }
  if (check_repair(t, kind, next, w) || check_child_write(t, kind, &next, w)) {
    t.max_epoch = std::max(t.max_epoch, next.epoch);
    t.exists = true;
    t.rec = std::move(next);
    t.rev = rev;
    return;
  }
  t.max_epoch = std::max(t.max_epoch, next.epoch);
  if (kind == OpKind::create) {
    if (t.exists) {
      fail(1, fmt::format("split.{} created again by {}", id, who(w)));
    }
    // Any epoch: no tenancy of a split that never existed can be fenced off (a leader in a
    // later term seeds above the term floor, core::seeded_epoch).
    if (next.owner || next.status != core::SplitStatus::runnable || next.attempts != 0 ||
        next.progress.watermark != 0) {
      fail(1, fmt::format("split.{} seeded by {} with a non-initial record: {}", id, who(w),
                          describe(next)));
    }
    t.exists = true;
    t.rec = std::move(next);
    t.rev = rev;
    return;
  }
  if (!t.exists) {
    fail(2, fmt::format("split.{} updated by {} before it was seeded", id, who(w)));
    return;
  }
  const core::SplitRecord old = t.rec;
  check_split_update(t, old, next, w);
  t.rec = std::move(next);
  t.rev = rev;
}

void History::check_split_update(SplitTruth& t, const core::SplitRecord& old,
                                 const core::SplitRecord& next, const Writer& w) {
  const std::string& id = next.id;
  const auto transition = [&] { return fmt::format("{}  ->  {}", describe(old), describe(next)); };
  if (old.status == core::SplitStatus::pending) {  // only the leader's flip (check_child_write)
    fail(2, fmt::format("write of pending residual {} by {}: {}", id, who(w), transition()));
    return;
  }
  // Children are only ever appended, one per cut, by the owner's commit (checked below).
  const bool cut = next.children.size() == old.children.size() + 1 &&
                   std::equal(old.children.begin(), old.children.end(), next.children.begin());
  if (!cut && next.children != old.children) {
    fail(2,
         fmt::format("write of split {} by {} rewrote its children: {}", id, who(w), transition()));
  }
  // Invariant 1: no regression of progress, epoch or a terminal status.
  if (next.progress.watermark < old.progress.watermark) {
    fail(1, fmt::format("durable progress of split {} regressed ({} -> {}) by a write of {}: {}",
                        id, old.progress.watermark, next.progress.watermark, who(w), transition()));
  }
  if (next.epoch < old.epoch) {
    fail(1,
         fmt::format("epoch of split {} went back by a write of {}: {}", id, who(w), transition()));
  }
  if (old.status != core::SplitStatus::runnable) {
    fail(1, fmt::format("terminal split {} was rewritten by {}: {}", id, who(w), transition()));
  }
  check_covered(t, next, "commit");

  const bool writer_owns =
      old.owner && *old.owner == w.instance && old.owner_nonce && *old.owner_nonce == w.nonce;
  const bool prev_owner_live =
      old.owner && old.owner_nonce && session_live(*old.owner, *old.owner_nonce);

  if (next.epoch == old.epoch + 1) {
    // A claim: names the claimer, moves nothing else; an attempt is consumed exactly when the
    // previous tenancy ended without a release, and then the previous owner must really be gone.
    if (next.owner != w.instance || next.owner_nonce != w.nonce ||
        next.status != core::SplitStatus::runnable || next.progress != old.progress || cut) {
      fail(2, fmt::format("malformed claim of split {} by {}: {}", id, who(w), transition()));
    }
    t.tenants[next.epoch] = {w.instance, w.nonce};
    // An attempt may be consumed only by a real non-graceful end: the previous tenancy ended
    // without a release and its owner's session is gone. A reclaim by the same instance may
    // waive it (its own earlier session stopped its lanes itself); a takeover of a dead owner
    // may not.
    const bool consumed = next.attempts == old.attempts + 1;
    if (!consumed && next.attempts != old.attempts) {
      fail(4, fmt::format("claim of split {} by {} set attempts {} (was {}): {}", id, who(w),
                          next.attempts, old.attempts, transition()));
    }
    if (consumed && !old.owner) {
      fail(4, fmt::format("claim of split {} by {} consumed an attempt after a graceful release: "
                          "{}",
                          id, who(w), transition()));
    }
    if (old.owner) {
      // A live previous owner without a lease released the split or never held it (its claim
      // CAS landed after it had given up): taking it is fine, counting it as poison is not.
      if (!prev_owner_live) ++t.nongraceful;
      if (prev_owner_live && consumed) {
        fail(4, fmt::format("claim of split {} by {} consumed an attempt although the previous "
                            "owner's session is live (no non-graceful end happened): {}",
                            id, who(w), transition()));
      }
      if (*old.owner == w.instance) {
        ++stats_.claims_reclaim;
      } else {
        ++stats_.claims_takeover;
        if (!consumed && !prev_owner_live) {
          fail(4, fmt::format("takeover of split {} by {} from a dead owner consumed no attempt: "
                              "{}",
                              id, who(w), transition()));
        }
      }
    } else if (old.epoch == 0) {
      ++stats_.claims_fresh;
    } else {
      ++stats_.claims_released;
    }
    auto l = leases_.find(id);
    if (l == leases_.end() || l->second.owner != w.instance || l->second.nonce != w.nonce) {
      ++stats_.claims_without_lease;
      trace_.add(time_.now(), TraceKind::note, w.inc,
                 fmt::format("claim of {} landed while its sender holds no lease.{} ({})", id, id,
                             l == leases_.end() ? "absent" : "owned by " + l->second.owner));
    }
    return;
  }
  if (next.epoch != old.epoch) {
    fail(2, fmt::format("write of split {} by {} moved the epoch by more than a claim: {}", id,
                        who(w), transition()));
    return;
  }
  const bool commit = writer_owns && next.status == core::SplitStatus::runnable &&
                      next.owner == old.owner && next.owner_nonce == old.owner_nonce;
  if (cut && !commit) {
    fail(2, fmt::format("write of split {} by {} named a residual but is no commit of its owner: "
                        "{}",
                        id, who(w), transition()));
  }
  if (writer_owns) {
    const bool same_attempts = next.attempts == old.attempts;
    const bool one_more = next.attempts == old.attempts + 1;
    switch (next.status) {
      case core::SplitStatus::runnable:
        if (commit) {
          if (!same_attempts)
            fail(4, fmt::format("commit of {} changed attempts: {}", id, transition()));
          if (cut) check_cut(t, old, next, w);
          ++stats_.commits;
        } else if (!next.owner && !next.owner_nonce && same_attempts) {
          ++stats_.releases;
        } else if (!next.owner && !next.owner_nonce && one_more) {
          ++stats_.fails;
          ++t.nongraceful;
        } else {
          fail(2, fmt::format("owner write of split {} by {} is neither a commit, a release nor a "
                              "fail: {}",
                              id, who(w), transition()));
        }
        return;
      case core::SplitStatus::pending:
        fail(2, fmt::format("owner write of split {} by {} made it pending: {}", id, who(w),
                            transition()));
        return;
      case core::SplitStatus::completed:
        if (next.owner || !same_attempts) {
          fail(2,
               fmt::format("malformed completion of split {} by {}: {}", id, who(w), transition()));
        }
        if (next.progress.watermark != end_of(t, next) - t.lo) {
          fail(3, fmt::format("split {} completed at watermark {} but has {} records", id,
                              next.progress.watermark, end_of(t, next) - t.lo));
        }
        ++stats_.completes;
        return;
      case core::SplitStatus::quarantined:
        ++t.nongraceful;
        ++stats_.quarantines;
        ++stats_.fails;
        if (next.owner || !one_more || next.attempts < params_.max_attempts ||
            t.nongraceful < params_.max_attempts) {
          fail(4, fmt::format("split {} quarantined by its owner {} after {} non-graceful ends "
                              "(max_attempts {}): {}",
                              id, who(w), t.nongraceful, params_.max_attempts, transition()));
        }
        return;
    }
    return;
  }
  // Not the owner, same epoch: only the claim-time quarantine of a dead owner's split.
  if (next.status == core::SplitStatus::quarantined && old.owner && !next.owner &&
      next.progress == old.progress) {
    ++t.nongraceful;
    ++stats_.quarantines;
    if (prev_owner_live) {
      fail(4, fmt::format("split {} quarantined by {} while its owner's session is live: {}", id,
                          who(w), transition()));
    }
    if (next.attempts != old.attempts + 1 || next.attempts < params_.max_attempts ||
        t.nongraceful < params_.max_attempts) {
      fail(4, fmt::format("split {} quarantined by {} after {} non-graceful ends (max_attempts "
                          "{}): {}",
                          id, who(w), t.nongraceful, params_.max_attempts, transition()));
    }
    return;
  }
  fail(2, fmt::format("write of split {} by {}, which does not own its current epoch {} (owner "
                      "{}): {}",
                      id, who(w), old.epoch, owner_of(old), transition()));
}

void History::on_operator_write(OpKind kind, std::string_view key) {
  ++stats_.operator_writes;
  const bool erase = kind == OpKind::erase;
  if (auto id = core::id_from_key(key, core::kSplitPrefix)) {
    auto it = splits_.find(*id);
    if (it == splits_.end()) return;
    it->second.damaged = true;
    if (erase) it->second.exists = false;
  } else if (auto sid = core::id_from_key(key, core::kSpecPrefix)) {
    if (auto it = splits_.find(*sid); it != splits_.end()) it->second.spec_damaged = true;
  } else if (auto lid = core::id_from_key(key, core::kLeasePrefix)) {
    leases_.erase(*lid);
  } else if (auto aid = core::id_from_key(key, core::kAssignPrefix)) {
    assigns_.erase(*aid);
  } else if (auto mid = core::id_from_key(key, core::kMemberPrefix)) {
    // Not a renewal and not an expiry: the last readable session (and when it was renewed) is
    // what peers judge it by. A delete ends the session like an expiry would, unchecked.
    if (erase) {
      if (auto it = members_.find(*mid); it != members_.end()) {
        operator_ended_.insert(*mid + '\n' + it->second.rec.nonce);
        members_.erase(it);
      }
    } else if (auto it = members_.find(*mid); it != members_.end()) {
      it->second.damaged = true;
    }
  } else if (key == core::kLeaderKey) {
    leader_.reset();
  }
  // job.plan: the tallies' check waits for the leader's rewrite, whose term must not go back
  // (max_plan_term_ is kept across the damage).
}

bool History::check_repair(SplitTruth& t, OpKind kind, const core::SplitRecord& next,
                           const Writer& w) {
  const std::string& id = next.id;
  if (t.damaged) {
    // The first write after damage rebuilds the record: above every epoch the split had, never
    // ahead of durable progress (check_covered: only emitted records), owner cleared.
    t.damaged = false;
    ++stats_.rebuilds;
    // A split no claim ever reached (epoch 0 throughout) has no tenancy to fence off: seeding it
    // again as new, at epoch 0, is what a leader that never saw the record does, and is safe.
    const bool never_claimed = t.max_epoch == 0 && next.epoch == 0 && kind == OpKind::create;
    if ((next.epoch <= t.max_epoch && !never_claimed) || next.owner) {
      fail(1, fmt::format("split.{} rebuilt by {} at epoch {} (owner {}) after damage; the split "
                          "had epoch {}",
                          id, who(w), next.epoch, owner_of(next), t.max_epoch));
    }
    if (next.status == core::SplitStatus::quarantined && !t.spec_damaged &&
        t.rec.status != core::SplitStatus::quarantined) {
      fail(4, fmt::format("split.{} rebuilt as quarantined by {}", id, who(w)));
    }
    check_covered(t, next, "rebuild");
    // A rebuild must not undo a cut: a child left runnable would read what the parent reads.
    if (!t.parent.empty() && next.status != core::SplitStatus::pending && !named(id)) {
      fail(3, fmt::format("residual {} rebuilt by {} as {} while its parent does not name it", id,
                          who(w), core::to_string(next.status)));
    }
    for (const std::string& c : t.rec.children) {
      auto ct = splits_.find(c);
      if (!core::names_child(next, c) && ct != splits_.end() && ct->second.exists &&
          ct->second.rec.status != core::SplitStatus::pending) {
        fail(3, fmt::format("split.{} rebuilt by {} without its residual {} ({}): both would read "
                            "records {}..{}",
                            id, who(w), c, core::to_string(ct->second.rec.status), ct->second.lo,
                            ct->second.hi));
      }
    }
    return true;
  }
  if (kind != OpKind::update || !t.exists) return false;
  const core::SplitRecord& old = t.rec;
  const bool parked_now = core::parked_for_spec(next) && !core::parked_for_spec(old);
  if (parked_now) {
    ++stats_.parked;
    if (!t.spec_damaged || old.status != core::SplitStatus::runnable || next.epoch != old.epoch ||
        next.attempts != old.attempts || next.progress != old.progress) {
      fail(4, fmt::format("split.{} parked for its spec by {} (spec damaged: {}): {} -> {}", id,
                          who(w), t.spec_damaged, describe(old), describe(next)));
    }
    return true;
  }
  if (core::parked_for_spec(old) && next.status == core::SplitStatus::runnable) {
    ++stats_.requeued;
    core::SplitRecord expect = old;
    expect.status = core::SplitStatus::runnable;
    if (t.spec_damaged || next != expect) {
      fail(4, fmt::format("split.{} requeued by {} (spec still damaged: {}): {} -> {}", id, who(w),
                          t.spec_damaged, describe(old), describe(next)));
    }
    return true;
  }
  return false;
}

// spec.{child}: created by the owner of the tenancy its id names, for a tail of its parent's range;
// deleted (by the leader) only while nobody names the child.
void History::on_child_spec(OpKind kind, const std::string& id, std::string_view value,
                            const Writer& w) {
  const std::optional<ChildId> child = parse_child_id(id);
  auto p = splits_.find(child->parent);
  if (p == splits_.end()) {
    fail(2, fmt::format("spec.{} written by {}: a residual of an unknown split", id, who(w)));
    return;
  }
  if (kind == OpKind::erase) {
    // The leader's orphan cleanup, or a claimer proving the operator's damage current.
    auto it = splits_.find(id);
    if (named(id) && (it == splits_.end() || !it->second.spec_damaged)) {
      fail(3, fmt::format("spec.{} of a named residual deleted by {} while readable", id, who(w)));
    }
    return;
  }
  const SplitTruth& parent = p->second;
  const core::SpecRecord spec = core::decode_spec(core::spec_key(id), value);
  const std::optional<ResidualRange> r = parse_residual(spec.spec.descriptor);
  if (kind != OpKind::create || !r || r->base != parent.index || r->lo >= r->hi ||
      r->lo < parent.lo || r->hi > parent.hi || spec.spec.weight != r->hi - r->lo) {
    fail(1, fmt::format("spec.{} written by {} does not name a part of {}'s records [{}, {}): "
                        "'{}' weight {}",
                        id, who(w), child->parent, parent.lo, parent.hi, spec.spec.descriptor,
                        spec.spec.weight));
    return;
  }
  if (!owned_tenancy(parent, child->epoch, w)) {
    fail(2, fmt::format("spec.{} created by {}, which never owned split {} at epoch {}", id, who(w),
                        child->parent, child->epoch));
  }
  auto [it, fresh] = splits_.try_emplace(id);
  SplitTruth& t = it->second;
  if (!fresh) {  // a late create landing again after the orphan's delete
    if (t.lo != r->lo || t.hi != r->hi) {
      fail(1, fmt::format("spec.{} created again by {} with another range", id, who(w)));
    }
    return;
  }
  t.index = parent.index;
  t.lo = r->lo;
  t.hi = r->hi;
  t.parent = child->parent;
  t.cut_epoch = child->epoch;
  t.rec.id = id;
}

// The writes of a residual's own record outside the usual rules: its pending creation, the
// leader's flip, the orphan's delete. False for any other write (the usual rules then apply).
bool History::check_child_write(SplitTruth& t, OpKind kind, const core::SplitRecord* next,
                                const Writer& w) {
  if (t.parent.empty()) return false;
  const std::string& id = t.rec.id;
  if (kind == OpKind::erase) {
    if (!t.exists || t.rec.status != core::SplitStatus::pending || named(id)) {
      fail(3, fmt::format("residual {} ({}) deleted by {}{}", id,
                          t.exists ? core::to_string(t.rec.status) : "absent", who(w),
                          named(id) ? " although its parent names it" : ""));
    }
    ++stats_.orphans;
    return true;
  }
  if (kind == OpKind::create) {
    // The cutter's pending record, or the leader's rebuild of it from the spec (at an epoch of
    // its own): harmless while nobody names it.
    core::SplitRecord want =
        core::pending_child(id, t.hi - t.lo, core::SplitOrigin{t.parent, t.cut_epoch});
    want.epoch = next->epoch;
    if (t.exists || *next != want) {
      fail(2, fmt::format("split.{} created by {} ({}) is not the pending record of a residual "
                          "cut from {} at epoch {}: {}",
                          id, who(w), t.exists ? "exists already" : "new", t.parent, t.cut_epoch,
                          describe(*next)));
    }
    return true;
  }
  if (!t.exists || t.rec.status != core::SplitStatus::pending) return false;
  core::SplitRecord want = t.rec;
  want.status = core::SplitStatus::runnable;
  if (*next != want) {
    fail(2, fmt::format("write of pending residual {} by {} is not its flip to runnable: {}", id,
                        who(w), describe(*next)));
  } else if (!named(id)) {
    fail(3, fmt::format("residual {} made runnable by {} while its parent {} does not name it "
                        "(its records {}..{} are the parent's still)",
                        id, who(w), t.parent, t.lo, t.hi));
  }
  ++stats_.flips;
  return true;
}

// The parent's CAS naming a residual: it exists already (pending, cut by this tenancy), it is the
// tail of the parent's range, nothing in it was emitted, the parent's progress stays before it.
void History::check_cut(const SplitTruth& t, const core::SplitRecord& old,
                        const core::SplitRecord& next, const Writer& w) {
  ++stats_.cuts;
  const std::string& child = next.children.back();
  auto c = splits_.find(child);
  if (c == splits_.end() || !c->second.exists ||
      c->second.rec.status != core::SplitStatus::pending ||
      c->second.rec.cut_from != core::SplitOrigin{next.id, old.epoch}) {
    fail(2, fmt::format("split {} named residual {} by {}, but the residual's pending record cut "
                        "at epoch {} does not exist: {}",
                        next.id, child, who(w), old.epoch,
                        c == splits_.end() ? "no spec either" : describe(c->second.rec)));
    return;
  }
  const SplitTruth& ct = c->second;
  const std::uint64_t end = end_of(t, old);
  if (ct.hi != end || ct.lo < t.lo + next.progress.watermark) {
    fail(3, fmt::format("split {} cut at {}..{} by {}, not the tail of its range {}..{} past its "
                        "watermark {}",
                        next.id, ct.lo, ct.hi, who(w), t.lo, end, next.progress.watermark));
  }
  const std::vector<std::uint32_t>& emitted = emitted_[t.index];
  for (std::uint64_t i = ct.lo; i < ct.hi; ++i) {
    if (emitted[i] > 0) {
      fail(3, fmt::format("split {} cut by {} gives residual {} record {}, which a lane emitted "
                          "already (the cut must lie beyond everything emitted)",
                          next.id, who(w), child, i));
      return;
    }
  }
  const std::uint64_t w_child = ct.hi - ct.lo;
  if (next.weight != (old.weight > w_child ? old.weight - w_child : 0)) {
    fail(2, fmt::format("split {} cut by {}: weight {} -> {} for a residual of {}", next.id, who(w),
                        old.weight, next.weight, w_child));
  }
}

void History::check_covered(const SplitTruth& t, const core::SplitRecord& rec, const char* what) {
  const std::uint64_t wm = rec.progress.watermark;
  const std::uint64_t len = end_of(t, rec) - t.lo;
  if (wm > len) {
    fail(3, fmt::format("{} of split {} at watermark {} beyond its {} records", what, rec.id, wm,
                        len));
    return;
  }
  const std::vector<std::uint32_t>& emitted = emitted_[t.index];
  for (std::uint64_t i = t.lo; i < t.lo + wm; ++i) {
    if (emitted[i] == 0) {
      fail(3, fmt::format("{} of split {} at watermark {} covers record {} of {}, which no lane "
                          "emitted (lost)",
                          what, rec.id, wm, i, split_id(t.index)));
      return;
    }
  }
}

void History::check_member_write(OpKind kind, const std::string& id, std::string_view value,
                                 Revision rev, const Writer& w) {
  const VirtualNs now = time_.now();
  if (kind != OpKind::erase) {
    core::MemberRecord rec = core::decode_member(core::member_key(id), value);
    if (id != w.instance || rec.nonce != w.nonce) {
      fail(2, fmt::format("member.{} written by {} with nonce {}", id, who(w), rec.nonce));
    }
    MemberTruth& m = members_[id];
    m.damaged = false;
    m.rec = std::move(rec);
    m.rev = rev;
    m.written_at = now;
    m.writer_inc = w.inc;
    return;
  }
  auto it = members_.find(id);
  if (it == members_.end()) return;
  const MemberTruth m = it->second;
  members_.erase(it);
  if (id == w.instance) return;  // the member's own shutdown
  ++stats_.expiries;
  // Invariant 6: the session's renewals must really have stopped for a lease, on its own clock.
  const SimClock* clock = fleet_.clock_of(m.writer_inc);
  if (clock == nullptr) return;
  const double skew = static_cast<double>(params_.faults.skew_ppm) / 1e6;
  const double elapsed = static_cast<double>(clock->local_at(now) - clock->local_at(m.written_at));
  const double lease = static_cast<double>(m.rec.lease_ms) * 1e6;
  const double need = lease * (1 - skew) / (1 + skew) - 1e3;  // 1 us of rounding slack
  if (elapsed < need) {
    fail(6, fmt::format("session of {} (nonce {}) expired by {} only {:.3f} ms (on its own "
                        "clock) after its last renewal landed; the lease is {} ms (false "
                        "suspicion)",
                        id, m.rec.nonce, who(w), elapsed / 1e6, m.rec.lease_ms));
  }
  // Self-fencing precedes expiry: a member that kept running must have stopped its lanes.
  if (fleet_.running_since(m.writer_inc, m.written_at) && fleet_.held_count(m.writer_inc) > 0) {
    fail(6, fmt::format("session of {} (nonce {}) expired by {} while that member, running all "
                        "along, still held {} splits (it should have stopped its lanes first)",
                        id, m.rec.nonce, who(w), fleet_.held_count(m.writer_inc)));
  }
}

void History::check_plan_write(std::string_view value) {
  core::PlanRecord next = core::decode_plan(core::kPlanKey, value);
  if (next.term < max_plan_term_) {
    fail(2, fmt::format("plan term went back from {} to {} (the leader fence)", max_plan_term_,
                        next.term));
  }
  max_plan_term_ = std::max(max_plan_term_, next.term);
  // A write that carries the previous record's tallies over (a new leader taking the term)
  // counts nothing itself: the truth may have dropped since (a parked split requeued), and the
  // new leader recounts once its split view is loaded. A write that changes them is a count.
  const bool carried = plan_ && plan_->completed == next.completed &&
                       plan_->quarantined == next.quarantined && plan_->verdict == next.verdict;
  plan_ = std::move(next);
  check_verdict(*plan_, "the plan record", carried);
}

void History::check_verdict(const core::PlanRecord& plan, const char* source,
                            bool tallies_carried) {
  std::uint64_t completed = 0, quarantined = 0, seeded = 0, named_children = 0;
  for (const auto& [id, t] : splits_) {
    // A record the operator damaged counts as its last readable version: the leader's view may
    // not have seen the damage yet, and what that version says (a completion) stays true.
    if (!t.exists && !t.damaged) continue;
    if (!job_split(t)) continue;  // a pending residual nobody names is no split of the job
    ++seeded;
    if (!t.parent.empty()) ++named_children;
    if (t.rec.status == core::SplitStatus::completed) ++completed;
    if (t.rec.status == core::SplitStatus::quarantined) ++quarantined;
  }
  if (!tallies_carried && (plan.completed > completed || plan.quarantined > quarantined)) {
    fail(4, fmt::format("{} tallies {} completed / {} quarantined, the store holds {} / {}", source,
                        plan.completed, plan.quarantined, completed, quarantined));
  }
  if (plan.verdict == core::Verdict::running) return;
  if (plan.finality != core::Finality::final) {
    fail(4, fmt::format("{} reports {} for an open plan", source, core::to_string(plan.verdict)));
  }
  // A plan is final only once the planner lists every split (a growing plan turns final when it
  // has listed them all).
  const std::size_t planned = params_.records.size() + named_children;
  if (plan.split_count != planned || seeded < planned) {
    fail(4, fmt::format("{} reports {} over {} planned splits; the planner listed {}, {} seeded",
                        source, core::to_string(plan.verdict), plan.split_count, planned, seeded));
  }
  if (plan.verdict == core::Verdict::complete) {
    if (completed != seeded || quarantined != 0) {
      fail(4, fmt::format("{} reports complete with {} of {} splits completed ({} quarantined)",
                          source, completed, seeded, quarantined));
    }
    for (const auto& [id, t] : splits_) {
      if ((!t.exists && !t.damaged) || !job_split(t)) continue;
      check_covered(t, t.rec, "completion");
      if (t.rec.progress.watermark != length(t)) {
        fail(3, fmt::format("{} reports complete but split {} is at watermark {} of {}", source, id,
                            t.rec.progress.watermark, length(t)));
      }
    }
  } else {
    if (quarantined == 0 || completed + quarantined != seeded) {
      fail(4, fmt::format("{} reports stalled with {} completed, {} quarantined of {} splits",
                          source, completed, quarantined, seeded));
    }
  }
}

void History::check_final() {
  for (std::size_t i = 0; i < params_.records.size(); ++i) check_family(i);
}

// Invariant 9 for one planned split: its family's ranges partition its records, all emitted.
void History::check_family(std::size_t base) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  std::vector<std::string> todo{split_id(base)};
  while (!todo.empty()) {
    const std::string id = todo.back();
    todo.pop_back();
    auto it = splits_.find(id);
    if (it == splits_.end() || !it->second.exists) {
      fail(9, fmt::format("split {} of {}'s family has no record at the end of the run", id,
                          split_id(base)));
      return;
    }
    const SplitTruth& t = it->second;
    if (t.rec.status == core::SplitStatus::quarantined) return;  // its records stay unread
    if (t.rec.status != core::SplitStatus::completed) {
      fail(9, fmt::format("split {} of {}'s family is {} at the end of the run", id, split_id(base),
                          core::to_string(t.rec.status)));
      return;
    }
    ranges.emplace_back(t.lo, end_of(t, t.rec));
    todo.insert(todo.end(), t.rec.children.begin(), t.rec.children.end());
  }
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t at = 0;
  for (const auto& [lo, hi] : ranges) {
    if (lo != at || hi < lo) {
      fail(9, fmt::format("the completed ranges of {}'s family do not partition its {} records: "
                          "{} at {}..{} after {} covered",
                          split_id(base), params_.records[base], lo < at ? "overlap" : "gap", lo,
                          hi, at));
      return;
    }
    at = hi;
  }
  if (at != params_.records[base]) {
    fail(9, fmt::format("the completed ranges of {}'s family end at {} of its {} records",
                        split_id(base), at, params_.records[base]));
    return;
  }
  for (std::uint64_t i = 0; i < at; ++i) {
    if (emitted_[base][i] == 0) {
      fail(9, fmt::format("record {} of {} was never emitted, yet its family completed", i,
                          split_id(base)));
      return;
    }
  }
}

void History::on_emit(std::int32_t inc, std::size_t split, std::uint64_t first,
                      std::uint64_t count) {
  trace_.add(time_.now(), TraceKind::emit, inc, split_id(split), static_cast<std::int64_t>(first),
             static_cast<std::int64_t>(count));
  std::vector<std::uint32_t>& emitted = emitted_.at(split);
  for (std::uint64_t i = first; i < first + count && i < emitted.size(); ++i) {
    if (emitted[i]++ > 0) ++stats_.duplicates;
    ++stats_.emitted;
  }
}

void History::on_fenced(std::uint64_t call, std::string_view split_id) {
  if (auto it = call_writes_.find(call); it != call_writes_.end()) {
    if (std::count(it->second.begin(), it->second.end(), core::split_key(split_id)) > 0) {
      fail(2, fmt::format("call {} on split {} returned 'fenced' but wrote its record", call,
                          split_id));
    }
  }
  fenced_calls_[call].emplace_back(split_id);
}

void History::on_durable(std::uint64_t call, std::string_view split_id, std::uint64_t epoch,
                         std::uint64_t watermark, const char* what,
                         const std::optional<std::pair<std::string, std::string>>& owner,
                         bool strict) {
  (void)call;
  auto it = splits_.find(std::string(split_id));
  std::string problem;
  if (it == splits_.end() || !it->second.exists) {
    problem = fmt::format("{} of split {} returned 'durable' but the split has no record", what,
                          split_id);
  } else {
    const core::SplitRecord& r = it->second.rec;
    if (owner && (r.owner != owner->first || r.owner_nonce != owner->second ||
                  r.status != core::SplitStatus::runnable)) {
      problem = fmt::format("{} of split {} by {} returned 'durable' but the store holds {}", what,
                            split_id, owner->first, describe(r));
    } else if (r.epoch != epoch || r.progress.watermark < watermark) {
      problem = fmt::format(
          "{} of split {} at epoch {} watermark {} returned 'durable' but the "
          "store holds {}",
          what, split_id, epoch, watermark, describe(r));
    }
  }
  if (problem.empty()) return;
  if (strict) {
    fail(2, std::move(problem));
  } else {
    ++stats_.stale_misreports;
    trace_.add(time_.now(), TraceKind::note, -1, "after stale reads: " + problem);
  }
}

void History::on_verdict_event(std::int32_t inc, bool complete) {
  if (!plan_) {
    fail(4, fmt::format("#{} reported {} with no plan record", inc,
                        complete ? "AllComplete" : "Stalled"));
    return;
  }
  core::PlanRecord p = *plan_;
  const core::Verdict want = complete ? core::Verdict::complete : core::Verdict::stalled;
  if (p.verdict != want) {
    // The event may come from a plan record this member read earlier; the verdict of a final plan
    // never changes back, so the current record must show the same verdict.
    fail(4, fmt::format("#{} reported {} but the plan record says {}", inc,
                        complete ? "AllComplete" : "Stalled", core::to_string(p.verdict)));
    return;
  }
  check_verdict(p, complete ? "an AllComplete event" : "a Stalled event");
}

}  // namespace etlc::sim
