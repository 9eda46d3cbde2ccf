// Runs a program to completion and captures its exit code, stdout and stderr (bounded by a
// timeout: a child still running then is killed and the result says so).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace etlc::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 if killed by a signal or by the timeout
  int signal = 0;      // the terminating signal, if any
  bool timed_out = false;
  std::string out;
  std::string err;
};

ProcessResult run_process(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60));

// A child whose stdout can be read line by line while it runs (for `etlc watch`).
class RunningProcess {
 public:
  explicit RunningProcess(const std::vector<std::string>& argv);
  ~RunningProcess();  // kills and reaps the child if it is still running
  RunningProcess(const RunningProcess&) = delete;
  RunningProcess& operator=(const RunningProcess&) = delete;

  // The next complete stdout line (without '\n'), or "" with ok=false at EOF or timeout.
  bool read_line(std::string& line, std::chrono::milliseconds timeout);
  void send(int signal);
  // Waits for exit (killing the child after `timeout`) and returns the result; stdout that was
  // not read as lines is in `out`.
  ProcessResult wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string buffer_;
  std::string err_;
  bool reaped_ = false;
};

}  // namespace etlc::testing
