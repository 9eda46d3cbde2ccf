// etlc-projection: projection by simulation (issue 14, target 6; projection.hpp).
//
//   etlc-projection [--members 100,1000,10000] [--splits N] [--lanes N] [--watches off,on]
//                   [--seed S] [--lease-ms MS] [--rebalance-delay-ms MS] [--steady-leases N]
//                   [--phase-leases N] [--bound-leases N] [--quiet-ms MS]
//                   [--max-view-entries N] [--csv FILE]
//
// Runs every (watch mode, size) in increasing size, the real runtime on virtual time over the
// simulator's store with no faults, and prints markdown tables (docs/performance.md,
// "Projection by simulation"). A run whose views would exceed --max-view-entries is refused, not
// faked: its cells are extrapolated from the measured sizes and marked. Progress goes to stderr.
// Exit status 1 if a run failed (a safety violation, a phase that did not settle), 2 on bad
// arguments.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "projection.hpp"
#include "projection_report.hpp"

namespace {

using etlc::sim::ProjectionParams;

struct Args {
  std::vector<int> members{100, 1000, 10000};
  std::vector<bool> modes{false, true};
  ProjectionParams base;
  std::string csv;
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "%s\nusage: etlc-projection [--members 100,1000,10000] [--splits N] [--lanes N] "
               "[--watches off,on] [--seed S] [--lease-ms MS] [--rebalance-delay-ms MS] "
               "[--steady-leases N] [--phase-leases N] [--bound-leases N] [--quiet-ms MS] "
               "[--max-view-entries N] [--csv FILE]\n",
               error.c_str());
  std::exit(2);
}

std::uint64_t to_u64(const std::string& flag, const std::string& v, std::uint64_t max) {
  try {
    std::size_t used = 0;
    const unsigned long long x = std::stoull(v, &used);
    if (used != v.size() || v.empty() || v[0] == '-') throw std::invalid_argument("bad");
    if (x > max) throw std::out_of_range("big");
    return x;
  } catch (const std::exception&) {
    usage(fmt::format("{} needs an integer 0..{}, got '{}'", flag, max, v));
  }
}

std::vector<std::string> split_list(const std::string& flag, const std::string& v) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= v.size()) {
    const std::size_t comma = std::min(v.find(',', start), v.size());
    out.push_back(v.substr(start, comma - start));
    start = comma + 1;
    if (out.size() > 16) usage(flag + " takes at most 16 values");
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(f + " needs a value");
      return argv[++i];
    };
    if (f == "--members") {
      a.members.clear();
      for (const std::string& s : split_list(f, value())) {
        a.members.push_back(static_cast<int>(to_u64(f, s, etlc::sim::kMaxProjectedMembers)));
      }
      std::sort(a.members.begin(), a.members.end());
      a.members.erase(std::unique(a.members.begin(), a.members.end()), a.members.end());
    } else if (f == "--watches") {
      a.modes.clear();
      for (const std::string& s : split_list(f, value())) {
        if (s != "off" && s != "on") usage("--watches takes off, on or off,on; got '" + s + "'");
        a.modes.push_back(s == "on");
      }
    } else if (f == "--splits") {
      a.base.splits = to_u64(f, value(), etlc::sim::kMaxProjectedSplits);
    } else if (f == "--lanes") {
      a.base.lanes = static_cast<std::uint32_t>(to_u64(f, value(), 64));
    } else if (f == "--seed") {
      a.base.seed = to_u64(f, value(), UINT64_MAX);
    } else if (f == "--lease-ms") {
      a.base.lease_ms = static_cast<std::int64_t>(to_u64(f, value(), 600'000));
    } else if (f == "--rebalance-delay-ms") {
      a.base.rebalance_delay_ms = static_cast<std::int64_t>(to_u64(f, value(), 600'000));
    } else if (f == "--steady-leases") {
      a.base.steady_leases = static_cast<int>(to_u64(f, value(), 100));
    } else if (f == "--phase-leases") {
      a.base.phase_leases = static_cast<int>(to_u64(f, value(), 100));
    } else if (f == "--bound-leases") {
      a.base.bound_leases = static_cast<int>(to_u64(f, value(), 1000));
    } else if (f == "--quiet-ms") {
      a.base.quiet_ms = static_cast<std::int64_t>(to_u64(f, value(), 600'000'000));
    } else if (f == "--max-view-entries") {
      a.base.max_view_entries = to_u64(f, value(), UINT64_MAX);
    } else if (f == "--csv") {
      a.csv = value();
    } else {
      usage("unknown flag " + f);
    }
  }
  for (int m : a.members) {
    ProjectionParams p = a.base;
    p.members = m;
    try {
      etlc::sim::validate(p);
    } catch (const std::invalid_argument& e) {
      usage(e.what());
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::vector<etlc::sim::ProjectionResult> runs;
  std::vector<etlc::sim::Refused> refused;
  int failed = 0;
  for (bool targeted : a.modes) {
    for (int m : a.members) {
      ProjectionParams p = a.base;
      p.members = m;
      p.targeted = targeted;
      std::fprintf(stderr, "projection: %d members, targeted watches %s ...\n", m,
                   targeted ? "on" : "off");
      try {
        runs.push_back(etlc::sim::run_projection(p));
        const auto& r = runs.back();
        std::fprintf(stderr, "  done in %.1f s real, peak RSS %.0f MB\n", r.real_s,
                     static_cast<double>(r.peak_rss_kb) / 1e3);
      } catch (const etlc::sim::ProjectionTooLarge& e) {
        std::fprintf(stderr, "  refused: %s\n", e.what());
        refused.push_back({m, targeted, e.what()});
      } catch (const std::exception& e) {
        std::fprintf(stderr, "  FAILED: %s\n", e.what());
        ++failed;
      }
    }
  }
  std::fputs(etlc::sim::markdown_report(runs, refused).c_str(), stdout);
  if (!a.csv.empty()) {
    std::ofstream out(a.csv);
    out << etlc::sim::csv_report(runs);
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", a.csv.c_str());
      return 1;
    }
  }
  return failed > 0 ? 1 : 0;
}
