#include "lane.hpp"

#include <spdlog/spdlog.h>

#include <charconv>
#include <thread>
#include <vector>

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

class PgLane final : public etlc::Lane {
 public:
  PgLane(const etlc::LaneContext& ctx, const LaneSettings& s, IdRange range)
      : ctx_(ctx),
        s_(s),
        range_(range),
        writer_(*s.sink, s.target, ctx.spec.id, ctx.epoch, ctx.instance_id, ctx.resume),
        select_first_("SELECT id, payload FROM " + quote_ident(s.table) +
                      " WHERE id >= $1 AND id <= $2 ORDER BY id LIMIT $3"),
        select_next_("SELECT id, payload FROM " + quote_ident(s.table) +
                     " WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3") {}

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

  etlc::SplitProgress durable_progress() override { return writer_.progress(); }

 private:
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
    const std::string& last = writer_.progress().state;
    try {
      if (!source_ || !source_->ok()) source_ = s_.source->take();
      Result r = source_->exec(last.empty() ? select_first_ : select_next_,
                               {last.empty() ? std::to_string(range_.lo) : last,
                                std::to_string(range_.hi), std::to_string(s_.batch_rows)});
      rows.reserve(static_cast<std::size_t>(r.rows()));
      for (int i = 0; i < r.rows(); ++i)
        rows.push_back(Row{r.int64(i, 0), std::string(r.text(i, 1))});
      return true;
    } catch (const PgError& e) {
      if (!e.connection_lost()) throw;
      source_.reset();
      detail = e.what();
      return false;
    }
  }

  etlc::LaneContext ctx_;
  const LaneSettings& s_;
  IdRange range_;
  SinkWriter writer_;
  std::unique_ptr<Connection> source_;
  std::string select_first_, select_next_;
  std::chrono::steady_clock::time_point last_warning_{};
};

}  // namespace

std::unique_ptr<etlc::Lane> PgSource::open(const etlc::LaneContext& ctx) {
  const auto range = decode_range(ctx.spec.descriptor);
  if (!range) {
    throw std::runtime_error("split '" + ctx.spec.id + "' has descriptor '" + ctx.spec.descriptor +
                             "', not an id range 'lo hi'");
  }
  if (!ctx.resume.state.empty()) {
    std::int64_t last = 0;
    const std::string& st = ctx.resume.state;
    auto [p, ec] = std::from_chars(st.data(), st.data() + st.size(), last);
    if (ec != std::errc() || p != st.data() + st.size() || last < range->lo || last > range->hi) {
      throw std::runtime_error("split '" + ctx.spec.id + "' resumes from state '" + st +
                               "', not an id in its range");
    }
  }
  return std::make_unique<PgLane>(ctx, s_, *range);
}

}  // namespace pgb
