#include "lane.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "cut.hpp"
#include "plan.hpp"
#include "schema.hpp"

namespace pgb {

void Pacer::pace(std::uint64_t rows, const std::stop_token& stop) {
  if (rate_ == 0 || rows == 0) return;
  using clock = std::chrono::steady_clock;
  const std::int64_t now = clock::now().time_since_epoch().count();
  const auto cost = static_cast<std::int64_t>(rows * 1'000'000'000ull / rate_);
  std::int64_t until;
  {
    std::lock_guard lk(mu_);
    next_free_ns_ = std::max(next_free_ns_, now) + cost;
    until = next_free_ns_;
  }
  while (!stop.stop_requested()) {
    const std::int64_t left = until - clock::now().time_since_epoch().count();
    if (left <= 0) return;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<std::int64_t>(left, 50'000'000)));
  }
}

namespace {

constexpr auto kWarnEvery = std::chrono::seconds(5);

// The ids of the range from its start (`from` ">=") or after the last id written (">").
std::string page_sql(const std::string& table, const char* from) {
  return "SELECT id, payload FROM " + quote_ident(table) + " WHERE id " + from +
         " $1 AND id <= $2 ORDER BY id LIMIT $3";
}
std::string bounds_sql(const std::string& table, const char* from) {
  return "SELECT min(id), max(id) FROM " + quote_ident(table) + " WHERE id " + from +
         " $1 AND id <= $2";
}

class PgLane final : public etlc::Lane {
 public:
  // `state` is the resume state, checked against `range` (the descriptor's).
  PgLane(const etlc::LaneContext& ctx, const LaneSettings& s, IdRange range, const LaneState& state)
      : ctx_(ctx),
        s_(s),
        range_(range),
        cut_(state.hi.has_value()),
        weight_(ctx.spec.weight),
        writer_(*s.sink, s.target, ctx.spec.id, ctx.epoch, ctx.instance_id, ctx.resume),
        select_first_(page_sql(s.table, ">=")),
        select_next_(page_sql(s.table, ">")),
        bounds_first_(bounds_sql(s.table, ">=")),
        bounds_next_(bounds_sql(s.table, ">")) {
    if (cut_) shrink_to(*state.hi);
  }

  ~PgLane() override {
    if (source_) s_.source->give(std::move(source_));
  }

  etlc::StepResult step() override {
    std::string detail;
    switch (writer_.settle(detail)) {
      case SinkWriter::Outcome::refused:
        return refused(detail);
      case SinkWriter::Outcome::retry:
        return unreachable("sink", detail);
      default:
        break;
    }
    std::vector<Row> rows;
    if (!read_page(rows, detail)) return unreachable("source", detail);
    if (rows.empty()) return etlc::StepResult::end();
    if (s_.pacer) s_.pacer->pace(rows.size(), ctx_.stop);
    if (ctx_.stop.stop_requested()) return etlc::StepResult::more();
    switch (writer_.write(rows, ctx_.live, detail)) {
      case SinkWriter::Outcome::written:
        s_.counters->rows_written += rows.size();
        ++s_.counters->batches;
        break;
      case SinkWriter::Outcome::refused:
        return refused(detail);
      case SinkWriter::Outcome::lapsed:
        ++s_.counters->lapsed;  // the Driver closes the lane as lost before its next call
        return etlc::StepResult::more();
      case SinkWriter::Outcome::retry:
        return unreachable("sink", detail);
    }
    return rows.size() < s_.batch_rows ? etlc::StepResult::end() : etlc::StepResult::more();
  }

  etlc::SplitProgress durable_progress() override {
    etlc::SplitProgress p = writer_.progress();
    // After a cut the state names the new end even before a batch writes it to the sink.
    if (cut_) p.state = encode_state({last_written(), range_.hi});
    return p;
  }

  // Cuts by key what is left to read (cut.hpp): the residual is [cut, hi], this lane keeps the
  // rest. Between steps nothing is in flight, except a batch whose COMMIT outcome is unknown: it
  // is settled first, so the cut lies past every id the sink may hold.
  std::optional<etlc::SplitResidual> split(double keep) override {
    std::string detail;
    if (writer_.settle(detail) != SinkWriter::Outcome::written) return std::nullopt;
    const auto left = ids_left();
    if (!left) return std::nullopt;
    const auto cut = cut_point(left->first, left->second, keep);
    if (!cut) return std::nullopt;
    const IdRange rest{*cut, range_.hi,
                       residual_rows(rows_left(), left->first, left->second, *cut)};
    shrink_to(*cut - 1);
    weight_ -= std::min(weight_, rest.rows);
    spdlog::info(
        "pg-backfill: {} split '{}' cut at id {}: it reads ids up to {}, a new split {}..{} "
        "(about {} rows)",
        ctx_.instance_id, ctx_.spec.id, *cut, range_.hi, rest.lo, rest.hi, rest.rows);
    return etlc::SplitResidual{encode_range(rest), rest.rows};
  }

 private:
  void shrink_to(std::int64_t hi) {
    range_.hi = hi;
    cut_ = true;
    writer_.set_end(hi);
  }

  // The last id the sink holds for this split. The writer's state is the resume state (checked
  // at open) or one it wrote, so it decodes.
  std::optional<std::int64_t> last_written() const {
    return decode_state(writer_.progress().state).value().last;
  }

  // The planned rows not written yet (the planned weight, less the residuals given away): an
  // estimate, like the weight.
  std::uint64_t rows_left() const {
    const std::uint64_t written = writer_.progress().watermark;
    return weight_ > written ? weight_ - written : 0;
  }

  // The lowest and highest ids left to read; nullopt when there are none or the source cannot
  // be reached (the request is declined; the leader may ask again).
  std::optional<std::pair<std::int64_t, std::int64_t>> ids_left() {
    const auto last = last_written();
    std::string detail;
    auto r = query(last ? bounds_next_ : bounds_first_,
                   {std::to_string(last ? *last : range_.lo), std::to_string(range_.hi)}, detail);
    if (!r || r->rows() != 1 || r->null(0, 0)) return std::nullopt;
    return std::pair{r->int64(0, 0), r->int64(0, 1)};
  }

  // A source statement; nullopt (detail says why) if the source could not be reached.
  std::optional<Result> query(const std::string& sql,
                              const std::vector<std::optional<std::string>>& params,
                              std::string& detail) {
    try {
      if (!source_ || !source_->ok()) source_ = s_.source->take();
      return source_->exec(sql, params);
    } catch (const PgError& e) {
      if (!e.connection_lost()) throw;
      source_.reset();
      detail = e.what();
      return std::nullopt;
    }
  }

  etlc::StepResult refused(const std::string& detail) {
    ++s_.counters->refused;
    return etlc::StepResult::fenced(detail);
  }

  // A database is unreachable: log (rate-limited), wait a little, let the Driver come back.
  etlc::StepResult unreachable(const char* which, const std::string& detail) {
    ++s_.counters->retries;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_warning_ >= kWarnEvery) {
      last_warning_ = now;
      spdlog::warn("pg-backfill: {} split '{}': the {} database is unreachable (retrying): {}",
                   ctx_.instance_id, ctx_.spec.id, which, detail);
    }
    const auto until = now + s_.retry_pause;
    while (!ctx_.stop.stop_requested() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return etlc::StepResult::more();
  }

  // The next page after the sink's progress. False if the source could not be reached.
  bool read_page(std::vector<Row>& rows, std::string& detail) {
    const auto last = last_written();
    auto r = query(last ? select_next_ : select_first_,
                   {std::to_string(last ? *last : range_.lo), std::to_string(range_.hi),
                    std::to_string(s_.batch_rows)},
                   detail);
    if (!r) return false;
    rows.reserve(static_cast<std::size_t>(r->rows()));
    for (int i = 0; i < r->rows(); ++i)
      rows.push_back(Row{r->int64(i, 0), std::string(r->text(i, 1))});
    return true;
  }

  etlc::LaneContext ctx_;
  const LaneSettings& s_;
  IdRange range_;         // what this lane reads: hi is the cut's once cut
  bool cut_;              // range_.hi comes from a cut: the state must carry it
  std::uint64_t weight_;  // the range's planned rows, less the residuals given away
  SinkWriter writer_;
  std::unique_ptr<Connection> source_;
  std::string select_first_, select_next_, bounds_first_, bounds_next_;
  std::chrono::steady_clock::time_point last_warning_{};
};

// A cut end inside the range, a last id inside what is left of it.
bool within(const LaneState& s, const IdRange& r) {
  const std::int64_t hi = s.hi.value_or(r.hi);
  if (hi < r.lo || hi > r.hi) return false;
  return !s.last || (*s.last >= r.lo && *s.last <= hi);
}

}  // namespace

std::unique_ptr<etlc::Lane> PgSource::open(const etlc::LaneContext& ctx) {
  const auto range = decode_range(ctx.spec.descriptor);
  if (!range) {
    throw std::runtime_error("split '" + ctx.spec.id + "' has descriptor '" + ctx.spec.descriptor +
                             "', not an id range 'lo hi'");
  }
  const auto state = decode_state(ctx.resume.state);
  if (!state || !within(*state, *range)) {
    throw std::runtime_error("split '" + ctx.spec.id + "' resumes from state '" + ctx.resume.state +
                             "', not '[<last id>] [hi=<end>]' with ids in its range");
  }
  return std::make_unique<PgLane>(ctx, s_, *range, *state);
}

}  // namespace pgb
