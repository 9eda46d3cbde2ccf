#include "bench.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "csv.hpp"
#include "json_line.hpp"
#include "mapped_file.hpp"
#include "plan.hpp"
#include "progress.hpp"
#include "run.hpp"

namespace fb {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Measured {
  double seconds = 0;      // wall clock
  double cpu_seconds = 0;  // user + system time of this process (every thread)
  std::uint64_t rows = 0;
};

double cpu_now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

// Runs `once` `repeat` times; returns the run with the median wall time.
template <typename F>
Measured median_of(std::uint32_t repeat, F&& once) {
  std::vector<Measured> runs;
  for (std::uint32_t i = 0; i < repeat; ++i) {
    const double cpu0 = cpu_now();
    Measured m = once();
    m.cpu_seconds = cpu_now() - cpu0;
    runs.push_back(m);
  }
  std::sort(runs.begin(), runs.end(),
            [](const Measured& a, const Measured& b) { return a.seconds < b.seconds; });
  return runs[runs.size() / 2];
}

// Reads every input page once, so every configuration runs on a warm page cache.
std::uint64_t warm_cache(const Listing& listing) {
  std::uint64_t sum = 0;
  for (const InputFile& f : listing.files) {
    MappedFile m(listing.dir / f.name);
    const std::string_view d = m.data();
    for (std::size_t i = 0; i < d.size(); i += 4096) sum += static_cast<unsigned char>(d[i]);
  }
  return sum;
}

// The same work as the lanes (CSV -> JSON lines, write, fdatasync every commit interval), in one
// thread, without coordination: the baseline the library's overhead is measured against.
Measured plain_loop(const Listing& listing, const fs::path& out_dir, std::int64_t interval_ms) {
  fs::create_directories(out_dir);
  const fs::path out_path = out_dir / "plain.jsonl";
  const int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw UserError("cannot write " + out_path.string());
  std::string out, rejects;
  Measured m;
  const auto t0 = Clock::now();
  auto next_sync = t0 + std::chrono::milliseconds(interval_ms);
  auto flush = [&] {
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::write(fd, out.data() + done, out.size() - done);
      if (n < 0) throw UserError("cannot write " + out_path.string());
      done += static_cast<std::size_t>(n);
    }
    out.clear();
  };
  CsvRow row;
  for (const InputFile& f : listing.files) {
    MappedFile map(listing.dir / f.name);
    CsvFile csv(map.data());
    while (csv.next(row)) {
      if (row.malformed) {
        append_reject_line(rejects, f.name, row.offset, row.error);
        rejects.clear();
        continue;
      }
      append_row_line(out, f.name, row.offset, csv.header(), row.fields);
      ++m.rows;
      if (out.size() >= (1u << 20)) {
        flush();
        if (Clock::now() >= next_sync) {
          ::fdatasync(fd);
          next_sync = Clock::now() + std::chrono::milliseconds(interval_ms);
        }
      }
    }
  }
  flush();
  ::fdatasync(fd);
  ::close(fd);
  m.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return m;
}

void row(const std::string& config, std::uint32_t lanes, const Measured& m, double bytes,
         const Measured& plain) {
  std::printf("| %-28s | %5u | %7.2f | %8.1f | %9s | %6.2fx | %6.2f | %+7.1f%% |\n", config.c_str(),
              lanes, m.seconds, bytes / m.seconds / 1e6,
              human_count(static_cast<double>(m.rows) / m.seconds).c_str(),
              plain.seconds / m.seconds, m.cpu_seconds,
              (m.cpu_seconds / plain.cpu_seconds - 1.0) * 100.0);
  std::fflush(stdout);
}

}  // namespace

int bench(const BenchOptions& o) {
  const Listing listing = list_input(o.input);
  const double bytes = static_cast<double>(listing.total_bytes);
  std::printf("input: %zu files, %s; %u hardware threads; warm page cache; median of %u runs\n\n",
              listing.files.size(), human_bytes(bytes).c_str(), std::thread::hardware_concurrency(),
              o.repeat);
  (void)warm_cache(listing);
  std::printf("| %-28s | %5s | %7s | %8s | %9s | %7s | %6s | %8s |\n", "configuration", "lanes",
              "time s", "MB/s", "rows/s", "speed", "CPU s", "CPU +/-");
  std::printf(
      "|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(30, '-').c_str(), std::string(7, '-').c_str(),
      std::string(9, '-').c_str(), std::string(10, '-').c_str(), std::string(11, '-').c_str(),
      std::string(9, '-').c_str(), std::string(8, '-').c_str(), std::string(10, '-').c_str());

  const fs::path plain_dir = o.output / "plain";
  const Measured plain = median_of(o.repeat, [&] {
    Measured m = plain_loop(listing, plain_dir, o.commit_interval_ms);
    fs::remove_all(plain_dir);
    return m;
  });
  row("plain loop, no library", 1, plain, bytes, plain);

  struct Config {
    std::uint32_t members, lanes;
  };
  std::vector<Config> configs = {{1, 1}};
  for (std::uint32_t n : o.members) configs.push_back({n, o.max_in_flight});
  int code = 0;
  for (const Config& c : configs) {
    RunOptions r;
    r.input = o.input;
    r.output = o.output / ("run-" + std::to_string(c.members) + "x" + std::to_string(c.lanes));
    r.members = c.members;
    r.max_in_flight = c.lanes;
    r.split_bytes = o.split_bytes;
    r.commit_interval_ms = o.commit_interval_ms;
    r.lease_ms = o.lease_ms;
    r.progress = "none";
    int rc = 0;
    const Measured m = median_of(o.repeat, [&] {
      fs::remove_all(r.output);
      RunTotals t;
      const int one = run_job(r, &t);
      if (one != 0) rc = one;
      fs::remove_all(r.output);
      return Measured{t.seconds, 0, t.rows};
    });
    if (rc != 0) {
      std::fprintf(stderr, "error: the run with %u members failed (exit %d)\n", c.members, rc);
      code = 1;
      continue;
    }
    const std::string name = std::to_string(c.members) + (c.members == 1 ? " member" : " members") +
                             ", " + std::to_string(c.lanes) + (c.lanes == 1 ? " lane" : " lanes") +
                             " each";
    row(name, c.members * c.lanes, m, bytes, plain);
  }
  std::printf(
      "\nspeed = plain loop wall time / configuration wall time (from start to the job's "
      "completion, coordination included). CPU s = user + system time of all threads; CPU +/- = "
      "that relative to the plain loop: the cost of coordination, lanes and threads.\n");
  return code;
}

}  // namespace fb
