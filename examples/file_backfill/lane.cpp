#include "lane.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
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

std::string encode_state(const LaneState& state) {
  std::string s = std::to_string(state.rows) + " " + std::to_string(state.malformed);
  if (state.end) {
    s += ' ';
    s += std::to_string(*state.end);  // (appended in two steps: GCC 12 -O3 warns on " " + ...)
  }
  return s;
}

LaneState decode_state(const std::string& state) {
  LaneState out;
  if (state.empty()) return out;
  std::vector<std::uint64_t> numbers;
  std::size_t pos = 0;
  while (pos <= state.size() && numbers.size() < 4) {
    const std::size_t space = std::min(state.find(' ', pos), state.size());
    const std::string part = state.substr(pos, space - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) {
      throw std::invalid_argument("bad progress state: " + state);
    }
    numbers.push_back(std::stoull(part));
    pos = space + 1;
  }
  if (numbers.size() < 2 || numbers.size() > 3) {
    throw std::invalid_argument("bad progress state: " + state);
  }
  out.rows = numbers[0];
  out.malformed = numbers[1];
  if (numbers.size() == 3) out.end = numbers[2];
  return out;
}

std::string file_name_of(const std::string& split) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (std::size_t i = 0; i < split.size(); ++i) {
    const auto c = static_cast<unsigned char>(split[i]);
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum || c == '-' || c == '_' || c == '~' || (c == '.' && i > 0)) {
      out.push_back(static_cast<char>(c));
    } else {
      out += '%';
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

fs::path data_file(const fs::path& output, const std::string& split, std::uint64_t epoch) {
  return output / "data" / (file_name_of(split) + ".e" + std::to_string(epoch) + ".jsonl");
}

fs::path rejects_file(const fs::path& output, const std::string& split, std::uint64_t epoch) {
  return output / "rejects" / (file_name_of(split) + ".e" + std::to_string(epoch) + ".jsonl");
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
        planned_end_(split_.bytes),
        epoch_(ctx.epoch),
        stop_(ctx.stop),
        watermark_(ctx.resume.watermark),
        lane_pacer_(settings.lane_bytes_per_s) {
    const LaneState state = decode_state(ctx.resume.state);
    rows_ = state.rows;
    malformed_ = state.malformed;
    std::uint64_t at = 0;
    for (const FileRange& r : split_.ranges) {
      starts_.push_back(at);
      at += r.bytes();
    }
    starts_.push_back(at);
    if (state.end) {
      if (*state.end > planned_end_ || *state.end < watermark_) {
        throw std::runtime_error("progress of split " + split_.id + " ends at " +
                                 std::to_string(*state.end) + ", outside its range");
      }
      end_at(*state.end);
    }
    if (watermark_ > starts_.back()) {
      throw std::runtime_error("resume watermark " + std::to_string(watermark_) +
                               " is past the end of split " + split_.id);
    }
    while (file_ < split_.ranges.size() && starts_[file_ + 1] <= watermark_) ++file_;
    data_ = std::make_unique<OutputFile>(data_file(settings_.output_dir, split_.id, epoch_));
    if (settings_.progress != nullptr) {
      settings_.progress->opened({split_.id, ctx.instance_id, epoch_, watermark_, end()});
    }
  }

  etlc::StepResult step() override {
    std::uint64_t consumed = 0;
    while (consumed < settings_.step_bytes && file_ < split_.ranges.size()) {
      if (!csv_) open_current();
      const FileRange& range = split_.ranges[file_];
      const std::size_t before = csv_->position();
      // A record starting at the range's end belongs to the next range (or split).
      if (before >= range.end || !csv_->next(row_) || row_.offset >= range.end) {
        consumed += range.end > before ? range.end - before : 0;
        close_current();
        continue;
      }
      if (row_.next > range.end) {
        throw std::runtime_error("split " + split_.id + " ends at byte " +
                                 std::to_string(range.end) + " of " + range.name +
                                 ", inside the record at byte " + std::to_string(row_.offset));
      }
      if (row_.malformed) {
        append_reject_line(rejects_buf_, range.name, row_.offset, row_.error);
        ++malformed_;
        settings_.counters->malformed_read.fetch_add(1, std::memory_order_relaxed);
      } else {
        append_row_line(out_, range.name, row_.offset, csv_->header(), row_.fields);
        ++rows_;
        ++out_rows_;
        settings_.counters->rows_read.fetch_add(1, std::memory_order_relaxed);
      }
      consumed += row_.next - before;
      watermark_ = starts_[file_] + (row_.next - range.begin);
    }
    settings_.counters->bytes_read.fetch_add(consumed, std::memory_order_relaxed);
    if (settings_.progress != nullptr) settings_.progress->advance(split_.id, watermark_);
    if (out_.size() >= settings_.flush_bytes) write_out();
    if (settings_.pacer != nullptr) settings_.pacer->pace(consumed, stop_);
    lane_pacer_.pace(consumed, stop_);
    return file_ < split_.ranges.size() ? etlc::StepResult::more() : etlc::StepResult::end();
  }

  etlc::SplitProgress durable_progress() override {
    write_out();
    data_->sync();
    if (rejects_) rejects_->sync();
    LaneState state{rows_, malformed_, std::nullopt};
    if (end() < planned_end_) state.end = end();
    // The split's weight is its size in bytes (plan.cpp), so the bytes durably behind the
    // watermark are the weight done: the leader balances on, and etlc status reports, the rest.
    return {watermark_, encode_state(state), watermark_};
  }

  std::optional<etlc::SplitResidual> split(double keep) override {
    if (!(keep > 0 && keep < 1)) return std::nullopt;
    const std::uint64_t remaining = end() - watermark_;
    if (remaining < settings_.min_split_bytes) return std::nullopt;
    const auto kept = static_cast<std::uint64_t>(std::ceil(keep * static_cast<double>(remaining)));
    const std::optional<std::uint64_t> cut =
        find_cut(watermark_ + std::max<std::uint64_t>(kept, 1));
    if (!cut || end() - *cut < settings_.min_split_bytes) return std::nullopt;
    SplitPlan rest = tail_from(*cut);
    end_at(*cut);
    settings_.counters->splits_cut.fetch_add(1, std::memory_order_relaxed);
    return etlc::SplitResidual{encode_descriptor(rest), rest.bytes};
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
  // Where this lane's range ends now (split position).
  std::uint64_t end() const { return starts_.back(); }

  // Shrinks the range to end at split position `cut` (at most the current end).
  void end_at(std::uint64_t cut) {
    if (split_.ranges.empty()) return;
    std::size_t i = 0;  // the range `cut` falls in (or ends)
    while (i + 1 < split_.ranges.size() && starts_[i + 1] < cut) ++i;
    FileRange& last = split_.ranges[i];
    last.end = last.begin + (cut - starts_[i]);
    split_.ranges.resize(i + 1);
    starts_.resize(i + 2);
    starts_.back() = cut;
  }

  // The split position of the first record boundary at or after `target` (> watermark_) and
  // before the end, or nullopt.
  std::optional<std::uint64_t> find_cut(std::uint64_t target) {
    std::size_t i = file_;
    while (i < split_.ranges.size() && starts_[i + 1] <= target) ++i;
    if (i >= split_.ranges.size()) return std::nullopt;
    if (starts_[i] == target) return target;  // a range's start is a boundary
    const FileRange& range = split_.ranges[i];
    std::unique_ptr<MappedFile> other;
    const MappedFile* map = i == file_ ? map_.get() : nullptr;
    if (map == nullptr) {
      other = std::make_unique<MappedFile>(settings_.input_dir / range.name);
      map = other.get();
    }
    if (map->size() != range.file_bytes) return std::nullopt;  // a changed file: reading fails
    // Reading resumes at the watermark (a boundary) in the file being read, else at the range's
    // start.
    const std::uint64_t known = range.begin + (std::max(watermark_, starts_[i]) - starts_[i]);
    const std::uint64_t at = range.begin + (target - starts_[i]);
    const std::optional<std::size_t> b = next_boundary(map->data(), known, at);
    if (b && *b < range.end) return starts_[i] + (*b - range.begin);
    // None in this range: the next range's start, if the split has one.
    if (i + 1 < split_.ranges.size()) return starts_[i + 1];
    return std::nullopt;
  }

  // The ranges from split position `cut` to the end, as a split of their own.
  SplitPlan tail_from(std::uint64_t cut) const {
    SplitPlan rest;
    for (std::size_t i = 0; i < split_.ranges.size(); ++i) {
      if (starts_[i + 1] <= cut) continue;
      FileRange r = split_.ranges[i];
      if (starts_[i] < cut) r.begin += cut - starts_[i];
      rest.bytes += r.bytes();
      rest.ranges.push_back(std::move(r));
    }
    return rest;
  }

  void open_current() {
    const FileRange& r = split_.ranges[file_];
    map_ = std::make_unique<MappedFile>(settings_.input_dir / r.name);
    if (map_->size() != r.file_bytes) {
      throw std::runtime_error("input file " + r.name + " changed since the job was planned (" +
                               std::to_string(r.file_bytes) + " bytes then, " +
                               std::to_string(map_->size()) + " now)");
    }
    const std::uint64_t from = r.begin + (watermark_ - starts_[file_]);
    csv_.emplace(map_->data(), static_cast<std::size_t>(from));
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
  SplitPlan split_;            // the ranges this lane reads: the descriptor's, cut short by split()
  std::uint64_t planned_end_;  // the descriptor's end (split position)
  std::uint64_t epoch_;
  std::stop_token stop_;
  std::vector<std::uint64_t> starts_;       // split position of each range's first byte (+ the end)
  std::size_t file_ = 0;                    // the range being read
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
