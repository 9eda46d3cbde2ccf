#include "sim_sink.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace etlc::sim {

namespace {
constexpr VirtualNs kMaxLateNs = 500 * kNsPerMs;
}  // namespace

SimSink::SimSink(const RunParams& params, const VirtualTime& time, Trace& trace, History& history)
    : p_(params), time_(time), trace_(trace), history_(history), rng_(Rng::stream(params.seed, 5)) {
  rows_.resize(params.records.size());
  for (std::size_t i = 0; i < rows_.size(); ++i) rows_[i].copies.assign(params.records[i], 0);
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
    const Status s = apply_write(l.inc, l.split, l.epoch, l.first, l.count, stored);
    note(l.inc, fmt::format("sink: late write of {} records {}+{} e{} lands: {}",
                            History::split_id(l.split), l.first, l.count, l.epoch,
                            s == Status::ok ? "applied" : "not applied"));
  }
}

SimSink::Status SimSink::apply_open(std::size_t split, std::uint64_t epoch,
                                    std::uint64_t& watermark) {
  Row& r = rows_.at(split);
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

SimSink::Status SimSink::apply_write(std::int32_t inc, std::size_t split, std::uint64_t epoch,
                                     std::uint64_t first, std::uint64_t count,
                                     std::uint64_t& stored) {
  Row& r = rows_.at(split);
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
                                   History::split_id(split), epoch, r.epoch));
      return Status::refused;
    }
    if (r.watermark != first) {
      stored = r.watermark;
      return Status::mismatch;
    }
  }
  for (std::uint64_t i = first; i < first + count && i < r.copies.size(); ++i) {
    if (r.copies[i]++ > 0) {
      history_.fail(7, fmt::format("record {} of split {} was written to the sink twice (the "
                                   "second time at epoch {})",
                                   i, History::split_id(split), epoch));
    }
  }
  r.watermark = std::max(r.watermark, first + count);
  ++stats_.writes;
  stats_.records += count;
  history_.on_emit(inc, split, first, count);  // emitted = durable in the sink
  return Status::ok;
}

SimSink::Status SimSink::open(std::int32_t inc, std::size_t split, std::uint64_t epoch,
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
      apply_open(split, epoch, watermark);
      return Status::unknown;
    case Fate::apply:
      break;
  }
  const Status s = apply_open(split, epoch, watermark);
  note(inc, fmt::format("sink: open {} e{}: {} (watermark/epoch {})", History::split_id(split),
                        epoch, s == Status::ok ? "open" : "refused", watermark));
  return s;
}

SimSink::Status SimSink::write(std::int32_t inc, std::size_t split, std::uint64_t epoch,
                               std::uint64_t first, std::uint64_t count, std::uint64_t& stored) {
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
      late_.push_back(
          Late{time_.now() + rng_.range(1, kMaxLateNs), inc, split, epoch, first, count});
      std::stable_sort(late_.begin(), late_.end(),
                       [](const Late& a, const Late& b) { return a.at < b.at; });
      return Status::unknown;
    case Fate::apply_unknown:
      ++stats_.unknown;
      apply_write(inc, split, epoch, first, count, stored);
      return Status::unknown;
    case Fate::apply:
      break;
  }
  return apply_write(inc, split, epoch, first, count, stored);
}

std::uint64_t SimSink::emit(std::int32_t inc, std::size_t split, std::uint64_t epoch,
                            SinkLane& lane, std::uint64_t next, std::uint64_t count) {
  if (lane.refused) return next;
  if (!lane.opened) {
    std::uint64_t w = 0;
    const Status s = open(inc, split, epoch, w);
    if (s == Status::refused) {
      lane.refused = true;
      return next;
    }
    if (s != Status::ok) return next;  // failed or unknown: open again next time (idempotent)
    lane.opened = true;
    if (w > next) {
      ++stats_.sink_resumes;
      note(inc, fmt::format("sink: {} resumes at the sink's watermark {} (granted {})",
                            History::split_id(split), w, next));
      next = w;
    }
    return next;  // the open took this action
  }
  if (lane.unsettled) {
    // Read the fence row (a plain read: no faults beyond what the next write meets).
    land_due();
    const Row& r = rows_.at(split);
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
  switch (write(inc, split, epoch, next, count, stored)) {
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
                                     History::split_id(split), epoch, stored, next));
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

void SimSink::on_refusal_answer(std::size_t split, std::uint64_t epoch, bool durable) {
  if (durable && !p_.faults.unsafe_sink_without_fence) {
    history_.fail(7,
                  fmt::format("the sink refused split {} at epoch {}, yet the coordination store "
                              "accepted that tenancy's failure: the sink's fence was ahead of "
                              "every grant",
                              History::split_id(split), epoch));
  } else if (!durable) {
    ++stats_.zombie_refusals;
  }
}

void SimSink::check_final(const History& history) {
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const auto& truth = history.splits().find(History::split_id(i));
    if (truth == history.splits().end() || !truth->second.exists ||
        truth->second.rec.status != core::SplitStatus::completed) {
      continue;
    }
    const Row& r = rows_[i];
    for (std::size_t k = 0; k < r.copies.size(); ++k) {
      if (r.copies[k] != 1) {
        history_.fail(7, fmt::format("the run completed, but the sink holds record {} of split {} "
                                     "{} times",
                                     k, History::split_id(i), r.copies[k]));
        return;
      }
    }
  }
}

}  // namespace etlc::sim
