#include "sim_sink.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace etlc::sim {

namespace {
constexpr VirtualNs kMaxLateNs = 500 * kNsPerMs;
}  // namespace

SimSink::SimSink(const RunParams& params, const VirtualTime& time, Trace& trace, History& history)
    : p_(params), time_(time), trace_(trace), history_(history), rng_(Rng::stream(params.seed, 5)) {
  for (std::uint64_t n : params.records) copies_.emplace_back(n, 0);
}

void SimSink::note(std::int32_t inc, const std::string& what) {
  trace_.add(time_.now(), TraceKind::note, inc, what);
}

SimSink::Fate SimSink::fate() {
  if (!faults_on_) return Fate::apply;
  const double u = rng_.unit();
  if (u < p_.faults.sink_fail) return Fate::fail;
  if (u < p_.faults.sink_fail + p_.faults.sink_unknown) {
    const auto k = rng_.below(3);
    return k == 0 ? Fate::drop : k == 1 ? Fate::apply_unknown : Fate::late;
  }
  return Fate::apply;
}

void SimSink::land_due() {
  while (!late_.empty() && late_.front().at <= time_.now()) {
    const Late l = late_.front();
    late_.erase(late_.begin());
    std::uint64_t stored = 0;
    const Status s = apply_write(l.inc, l.split, l.epoch, l.first, l.count, l.state, stored);
    note(l.inc, fmt::format("sink: late write of {} records {}+{} e{} lands: {}", l.split, l.first,
                            l.count, l.epoch, s == Status::ok ? "applied" : "not applied"));
  }
}

SimSink::Status SimSink::apply_open(const SinkLane& lane, std::uint64_t epoch,
                                    std::uint64_t& watermark) {
  Row& r = rows_.try_emplace(lane.split, Row{0, 0, lane.base, lane.lo, {}}).first->second;
  if (r.epoch > epoch && !p_.faults.unsafe_sink_without_fence) {
    ++stats_.refused;
    watermark = r.epoch;
    return Status::refused;
  }
  r.epoch = std::max(r.epoch, epoch);
  watermark = r.watermark;
  ++stats_.opens;
  return Status::ok;
}

SimSink::Status SimSink::apply_write(std::int32_t inc, const std::string& split,
                                     std::uint64_t epoch, std::uint64_t first, std::uint64_t count,
                                     const std::string& state, std::uint64_t& stored) {
  auto row = rows_.find(split);
  if (row == rows_.end()) {
    history_.fail(7, fmt::format("a write of split {} at epoch {} reached the sink, which was "
                                 "never opened for it",
                                 split, epoch));
    return Status::refused;
  }
  Row& r = row->second;
  const bool unsafe = p_.faults.unsafe_sink_without_fence;
  if (!unsafe) {
    if (r.epoch > epoch) {
      ++stats_.refused;
      stored = r.epoch;
      return Status::refused;
    }
    if (r.epoch < epoch) {
      history_.fail(7, fmt::format("a write of split {} at epoch {} reached the sink, whose fence "
                                   "stands at epoch {}: it was never opened for that epoch",
                                   split, epoch, r.epoch));
      return Status::refused;
    }
    if (r.watermark != first) {
      stored = r.watermark;
      return Status::mismatch;
    }
  }
  std::vector<std::uint32_t>& copies = copies_.at(r.base);
  for (std::uint64_t i = r.lo + first; i < r.lo + first + count && i < copies.size(); ++i) {
    if (copies[i]++ > 0) {
      history_.fail(7, fmt::format("record {} of split {} was written to the sink twice (the "
                                   "second time by {} at epoch {})",
                                   i, History::split_id(r.base), split, epoch));
    }
  }
  if (first + count >= r.watermark) r.state = state;
  r.watermark = std::max(r.watermark, first + count);
  ++stats_.writes;
  stats_.records += count;
  history_.on_emit(inc, r.base, r.lo + first, count);  // emitted = durable in the sink
  return Status::ok;
}

SimSink::Status SimSink::open(std::int32_t inc, const SinkLane& lane, std::uint64_t epoch,
                              std::uint64_t& watermark) {
  land_due();
  switch (fate()) {
    case Fate::fail:
      ++stats_.failed;
      return Status::failed;
    case Fate::drop:
    case Fate::late:  // raising the fence later changes nothing a retry does not
      ++stats_.unknown;
      return Status::unknown;
    case Fate::apply_unknown:
      ++stats_.unknown;
      apply_open(lane, epoch, watermark);
      return Status::unknown;
    case Fate::apply:
      break;
  }
  const Status s = apply_open(lane, epoch, watermark);
  note(inc, fmt::format("sink: open {} e{}: {} (watermark/epoch {})", lane.split, epoch,
                        s == Status::ok ? "open" : "refused", watermark));
  return s;
}

SimSink::Status SimSink::write(std::int32_t inc, const SinkLane& lane, std::uint64_t epoch,
                               std::uint64_t first, std::uint64_t count, std::uint64_t& stored) {
  const std::string& split = lane.split;
  land_due();
  switch (fate()) {
    case Fate::fail:
      ++stats_.failed;
      return Status::failed;
    case Fate::drop:
      ++stats_.unknown;
      return Status::unknown;
    case Fate::late:
      ++stats_.unknown;
      ++stats_.late;
      late_.push_back(Late{time_.now() + rng_.range(1, kMaxLateNs), inc, split, epoch, first, count,
                           lane.state});
      std::stable_sort(late_.begin(), late_.end(),
                       [](const Late& a, const Late& b) { return a.at < b.at; });
      return Status::unknown;
    case Fate::apply_unknown:
      ++stats_.unknown;
      apply_write(inc, split, epoch, first, count, lane.state, stored);
      return Status::unknown;
    case Fate::apply:
      break;
  }
  return apply_write(inc, split, epoch, first, count, lane.state, stored);
}

std::uint64_t SimSink::emit(std::int32_t inc, std::uint64_t epoch, SinkLane& lane,
                            std::uint64_t next, std::uint64_t count) {
  if (lane.refused) return next;
  const std::string& split = lane.split;
  if (!lane.opened) {
    std::uint64_t w = 0;
    const Status s = open(inc, lane, epoch, w);
    if (s == Status::refused) {
      lane.refused = true;
      return next;
    }
    if (s != Status::ok) return next;  // failed or unknown: open again next time (idempotent)
    lane.opened = true;
    if (w > next) {
      ++stats_.sink_resumes;
      note(inc,
           fmt::format("sink: {} resumes at the sink's watermark {} (granted {})", split, w, next));
      next = w;
      lane.resumed_state = rows_.at(split).state;  // the Driver resumes from the sink's progress
    }
    return next;  // the open took this action
  }
  if (lane.unsettled) {
    // Read the fence row (a plain read: no faults beyond what the next write meets).
    land_due();
    const Row& r = rows_.at(split);  // opened
    if (r.epoch > epoch && !p_.faults.unsafe_sink_without_fence) {
      lane.refused = true;
      ++stats_.refused;
      return next;
    }
    lane.unsettled = false;
    if (r.watermark == lane.unsettled_to) {
      ++stats_.settled_landed;
      return lane.unsettled_to;
    }
    return next;  // not landed (yet: a late landing will find the watermark moved and miss)
  }
  if (count == 0) return next;
  std::uint64_t stored = 0;
  switch (write(inc, lane, epoch, next, count, stored)) {
    case Status::ok:
      return next + count;
    case Status::refused:
      lane.refused = true;
      return next;
    case Status::mismatch:
      // Only this tenancy writes at this epoch: a watermark that moved forward under it is its
      // own earlier write (an unknown outcome that landed late, perhaps a batch of another size).
      if (stored < next) {
        history_.fail(7, fmt::format("the sink's watermark of split {} at epoch {} went back to "
                                     "{}, below its lane's {}",
                                     split, epoch, stored, next));
      }
      ++stats_.settled_landed;
      return stored;
    case Status::failed:
      return next;
    case Status::unknown:
      lane.unsettled = true;
      lane.unsettled_to = next + count;
      return next;
  }
  return next;
}

std::uint64_t SimSink::reach(const SinkLane& lane) const {
  std::uint64_t at = lane.unsettled ? lane.unsettled_to : 0;
  if (auto r = rows_.find(lane.split); r != rows_.end()) at = std::max(at, r->second.watermark);
  for (const Late& l : late_) {
    if (l.split == lane.split) at = std::max(at, l.first + l.count);
  }
  return at;
}

void SimSink::on_refusal_answer(const std::string& split, std::uint64_t epoch, bool durable) {
  if (durable && !p_.faults.unsafe_sink_without_fence) {
    history_.fail(7,
                  fmt::format("the sink refused split {} at epoch {}, yet the coordination store "
                              "accepted that tenancy's failure: the sink's fence was ahead of "
                              "every grant",
                              split, epoch));
  } else if (!durable) {
    ++stats_.zombie_refusals;
  }
}

void SimSink::check_final(const History& history) {
  for (const auto& [id, t] : history.splits()) {
    if (!t.exists || t.rec.status != core::SplitStatus::completed) continue;
    const std::vector<std::uint32_t>& copies = copies_.at(t.index);
    for (std::uint64_t k = t.lo; k < t.lo + t.rec.progress.watermark && k < copies.size(); ++k) {
      if (copies[k] != 1) {
        history_.fail(7, fmt::format("the run completed, but the sink holds record {} of split {} "
                                     "{} times (completed by {})",
                                     k, History::split_id(t.index), copies[k], id));
        return;
      }
    }
  }
}

}  // namespace etlc::sim
