#include "progress.hpp"

#include <algorithm>

namespace fb {

std::mutex& terminal_mutex() {
  static std::mutex mu;
  return mu;
}

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  } else if (b >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  } else if (b >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  }
  return buf;
}

std::string human_count(double n) {
  char buf[32];
  if (n >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
  } else if (n >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.0fk", n / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", n);
  }
  return buf;
}

std::string human_duration(double seconds) {
  char buf[32];
  const auto s = static_cast<long long>(seconds < 0 ? 0 : seconds + 0.5);
  if (seconds < 1) {
    std::snprintf(buf, sizeof buf, "%.0fms", seconds < 0 ? 0 : seconds * 1000);
  } else if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

std::string job_text(const JobWeightSample& job) {
  if (!job.known) return " | job ? ETA unknown";
  char buf[32];
  std::snprintf(buf, sizeof buf, " | job %.0f%%", std::clamp(job.fraction, 0.0, 1.0) * 100);
  return buf + std::string(" ETA ") + (job.eta_s < 0 ? "unknown" : human_duration(job.eta_s));
}

ProgressDisplay::ProgressDisplay(std::FILE* out, bool live, double plain_every_s)
    : out_(out), live_(live), every_s_(live ? 0.25 : plain_every_s) {}

std::string ProgressDisplay::render(const ProgressSample& s) {
  std::string line;
  char buf[160];
  std::snprintf(buf, sizeof buf, "[%6.1fs] splits %llu/%llu", s.elapsed_s,
                static_cast<unsigned long long>(s.splits_done),
                static_cast<unsigned long long>(s.splits_total));
  line += buf;
  if (s.fraction >= 0) {
    std::snprintf(buf, sizeof buf, " %3.0f%%", std::min(1.0, s.fraction) * 100);
    line += buf;
  }
  line += job_text(s.job);
  line += " | " + human_bytes(bytes_rate_) + "/s " + human_count(rows_rate_) + " rows/s | load";
  for (const MemberLoad& m : s.members) {
    line += " " + m.id + ":" + (m.crashed ? std::string("down") : std::to_string(m.lanes));
  }
  std::snprintf(buf, sizeof buf, " | moves %llu resumed %llu lost %llu",
                static_cast<unsigned long long>(s.moves),
                static_cast<unsigned long long>(s.takeovers),
                static_cast<unsigned long long>(s.lost));
  line += buf;
  return line;
}

void ProgressDisplay::update(const ProgressSample& s) {
  if (last_draw_s_ >= 0 && s.elapsed_s - last_draw_s_ < every_s_) return;
  const double dt = last_draw_s_ < 0 ? s.elapsed_s : s.elapsed_s - last_draw_s_;
  if (dt > 0) {
    const double br = (static_cast<double>(s.bytes_read) - last_bytes_) / dt;
    const double rr = (static_cast<double>(s.rows_read) - last_rows_) / dt;
    // Smooth the live line a little; plain lines are already far apart.
    const double a = live_ ? 0.5 : 1.0;
    bytes_rate_ = last_draw_s_ < 0 ? br : a * br + (1 - a) * bytes_rate_;
    rows_rate_ = last_draw_s_ < 0 ? rr : a * rr + (1 - a) * rows_rate_;
  }
  last_draw_s_ = s.elapsed_s;
  last_bytes_ = static_cast<double>(s.bytes_read);
  last_rows_ = static_cast<double>(s.rows_read);
  std::string line = render(s);
  std::lock_guard lk(terminal_mutex());
  if (live_) {
    std::fprintf(out_, "\r\033[K%s", line.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  last_line_ = std::move(line);
}

void ProgressDisplay::event(const std::string& line) {
  std::lock_guard lk(terminal_mutex());
  if (live_) {
    std::fprintf(out_, "\r\033[K%s\n%s", line.c_str(), last_line_.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void ProgressDisplay::finish() {
  std::lock_guard lk(terminal_mutex());
  if (live_) std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
}

}  // namespace fb
