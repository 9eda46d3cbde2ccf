#include "run_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

extern char** environ;

namespace etlc::testing {

namespace {

pid_t spawn(const std::vector<std::string>& argv, int& out_fd, int& err_fd) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw std::runtime_error("posix_spawn failed for " + argv[0]);
  }
  out_fd = out_pipe[0];
  err_fd = err_pipe[0];
  return pid;
}

// Reads what is available from the fds into the strings; returns false once both are at EOF.
bool pump(int& out_fd, std::string& out, int& err_fd, std::string& err, int timeout_ms) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  if (out_fd < 0 && err_fd < 0) return false;
  if (poll(fds, 2, timeout_ms) <= 0) return true;
  char buf[4096];
  for (int i = 0; i < 2; ++i) {
    int& fd = i == 0 ? out_fd : err_fd;
    std::string& dst = i == 0 ? out : err;
    if (fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      dst.append(buf, static_cast<std::size_t>(n));
    } else {
      close(fd);
      fd = -1;
    }
  }
  return out_fd >= 0 || err_fd >= 0;
}

void fill(ProcessResult& r, int status) {
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  RunningProcess p(argv);
  return p.wait(timeout);
}

RunningProcess::RunningProcess(const std::vector<std::string>& argv) {
  pid_ = spawn(argv, out_fd_, err_fd_);
}

RunningProcess::~RunningProcess() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

bool RunningProcess::read_line(std::string& line, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (!pump(out_fd_, buffer_, err_fd_, err_,
              static_cast<int>(std::min<long>(left.count(), 50))) &&
        buffer_.find('\n') == std::string::npos) {
      return false;
    }
  }
}

void RunningProcess::send(int signal) {
  if (!reaped_ && pid_ > 0) kill(pid_, signal);
}

ProcessResult RunningProcess::wait(std::chrono::milliseconds timeout) {
  ProcessResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pump(out_fd_, buffer_, err_fd_, err_, 50)) {
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      kill(pid_, SIGKILL);
      break;
    }
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  fill(r, status);
  r.out = std::move(buffer_);
  r.err = std::move(err_);
  return r;
}

}  // namespace etlc::testing
