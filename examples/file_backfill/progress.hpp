// The run's progress display: a live line redrawn in place on a terminal, plain lines otherwise,
// and the one-screen summary at the end.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace fb {

struct MemberLoad {
  std::string id;
  std::uint32_t lanes = 0;
  bool crashed = false;  // aborted, not (yet) restarted
};

// The whole job as its leader reports it (job.progress, read with etlc::JobAdmin::job_progress):
// the one view every process has, where its own counters cover only its own lanes.
struct JobWeightSample {
  bool known = false;   // a readable record exists (none before the leader's first interval)
  double fraction = 0;  // of the planned weight (input bytes) durably done
  double eta_s = -1;    // remaining / the leader's recent rate; < 0 when unknown (no rate, 0)
};

// " | job 42% ETA 1m05s" (the ETA "unknown" without a rate), or " | job ? ETA unknown" before
// the leader's first record.
std::string job_text(const JobWeightSample& job);
// "850ms", "12s", "5m07s", "2h03m".
std::string human_duration(double seconds);

struct ProgressSample {
  double elapsed_s = 0;
  std::uint64_t splits_done = 0;
  std::uint64_t splits_total = 0;
  // Of the input's bytes this process's lanes covered (read, not yet durable); < 0 when not
  // known (one process of many: see `job` for the whole job).
  double fraction = -1;
  std::uint64_t bytes_read = 0;
  std::uint64_t rows_read = 0;
  std::vector<MemberLoad> members;
  std::uint64_t moves = 0;      // cooperative drains (the leader moved a split)
  std::uint64_t takeovers = 0;  // grants that resumed committed progress (takeovers, moves)
  std::uint64_t lost = 0;       // lanes stopped because their split was lost
  JobWeightSample job;          // the whole job, from the leader's job.progress
};

// Serialises everything written to the terminal: the display and the log sink (run.cpp).
std::mutex& terminal_mutex();

// "12.3 MB/s" style helpers.
std::string human_bytes(double bytes);
std::string human_count(double n);

class ProgressDisplay {
 public:
  // live: redraw one line in place (a terminal); otherwise print a line every plain_every_s.
  ProgressDisplay(std::FILE* out, bool live, double plain_every_s = 2.0);

  // Called often (every ~50 ms); draws when due. Rates are measured between draws.
  void update(const ProgressSample& s);
  // A line about an event (a crash, a restart); keeps the live line below it.
  void event(const std::string& line);
  // Clears the live line (before the summary).
  void finish();

  bool live() const { return live_; }

 private:
  std::string render(const ProgressSample& s);

  std::FILE* out_;
  bool live_;
  double every_s_;
  double last_draw_s_ = -1;
  double last_bytes_ = 0, last_rows_ = 0;
  double bytes_rate_ = 0, rows_rate_ = 0;
  std::string last_line_;
};

}  // namespace fb
