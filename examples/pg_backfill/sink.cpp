#include "sink.hpp"

#include "cut.hpp"
#include "schema.hpp"

namespace pgb {

namespace {

const std::string& fence() {
  static const std::string t = quote_ident(kFenceTable);
  return t;
}

// The fence row: epoch, watermark, state (nullopt if there is none).
struct FenceRow {
  std::uint64_t epoch = 0;
  etlc::SplitProgress progress;
};

std::optional<FenceRow> read_fence(Connection& c, const std::string& job,
                                   const std::string& split) {
  Result r =
      c.exec("SELECT epoch, watermark, state FROM " + fence() + " WHERE job = $1 AND split = $2",
             {job, split});
  if (r.rows() == 0) return std::nullopt;
  return FenceRow{static_cast<std::uint64_t>(r.int64(0, 0)),
                  {static_cast<std::uint64_t>(r.int64(0, 1)), std::string(r.text(0, 2))}};
}

}  // namespace

etlc::FenceResult PgSinkFence::open(std::string_view split_id, std::uint64_t epoch) {
  const std::string split(split_id);
  std::unique_ptr<Connection> c;
  try {
    c = pool_->take();
    Result r = c->exec("INSERT INTO " + fence() +
                           " AS f (job, split, epoch, watermark, state) VALUES ($1, $2, $3, 0, '') "
                           "ON CONFLICT (job, split) DO UPDATE SET epoch = EXCLUDED.epoch "
                           "WHERE f.epoch <= EXCLUDED.epoch RETURNING watermark, state",
                       {job_, split, std::to_string(epoch)});
    etlc::FenceResult out;
    if (r.rows() == 1) {
      out.status = etlc::FenceStatus::open;
      out.progress = {static_cast<std::uint64_t>(r.int64(0, 0)), std::string(r.text(0, 1))};
    } else {
      const auto row = read_fence(*c, job_, split);
      out.status = etlc::FenceStatus::refused;
      out.sink_epoch = row ? row->epoch : 0;
      out.detail = "fence row in " + std::string(kFenceTable) + " (job '" + job_ + "')";
    }
    pool_->give(std::move(c));
    return out;
  } catch (const PgError& e) {
    if (!e.connection_lost()) throw;
    return etlc::FenceResult{etlc::FenceStatus::retryable, {}, 0, e.what()};
  }
}

SinkWriter::SinkWriter(ConnPool& pool, SinkTarget target, std::string split_id, std::uint64_t epoch,
                       std::string writer, etlc::SplitProgress start)
    : pool_(pool),
      target_(std::move(target)),
      split_(std::move(split_id)),
      epoch_(epoch),
      writer_(std::move(writer)),
      progress_(std::move(start)),
      copy_sql_("COPY " + quote_ident(target_.sink_table) +
                " (id, payload, split, epoch, writer) FROM STDIN") {}

SinkWriter::~SinkWriter() {
  if (conn_) pool_.give(std::move(conn_));
}

bool SinkWriter::connect(std::string& detail) {
  if (conn_ && conn_->ok()) return true;
  conn_.reset();
  try {
    conn_ = pool_.take();
    return true;
  } catch (const PgError& e) {
    if (!e.connection_lost()) throw;
    detail = e.what();
    return false;
  }
}

SinkWriter::Outcome SinkWriter::settle(std::string& detail) {
  if (!unsettled_) return Outcome::written;
  if (!target_.fenced) {
    // No fence row to ask: assume the batch did not land and write it again (at-least-once).
    unsettled_.reset();
    return Outcome::written;
  }
  if (!connect(detail)) return Outcome::retry;
  try {
    const auto row = read_fence(*conn_, target_.job, split_);
    if (row && row->epoch > epoch_) {
      detail = "its fence stands at epoch " + std::to_string(row->epoch);
      return Outcome::refused;
    }
    if (row && row->epoch == epoch_ && row->progress.watermark == unsettled_->watermark) {
      progress_ = *unsettled_;  // the unknown COMMIT landed
    }
    unsettled_.reset();
    return Outcome::written;
  } catch (const PgError& e) {
    if (!e.connection_lost()) throw;
    conn_.reset();
    detail = e.what();
    return Outcome::retry;
  }
}

// The fenced UPDATE matched no row: why? `next` is where this batch would have moved it.
SinkWriter::Outcome SinkWriter::check_fence(const etlc::SplitProgress& next, std::string& detail) {
  const auto row = read_fence(*conn_, target_.job, split_);
  if (!row) {
    detail = "its fence row is gone from " + std::string(kFenceTable);
    return Outcome::refused;
  }
  if (row->epoch > epoch_) {
    detail = "its fence stands at epoch " + std::to_string(row->epoch);
    return Outcome::refused;
  }
  if (row->epoch == epoch_ && row->progress == next) {
    // Only this tenancy writes at its epoch: this very batch committed earlier, in a transaction
    // whose COMMIT outcome was unknown and which landed after settle() looked.
    progress_ = next;
    return Outcome::written;
  }
  throw std::runtime_error(
      "the sink fence row of split '" + split_ + "' says epoch " + std::to_string(row->epoch) +
      " watermark " + std::to_string(row->progress.watermark) + ", this tenancy expected epoch " +
      std::to_string(epoch_) + " watermark " + std::to_string(progress_.watermark) +
      " (changed by hand?)");
}

SinkWriter::Outcome SinkWriter::write(std::span<const Row> rows, const std::function<bool()>& live,
                                      std::string& detail) {
  if (rows.empty()) return Outcome::written;
  if (live && !live()) return Outcome::lapsed;
  if (!connect(detail)) return Outcome::retry;
  const etlc::SplitProgress next{progress_.watermark + rows.size(),
                                 encode_state({rows.back().id, end_})};
  std::string data;
  const std::string tail = "\t" + split_ + "\t" + std::to_string(epoch_) + "\t" + writer_ + "\n";
  for (const Row& r : rows) {
    data += std::to_string(r.id);
    data += '\t';
    copy_escape(r.payload, data);
    data += tail;
  }
  bool committing = false;
  try {
    conn_->exec("BEGIN");
    if (target_.fenced) {
      Result u = conn_->exec("UPDATE " + fence() +
                                 " SET watermark = $1, state = $2 WHERE job = $3 AND split = $4 "
                                 "AND epoch = $5 AND watermark = $6",
                             {std::to_string(next.watermark), next.state, target_.job, split_,
                              std::to_string(epoch_), std::to_string(progress_.watermark)});
      if (u.affected() != 1) {
        conn_->exec("ROLLBACK");
        return check_fence(next, detail);
      }
    }
    conn_->copy_in(copy_sql_, data);
    if (live && !live()) {
      conn_->exec("ROLLBACK");
      return Outcome::lapsed;
    }
    committing = true;
    conn_->exec("COMMIT");
  } catch (const PgError& e) {
    if (!e.connection_lost()) {
      conn_->rollback_quietly();
      throw;
    }
    conn_.reset();
    if (committing) unsettled_ = next;
    detail = e.what();
    return Outcome::retry;
  }
  progress_ = next;
  return Outcome::written;
}

}  // namespace pgb
