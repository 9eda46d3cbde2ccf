#include "lane.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "csv.hpp"
#include "json_line.hpp"
#include "mapped_file.hpp"
#include "plan.hpp"

namespace fb {

namespace fs = std::filesystem;

// --- small pieces -------------------------------------------------------------------------------

void JobProgress::advance(const std::string& split, std::uint64_t watermark) {
  std::lock_guard lk(mu_);
  std::uint64_t& m = max_[split];
  if (watermark > m) {
    covered_ += watermark - m;
    m = watermark;
  }
}

std::uint64_t JobProgress::covered_bytes() const {
  std::lock_guard lk(mu_);
  return covered_;
}

void JobProgress::opened(LaneOpened event) {
  std::lock_guard lk(mu_);
  if (opened_.size() < 100'000) opened_.push_back(std::move(event));
}

std::vector<LaneOpened> JobProgress::take_opened() {
  std::lock_guard lk(mu_);
  return std::exchange(opened_, {});
}

void Pacer::pace(std::uint64_t bytes, const std::stop_token& stop) {
  if (rate_ == 0 || bytes == 0) return;
  using clock = std::chrono::steady_clock;
  const std::int64_t now = clock::now().time_since_epoch().count();
  const auto cost = static_cast<std::int64_t>(bytes * 1'000'000'000ull / rate_);
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

std::string encode_counts(std::uint64_t rows, std::uint64_t malformed) {
  return std::to_string(rows) + " " + std::to_string(malformed);
}

void decode_counts(const std::string& state, std::uint64_t& rows, std::uint64_t& malformed) {
  rows = 0;
  malformed = 0;
  if (state.empty()) return;
  const auto space = state.find(' ');
  if (space == std::string::npos) throw std::invalid_argument("bad progress state: " + state);
  rows = std::stoull(state.substr(0, space));
  malformed = std::stoull(state.substr(space + 1));
}

fs::path data_file(const fs::path& output, const std::string& split, std::uint64_t epoch) {
  return output / "data" / (split + ".e" + std::to_string(epoch) + ".jsonl");
}

fs::path rejects_file(const fs::path& output, const std::string& split, std::uint64_t epoch) {
  return output / "rejects" / (split + ".e" + std::to_string(epoch) + ".jsonl");
}

namespace {

[[noreturn]] void fail_errno(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_errno("cannot open directory " + dir.string());
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail_errno("cannot fsync directory " + dir.string());
}

// An append-only output file. Opening it drops a torn last line (one without its newline): such a
// line was never covered by a commit, since progress is reported only after whole lines are
// durable.
class OutputFile {
 public:
  explicit OutputFile(fs::path path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) fail_errno("cannot open output file " + path_.string());
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail_errno("cannot stat " + path_.string());
    if (st.st_size > 0) drop_torn_tail();
    fsync_dir(path_.parent_path());  // the new name itself must survive a crash
  }
  ~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail_errno("cannot write " + path_.string());
      }
      done += static_cast<std::size_t>(n);
    }
    if (!bytes.empty()) dirty_ = true;
  }
  void sync() {
    if (!dirty_) return;
    if (::fdatasync(fd_) != 0) fail_errno("cannot fsync " + path_.string());
    dirty_ = false;
  }

 private:
  void drop_torn_tail() {
    MappedFile m(path_);
    const std::string_view d = m.data();
    if (d.empty() || d.back() == '\n') return;
    const auto nl = d.rfind('\n');
    const std::uint64_t keep = nl == std::string_view::npos ? 0 : nl + 1;
    if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) {
      fail_errno("cannot truncate " + path_.string());
    }
  }

  fs::path path_;
  int fd_ = -1;
  bool dirty_ = false;
};

class FileLane final : public etlc::Lane {
 public:
  FileLane(const etlc::LaneContext& ctx, const LaneSettings& settings)
      : settings_(settings),
        split_(decode_descriptor(ctx.spec.id, ctx.spec.descriptor)),
        epoch_(ctx.epoch),
        stop_(ctx.stop),
        watermark_(ctx.resume.watermark),
        lane_pacer_(settings.lane_bytes_per_s) {
    decode_counts(ctx.resume.state, rows_, malformed_);
    std::uint64_t at = 0;
    for (const InputFile& f : split_.files) {
      starts_.push_back(at);
      at += f.bytes;
    }
    starts_.push_back(at);
    if (watermark_ > at) {
      throw std::runtime_error("resume watermark " + std::to_string(watermark_) +
                               " is past the end of split " + split_.id);
    }
    while (file_ < split_.files.size() && starts_[file_ + 1] <= watermark_) ++file_;
    data_ = std::make_unique<OutputFile>(data_file(settings_.output_dir, split_.id, epoch_));
    if (settings_.progress != nullptr) {
      settings_.progress->opened({split_.id, ctx.instance_id, epoch_, watermark_, split_.bytes});
    }
  }

  etlc::StepResult step() override {
    std::uint64_t consumed = 0;
    while (consumed < settings_.step_bytes && file_ < split_.files.size()) {
      if (!csv_) open_current();
      const std::size_t before = csv_->position();
      if (!csv_->next(row_)) {
        consumed += csv_->position() - before;
        close_current();
        continue;
      }
      const std::string& name = split_.files[file_].name;
      if (row_.malformed) {
        append_reject_line(rejects_buf_, name, row_.offset, row_.error);
        ++malformed_;
        settings_.counters->malformed_read.fetch_add(1, std::memory_order_relaxed);
      } else {
        append_row_line(out_, name, row_.offset, csv_->header(), row_.fields);
        ++rows_;
        ++out_rows_;
        settings_.counters->rows_read.fetch_add(1, std::memory_order_relaxed);
      }
      consumed += row_.next - before;
      watermark_ = starts_[file_] + row_.next;
    }
    settings_.counters->bytes_read.fetch_add(consumed, std::memory_order_relaxed);
    if (settings_.progress != nullptr) settings_.progress->advance(split_.id, watermark_);
    if (out_.size() >= settings_.flush_bytes) write_out();
    if (settings_.pacer != nullptr) settings_.pacer->pace(consumed, stop_);
    lane_pacer_.pace(consumed, stop_);
    return file_ < split_.files.size() ? etlc::StepResult::more() : etlc::StepResult::end();
  }

  etlc::SplitProgress durable_progress() override {
    write_out();
    data_->sync();
    if (rejects_) rejects_->sync();
    // The split's weight is its size in bytes (plan.cpp), so the bytes durably behind the
    // watermark are the weight done: the leader balances on, and etlc status reports, the rest.
    return {watermark_, encode_counts(rows_, malformed_), watermark_};
  }

  void close(etlc::LaneEnd end) override {
    if (end == etlc::LaneEnd::completed) {
      settings_.counters->splits_completed.fetch_add(1);
      settings_.counters->rows_completed.fetch_add(rows_);
      settings_.counters->malformed_completed.fetch_add(malformed_);
    }
    // Lost or crashed: whatever is still buffered was never committed; like a crash, drop it.
    if (end != etlc::LaneEnd::lost && end != etlc::LaneEnd::aborted) {
      try {
        write_out();
      } catch (const std::exception&) {
        // Uncommitted output only: the next owner replays it.
      }
    }
  }

 private:
  void open_current() {
    const InputFile& f = split_.files[file_];
    map_ = std::make_unique<MappedFile>(settings_.input_dir / f.name);
    if (map_->size() != f.bytes) {
      throw std::runtime_error("input file " + f.name + " changed since the job was planned (" +
                               std::to_string(f.bytes) + " bytes then, " +
                               std::to_string(map_->size()) + " now)");
    }
    csv_.emplace(map_->data(), static_cast<std::size_t>(watermark_ - starts_[file_]));
  }
  void close_current() {
    csv_.reset();
    map_.reset();
    watermark_ = starts_[file_ + 1];
    ++file_;
  }
  void write_out() {
    if (!out_.empty()) {
      data_->write(out_);
      settings_.counters->rows_written.fetch_add(out_rows_, std::memory_order_relaxed);
      out_.clear();
      out_rows_ = 0;
    }
    if (!rejects_buf_.empty()) {
      if (!rejects_) {
        rejects_ =
            std::make_unique<OutputFile>(rejects_file(settings_.output_dir, split_.id, epoch_));
      }
      rejects_->write(rejects_buf_);
      rejects_buf_.clear();
    }
  }

  const LaneSettings& settings_;
  SplitPlan split_;
  std::uint64_t epoch_;
  std::stop_token stop_;
  std::vector<std::uint64_t> starts_;       // split position of each file's first byte (+ the end)
  std::size_t file_ = 0;                    // the file being read
  std::uint64_t watermark_;                 // split position of the next record to read
  Pacer lane_pacer_;                        // this lane's own limit (--throttle-per lane)
  std::uint64_t rows_ = 0, malformed_ = 0;  // counted up to watermark_
  std::unique_ptr<MappedFile> map_;
  std::optional<CsvFile> csv_;
  CsvRow row_;
  std::string out_, rejects_buf_;
  std::uint64_t out_rows_ = 0;
  std::unique_ptr<OutputFile> data_, rejects_;
};

}  // namespace

std::unique_ptr<etlc::Lane> FileSource::open(const etlc::LaneContext& context) {
  return std::make_unique<FileLane>(context, settings_);
}

}  // namespace fb
