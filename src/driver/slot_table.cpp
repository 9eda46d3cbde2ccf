// The Driver's slot table: which slots are live per split, which are ready for a worker or
// delayed until a retry, and what happens when a turn hands its slot back or closes it.
#include "log.hpp"

#include <algorithm>

#include "driver/driver_impl.hpp"

namespace etlc {

namespace {
void count_end(DriverStats& stats, LaneEnd end) {
  switch (end) {
    case LaneEnd::completed:
      ++stats.completed;
      break;
    case LaneEnd::drained:
      ++stats.drained;
      break;
    case LaneEnd::lost:
      ++stats.lost;
      break;
    case LaneEnd::failed:
      ++stats.failed;
      break;
    case LaneEnd::shutdown:
    case LaneEnd::aborted:
      break;
  }
}
}  // namespace

Driver::Impl::SlotPtr Driver::Impl::newest_live_slot(const std::string& id) {
  MutexLock lk(mu_);
  auto it = live_.find(id);
  if (it == live_.end()) return nullptr;
  for (auto s = it->second.rbegin(); s != it->second.rend(); ++s) {
    driver::FlagsHeld flags(**s, held(mu_));
    if (!(*s)->ended && !(*s)->lost && !(*s)->abort) return *s;
  }
  return nullptr;
}

// A request arrived for `slot`: a delayed slot must not wait for its retry time. mu_ held.
void Driver::Impl::wake_locked(const SlotPtr& slot) {
  driver::FlagsHeld flags(*slot, held(mu_));
  if (slot->where == Slot::Where::delayed) {
    delayed_.erase(std::remove(delayed_.begin(), delayed_.end(), slot), delayed_.end());
    slot->move_to(Slot::Where::ready);
    ready_.push_back(slot);
  } else if (slot->where == Slot::Where::waiting && (slot->lost || slot->abort)) {
    // Never opened and never will be: close it without waiting for its predecessor.
    slot->move_to(Slot::Where::ready);
    ready_.push_back(slot);
  }
}

// Delayed slots whose retry time came are ready again. mu_ held.
void Driver::Impl::promote_due_locked() {
  const auto now = clock_.now();
  for (auto it = delayed_.begin(); it != delayed_.end();) {
    driver::FlagsHeld flags(**it, held(mu_));
    if ((*it)->not_before <= now) {
      (*it)->move_to(Slot::Where::ready);
      ready_.push_back(*it);
      it = delayed_.erase(it);
    } else {
      ++it;
    }
  }
}

void Driver::Impl::forget_durable(const std::string& id) {
  MutexLock lk(mu_);
  last_durable_.erase(id);
}

void Driver::Impl::after_turn(const SlotPtr& slot, Turn t) {
  {
    MutexLock lk(mu_);
    driver::FlagsHeld flags(*slot, held(mu_));
    if (t == Turn::closed || slot->where != Slot::Where::running) return;
    const bool urgent = slot->lost || slot->abort || slot->forced;
    if (t == Turn::again || urgent) {
      slot->move_to(Slot::Where::ready);
      ready_.push_back(slot);
    } else {
      slot->move_to(Slot::Where::delayed);
      delayed_.push_back(slot);
    }
  }
  work_cv_.notify_one();
}

// Closes the lane (if it was opened) and takes the slot out of the table; the next tenancy of
// the split, waiting for this one, becomes ready.
Driver::Impl::Turn Driver::Impl::close_slot(Slot& slot, LaneEnd end) {
  const bool had_lane = slot.lane != nullptr;
  if (slot.lane) {
    try {
      slot.lane->close(end);
    } catch (const std::exception& e) {
      log().warn("etlc: {}: closing the lane of '{}' threw: {}", instance_, slot.id(), e.what());
    }
    slot.lane.reset();
  }
  {
    MutexLock lk(mu_);
    if (had_lane && stats_.lanes_open > 0) --stats_.lanes_open;
    count_end(stats_, end);
    metrics_->lane_ended(end);
    driver::FlagsHeld flags(slot, held(mu_));
    slot.ended = true;
    slot.move_to(Slot::Where::closed);
    auto it = live_.find(slot.id());
    if (it != live_.end()) {
      auto& v = it->second;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& p) { return p.get() == &slot; }),
              v.end());
      if (v.empty()) {
        live_.erase(it);
      } else {
        driver::FlagsHeld next(*v.front(), held(mu_));
        if (v.front()->where == Slot::Where::waiting) {
          v.front()->move_to(Slot::Where::ready);
          ready_.push_back(v.front());
        }
      }
    }
    --live_count_;
  }
  work_cv_.notify_all();
  return Turn::closed;
}

}  // namespace etlc
