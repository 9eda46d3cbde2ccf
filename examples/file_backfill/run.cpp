#include "run.hpp"

#include <etlc/admin.hpp>
#include <etlc/driver.hpp>
#include <etlc/errors.hpp>
#include <etlc/exit_codes.hpp>
#include <etlc/log_spdlog.hpp>
#include <etlc/logging.hpp>
#include <etlc/memory_store.hpp>
#include <etlc/metrics.hpp>
#include <etlc/metrics_server.hpp>
#include <etlc/store.hpp>
#ifdef ETLC_WITH_NATS
#include <etlc/nats_store.hpp>
#endif

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "lane.hpp"
#include "plan.hpp"
#include "progress.hpp"

namespace fb {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The library's lines go through this sink (etlc::set_spdlog_logger), under the terminal lock, so
// they never tear the live progress line.
template <typename Mutex>
class TerminalSink final : public spdlog::sinks::base_sink<Mutex> {
 public:
  explicit TerminalSink(bool live) : live_(live) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    this->formatter_->format(msg, buf);
    std::lock_guard lk(terminal_mutex());
    if (live_) std::fputs("\r\033[K", stderr);
    std::fwrite(buf.data(), 1, buf.size(), stderr);
    std::fflush(stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  bool live_;
};

void install_log_sink(bool live) {
  auto logger = std::make_shared<spdlog::logger>("file-backfill",
                                                 std::make_shared<TerminalSink<std::mutex>>(live));
  logger->set_level(spdlog::level::trace);         // the library's level decides what reaches it
  const etlc::LogLevel level = etlc::log_level();  // warn, or ETLC_LOG_LEVEL
  etlc::set_spdlog_logger(logger);
  etlc::set_log_level(level);
}

void check_output(const fs::path& out) {
  std::error_code ec;
  fs::create_directories(out / "data", ec);
  if (!ec) fs::create_directories(out / "rejects", ec);
  if (ec) throw UserError("cannot create output directory " + out.string() + ": " + ec.message());
  const fs::path probe = out / ".write-probe";
  {
    std::ofstream f(probe, std::ios::trunc);
    f << "probe\n";
    f.close();
    if (!f) throw UserError("output directory " + out.string() + " is not writable");
  }
  fs::remove(probe, ec);
}

std::string default_instance() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "host");
  std::string id = host;
  for (char& c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!ok) c = '-';
  }
  return id + "-" + std::to_string(getpid());
}

std::shared_ptr<etlc::KvStore> open_store(const RunOptions& o) {
  if (o.store == "memory") return std::make_shared<etlc::MemoryStore>();
#ifdef ETLC_WITH_NATS
  etlc::NatsStoreOptions n;
  for (std::size_t at = 0; at <= o.store.size();) {  // "url[,url...]"
    const std::size_t comma = std::min(o.store.find(',', at), o.store.size());
    if (comma > at) n.servers.push_back(o.store.substr(at, comma - at));
    at = comma + 1;
  }
  n.job = o.job;
  n.bucket = o.bucket;
  n.replicas = o.replicas;
  n.user = o.user;
  n.password = o.password;
  n.token = o.token;
  n.credentials_file = o.credentials_file;
  n.tls.required = o.tls;
  n.tls.ca_file = o.tls_ca;
  n.tls.cert_file = o.tls_cert;
  n.tls.key_file = o.tls_key;
  n.connect_timeout_ms = 3000;
  n.op_timeout_ms = std::clamp<std::int64_t>(o.lease_ms / 3, 200, 5000);
  // A server that is still starting (or a timeout on a loaded machine) is waited for, with one
  // warning per attempt; a store that stays unreachable is a one-line error.
  n.startup_wait_ms = o.startup_wait_ms;
  try {
    return etlc::NatsStore::open(n);
  } catch (const std::exception& e) {
    throw UserError("cannot use the store at " + etlc::redact_urls(o.store) + ": " + e.what());
  }
#else
  throw UserError("this build has no NATS support (configure with ETLC_WITH_NATS=ON)");
#endif
}

// One life of a member: a crash and restart makes a new incarnation with the same id.
struct Incarnation {
  Incarnation(std::string member_id, std::uint64_t throttle)
      : id(std::move(member_id)), pacer(throttle) {}
  std::string id;
  MemberCounters counters;
  Pacer pacer;
  std::unique_ptr<etlc::Driver> driver;
  std::thread thread;
  std::atomic<bool> done{false};
  etlc::DriverResult result;
  bool crashed = false;
};

// The whole job from the leader's job.progress (one store read); the last sample while the
// store does not answer, so a hiccup does not blank the line.
JobWeightSample read_job_weights(etlc::JobAdmin& admin, const JobWeightSample& last) {
  try {
    const std::optional<etlc::WeightProgress> p = admin.job_progress();
    // Unknown until the leader wrote a record of the seeded plan (its first may predate it).
    if (!p || !p->fraction_done()) return JobWeightSample{};
    JobWeightSample j;
    j.known = true;
    j.fraction = *p->fraction_done();
    if (auto eta = p->eta()) j.eta_s = static_cast<double>(eta->count()) / 1000.0;
    return j;
  } catch (const etlc::StoreError&) {
    return last;
  }
}

}  // namespace

std::atomic<int>& stop_signal() {
  static std::atomic<int> sig{0};
  return sig;
}

// The store as banners and errors show it: URL credentials never appear (they are secrets).
std::string shown_store(const std::string& store) {
#ifdef ETLC_WITH_NATS
  return store == "memory" ? "the memory store" : etlc::redact_urls(store);
#else
  return store;
#endif
}

int run_job(const RunOptions& o, RunTotals* totals) {
  const bool nats = o.store != "memory";
  const bool live = o.progress == "live" || (o.progress == "auto" && isatty(STDOUT_FILENO) == 1);
  const bool show = o.progress != "none";
  install_log_sink(live && show);
  std::vector<std::unique_ptr<Incarnation>> lives;  // every incarnation, in start order
  try {
    if (nats && o.store.rfind("nats://", 0) != 0 && o.store.rfind("tls://", 0) != 0) {
      throw UserError("--store must be 'memory' or nats://HOST:PORT (or $NATS_URL), not '" +
                      shown_store(o.store) + "'");
    }
    if (o.members == 0 || o.members > 64) throw UserError("--members must be 1..64");
    if (nats && o.members != 1) {
      throw UserError(
          "--members applies to the memory store; with NATS run one process per member");
    }
    const bool kill = o.kill_member_at >= 0;
    if (kill && nats)
      throw UserError("--kill-member-at is for the memory store (kill a process instead)");
    if (!kill && o.restart_at >= 0) throw UserError("--restart-at needs --kill-member-at");
    if (kill && (o.kill_member_at > 100 ||
                 (o.restart_at >= 0 && (o.restart_at > 100 || o.restart_at <= o.kill_member_at)))) {
      throw UserError("need 0 <= --kill-member-at < --restart-at <= 100");
    }
    if (kill && o.members == 1 && o.restart_at < 0) {
      throw UserError("--kill-member-at with one member needs --restart-at");
    }
    if (o.split_bytes == 0) throw UserError("--split-bytes must be positive");

    const Listing listing = list_input(o.input);
    check_output(o.output);
    auto planner = std::make_shared<FilePlanner>(
        listing, o.split_bytes,
        o.cut_files ? kMinRangeBytes : std::numeric_limits<std::uint64_t>::max());
    const std::uint64_t total_splits = planner->splits().size();
    auto store = open_store(o);
    JobProgress job;
    etlc::JobAdmin admin(*store);  // reads job.progress for the live line: the whole job's ETA
    JobWeightSample job_weights;
    double job_weights_at = -1;
    // --metrics-port: every member of this process reports into one registry, served over HTTP.
    std::shared_ptr<etlc::MetricsRegistry> registry;
    std::unique_ptr<etlc::MetricsServer> metrics_server;
    if (o.metrics_port >= 0) {
      registry = std::make_shared<etlc::MetricsRegistry>();
      etlc::MetricsServerOptions mo;
      mo.port = static_cast<std::uint16_t>(o.metrics_port);
      try {
        metrics_server = std::make_unique<etlc::MetricsServer>(registry, mo);
      } catch (const etlc::Error& e) {
        throw UserError(std::string("--metrics-port: ") + e.what());
      }
    }

    const std::string prefix =
        o.instance.empty() ? (nats ? default_instance() : "member") : o.instance;
    auto member_id = [&](std::uint32_t i) {
      return nats ? prefix : prefix + "-" + std::to_string(i);
    };
    auto start = [&](const std::string& id) {
      const bool per_lane = o.throttle_per == "lane";
      auto life = std::make_unique<Incarnation>(id, per_lane ? 0 : o.throttle_bytes_per_s);
      LaneSettings ls;
      ls.input_dir = listing.dir;
      ls.output_dir = o.output;
      // Steps scale with the splits (16 KiB .. 1 MiB): a split takes a few dozen steps, so
      // commits, revocations and crashes land inside splits, not only between them.
      ls.step_bytes = static_cast<std::size_t>(
          std::clamp<std::uint64_t>(o.split_bytes / 32, 16u << 10, 1u << 20));
      ls.min_split_bytes = ls.step_bytes;  // a residual is worth at least one step of a lane
      ls.counters = &life->counters;
      ls.progress = &job;
      ls.pacer = o.throttle_bytes_per_s > 0 && !per_lane ? &life->pacer : nullptr;
      ls.lane_bytes_per_s = per_lane ? o.throttle_bytes_per_s : 0;
      etlc::CoordinatorConfig c;
      c.instance_id = id;
      c.max_in_flight = o.max_in_flight;
      c.dynamic_splitting = o.dynamic_splitting;
      c.lease_duration = std::chrono::milliseconds(o.lease_ms);
      c.op_timeout = std::chrono::milliseconds(std::clamp<std::int64_t>(o.lease_ms / 3, 1, 2000));
      c.rebalance_delay = std::chrono::milliseconds(o.rebalance_delay_ms);
      c.drain_deadline = std::max(c.op_timeout, std::chrono::milliseconds(5000));
      etlc::DriverOptions d;
      d.commit_interval = std::chrono::milliseconds(o.commit_interval_ms);
      d.on_stall =
          o.drain_on_stall ? etlc::StallPolicy::drain_with_warning : etlc::StallPolicy::fail;
      try {
        life->driver = std::make_unique<etlc::Driver>(
            c, store, planner, std::make_shared<FileSource>(ls), d, registry);
      } catch (const etlc::ConfigError& e) {
        throw UserError(e.what());
      }
      Incarnation* raw = life.get();
      raw->thread = std::thread([raw] {
        raw->result = raw->driver->run();
        raw->done = true;
      });
      lives.push_back(std::move(life));
      return raw;
    };

    std::vector<Incarnation*> current;  // the live incarnation of each member
    std::mutex current_mu;
    bool stopping = false;

    ProgressDisplay display(stdout, live);
    const auto t0 = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    {
      std::lock_guard lk(current_mu);
      for (std::uint32_t i = 0; i < o.members; ++i) current.push_back(start(member_id(i)));
    }
    if (show) {
      std::printf("file-backfill: %zu files, %s in %llu splits; %u member%s on %s\n",
                  listing.files.size(),
                  human_bytes(static_cast<double>(listing.total_bytes)).c_str(),
                  static_cast<unsigned long long>(total_splits), o.members,
                  o.members == 1 ? "" : "s", shown_store(o.store).c_str());
      if (metrics_server)
        std::printf("file-backfill: metrics on %s/metrics\n", metrics_server->url().c_str());
      std::fflush(stdout);
    }

    auto sum = [&](auto field) {
      std::uint64_t s = 0;
      for (auto& l : lives) s += (l->counters.*field).load();
      return s;
    };
    std::optional<std::size_t> victim;  // index in `current`
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> moves_log(
        o.moves_log.empty() ? nullptr : std::fopen(o.moves_log.c_str(), "a"), &std::fclose);
    std::set<std::string> orphaned;  // splits the victim held when it crashed
    std::uint64_t taken_over = 0, reclaimed = 0;
    bool killed = false, restarted = false;
    double killed_at = 0, restarted_at = 0;
    for (;;) {
      const int signal_seen = stop_signal().load();
      if (signal_seen != 0 && !stopping) {
        stopping = true;
        if (show)
          display.event("** signal " + std::to_string(signal_seen) +
                        ": stopping gracefully (releasing every split)");
        std::lock_guard lk(current_mu);
        for (Incarnation* m : current) m->driver->request_stop();
      }
      const double fraction =
          listing.total_bytes == 0
              ? 1.0
              : static_cast<double>(job.covered_bytes()) / static_cast<double>(listing.total_bytes);
      bool all_done = true, others_done = true;
      {
        std::lock_guard lk(current_mu);
        for (std::size_t i = 0; i < current.size(); ++i) {
          all_done = all_done && current[i]->done;
          if (!victim || i != *victim) others_done = others_done && current[i]->done;
        }
      }
      // Where did the crashed member's splits go? A peer resuming from the last commit (a
      // takeover), or the member itself after its restart (a fast reclaim: nothing moved).
      for (const LaneOpened& e : job.take_opened()) {
        if (moves_log && e.resume > 0) {
          std::fprintf(moves_log.get(), "%.4f %.4f %s %s\n", fraction,
                       e.split_bytes == 0 ? 1.0 : double(e.resume) / double(e.split_bytes),
                       e.split.c_str(), e.instance.c_str());
          std::fflush(moves_log.get());
        }
        if (orphaned.erase(e.split) == 0 || !show) continue;
        const int at = e.split_bytes == 0 ? 100 : static_cast<int>(e.resume * 100 / e.split_bytes);
        const bool self = victim && e.instance == current[*victim]->id;
        (self ? reclaimed : taken_over)++;
        display.event("** " + e.split + (self ? " reclaimed by " : " taken over by ") + e.instance +
                      " (epoch " + std::to_string(e.epoch) + "), resuming at " +
                      std::to_string(at) + "% of the split" +
                      (self ? ": fast reclaim, nothing moved" : " from its last commit"));
      }
      if (kill && !killed && signal_seen == 0 && fraction * 100 >= o.kill_member_at && !all_done) {
        // Crash the member holding the most splits (no release, no final commit).
        std::lock_guard lk(current_mu);
        std::size_t best = current.size() > 1 ? 1 : 0;
        std::uint32_t most = 0;
        for (std::size_t i = 0; i < current.size(); ++i) {
          const auto lanes = current[i]->driver->stats().lanes_open;
          if (lanes > most) best = i, most = lanes;
        }
        victim = best;
        if (etlc::Coordinator* c = current[best]->driver->coordinator()) {
          for (const std::string& id : c->held_splits()) orphaned.insert(id);
        }
        current[best]->crashed = true;
        current[best]->driver->abort();
        killed = true;
        killed_at = fraction;
        if (show) {
          display.event("** " + current[best]->id + " crashed at " +
                        std::to_string(static_cast<int>(fraction * 100)) + "% holding " +
                        std::to_string(orphaned.size()) + " splits (nothing released)");
        }
      }
      if (killed && !restarted && o.restart_at >= 0 && victim && current[*victim]->done &&
          (fraction * 100 >= o.restart_at || others_done) && signal_seen == 0) {
        std::lock_guard lk(current_mu);
        const std::string id = current[*victim]->id;
        current[*victim] = start(id);
        restarted = true;
        restarted_at = fraction;
        all_done = false;
        if (show) {
          display.event("** " + id + " restarted at " +
                        std::to_string(static_cast<int>(fraction * 100)) + "% under the same id");
        }
      }
      if (show) {
        ProgressSample s;
        s.elapsed_s = elapsed();
        s.splits_done = sum(&MemberCounters::splits_completed);
        s.splits_total = total_splits + sum(&MemberCounters::splits_cut);
        s.fraction = nats ? -1 : fraction;
        if (job_weights_at < 0 || s.elapsed_s - job_weights_at >= 1.0) {  // the record's pace
          job_weights = read_job_weights(admin, job_weights);
          job_weights_at = s.elapsed_s;
        }
        s.job = job_weights;
        s.bytes_read = sum(&MemberCounters::bytes_read);
        s.rows_read = sum(&MemberCounters::rows_read);
        std::lock_guard lk(current_mu);
        for (Incarnation* m : current) {
          const auto st = m->driver->stats();
          s.members.push_back({m->id, st.lanes_open, m->crashed && m->done});
        }
        for (auto& l : lives) {
          const auto st = l->driver->stats();
          s.moves += st.drained;
          s.takeovers += st.resumed;
          s.lost += st.lost;
        }
        display.update(s);
      }
      if (all_done) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto& l : lives) l->thread.join();
    if (show) display.finish();

    // Results: the last incarnation of each member decides (the first failure's code wins).
    int code = etlc::exit_codes::ok;
    bool interrupted = false;
    for (Incarnation* m : current) {
      interrupted = interrupted || m->result.exit == etlc::DriverExit::stopped;
      if (m->result.ok()) continue;
      std::fprintf(stderr, "error: %s: %s: %s\n", m->id.c_str(),
                   std::string(etlc::to_string(m->result.exit)).c_str(), m->result.message.c_str());
      if (code == etlc::exit_codes::ok) code = m->result.exit_code();
    }

    RunTotals t;
    t.seconds = elapsed();
    t.input_bytes = listing.total_bytes;
    t.splits = total_splits + sum(&MemberCounters::splits_cut);
    t.rows = sum(&MemberCounters::rows_completed);
    t.malformed = sum(&MemberCounters::malformed_completed);
    t.rows_written = sum(&MemberCounters::rows_written);
    t.bytes_read = sum(&MemberCounters::bytes_read);
    if (totals != nullptr) *totals = t;
    if (show) {
      std::uint64_t moves = 0, takeovers = 0, lost = 0, completed = 0;
      for (auto& l : lives) {
        const auto st = l->driver->stats();
        moves += st.drained;
        takeovers += st.resumed;
        lost += st.lost;
        completed += st.completed;
      }
      const double secs = std::max(t.seconds, 1e-9);
      bool stalled = false;
      for (Incarnation* m : current)
        stalled = stalled || m->result.exit == etlc::DriverExit::stalled_drained;
      const char* verdict =
          code != 0     ? "FAILED"
          : interrupted ? "interrupted (stopped gracefully: every split released)"
          : stalled     ? "STALLED (quarantined splits; exit 0 as asked by --drain-on-stall)"
                        : "complete";
      std::printf("\nfile-backfill: job %s in %.1f s\n", verdict, t.seconds);
      if (nats) {
        std::printf(
            "  this member    %s: %llu of %llu splits, %s rows written (%s malformed skipped)\n",
            prefix.c_str(), static_cast<unsigned long long>(completed),
            static_cast<unsigned long long>(t.splits),
            human_count(static_cast<double>(t.rows_written)).c_str(),
            human_count(static_cast<double>(t.malformed)).c_str());
        std::printf(
            "  throughput     %s/s, %s rows/s (this member)\n",
            human_bytes(static_cast<double>(t.bytes_read) / secs).c_str(),
            human_count(static_cast<double>(sum(&MemberCounters::rows_read)) / secs).c_str());
        std::printf("  duplicates     see verify (other members wrote the rest)\n");
      } else {
        std::printf("  input          %zu files, %s, %llu splits, %llu rows (%llu malformed)\n",
                    listing.files.size(), human_bytes(static_cast<double>(t.input_bytes)).c_str(),
                    static_cast<unsigned long long>(t.splits),
                    static_cast<unsigned long long>(t.rows),
                    static_cast<unsigned long long>(t.malformed));
        std::printf("  throughput     %s/s, %s rows/s (wall clock, coordination included)\n",
                    human_bytes(static_cast<double>(t.input_bytes) / secs).c_str(),
                    human_count(static_cast<double>(t.rows) / secs).c_str());
        const std::uint64_t dups = t.rows_written > t.rows ? t.rows_written - t.rows : 0;
        std::printf(
            "  output         %llu rows written, %llu duplicates (replayed after takeovers)\n",
            static_cast<unsigned long long>(t.rows_written), static_cast<unsigned long long>(dups));
      }
      std::printf(
          "  ownership      %llu grants resumed from a commit, %llu moves (drained), %llu lanes "
          "lost\n",
          static_cast<unsigned long long>(takeovers), static_cast<unsigned long long>(moves),
          static_cast<unsigned long long>(lost));
      if (killed) {
        std::printf("  crash          %s crashed at %.0f%%", current[*victim]->id.c_str(),
                    killed_at * 100);
        if (restarted) std::printf(", restarted at %.0f%%", restarted_at * 100);
        std::printf("; its splits: %llu taken over, %llu reclaimed\n",
                    static_cast<unsigned long long>(taken_over),
                    static_cast<unsigned long long>(reclaimed));
      }
      std::printf("  check with     file-backfill verify --input %s --output %s\n", o.input.c_str(),
                  o.output.c_str());
      std::fflush(stdout);
    }
    return code;
  } catch (const UserError& e) {
    for (auto& l : lives) {
      l->driver->request_stop();
      if (l->thread.joinable()) l->thread.join();
    }
    std::fprintf(stderr, "error: %s\n", e.what());
    return etlc::exit_codes::bad_config;
  }
}

}  // namespace fb
