// The one-shot commands: open the store, check the job exists, call JobAdmin, print.
#include <fmt/format.h>

#include <iostream>

#include "cli.hpp"
#include "etlc/admin.hpp"
#include "output.hpp"

namespace etlc::cli {

namespace {

constexpr auto kJsonErrors = nlohmann::ordered_json::error_handler_t::replace;

void print_json(const nlohmann::ordered_json& j) {
  std::cout << j.dump(2, ' ', false, kJsonErrors) << '\n';
}

// Runs `fn` translating store failures into the tool's exit codes.
template <typename Fn>
auto guarded(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const StoreError& e) {
    throw CliError(kExitStoreUnreachable, fmt::format("store unreachable: {}", e.what()));
  } catch (const ConfigError& e) {
    throw CliError(kExitUsage, e.what());
  }
}

void require_job(JobAdmin& admin, const ConnectOptions& c) {
  if (!guarded([&] { return admin.job_exists(); })) {
    throw CliError(kExitJobNotFound,
                   fmt::format("job '{}' not found: bucket '{}' holds no plan, leader or member",
                               c.job, bucket_of(c)));
  }
}

}  // namespace

int run_status(const ConnectOptions& c, bool json) {
  auto store = open_store(c);
  JobAdmin admin(*store);
  require_job(admin, c);
  JobStatus st = guarded([&] { return admin.status(); });
  if (json) {
    print_json(status_json(c.job, st));
  } else {
    std::cout << status_text(c.job, bucket_of(c), st);
  }
  return kExitOk;
}

int run_splits(const ConnectOptions& c, const SplitsArgs& args, bool json) {
  SplitFilter f;
  if (args.status) {
    f.status = parse_split_state(*args.status);
    if (!f.status) {
      throw CliError(
          kExitUsage,
          fmt::format("--status '{}': expected runnable, completed or quarantined", *args.status));
    }
  }
  f.owner = args.owner;
  f.limit = args.limit;
  auto store = open_store(c);
  JobAdmin admin(*store);
  require_job(admin, c);
  SplitListing l = guarded([&] { return admin.splits(f); });
  if (json) {
    print_json(splits_json(c.job, l));
  } else {
    std::cout << splits_text(l);
  }
  return kExitOk;
}

int run_requeue(const ConnectOptions& c, const std::vector<std::string>& ids, bool json) {
  auto store = open_store(c);
  JobAdmin admin(*store);
  require_job(admin, c);
  std::vector<RequeueResult> res = guarded([&] { return admin.requeue(ids); });
  if (json) {
    print_json(requeue_json(c.job, res));
  } else {
    std::cout << requeue_text(res);
  }
  int code = kExitOk;
  for (const RequeueResult& r : res) {
    if (r.outcome == RequeueOutcome::failed) return kExitStoreUnreachable;
    if (r.outcome != RequeueOutcome::requeued) code = kExitRefused;
  }
  return code;
}

int run_cordon(const ConnectOptions& c, const std::string& instance, const std::string& reason,
               bool json) {
  auto store = open_store(c);
  JobAdmin admin(*store);
  require_job(admin, c);
  CordonResult r;
  try {
    r = guarded([&] { return admin.cordon(instance, reason); });
  } catch (const CliError&) {
    throw;
  } catch (const Error& e) {
    throw CliError(kExitRefused, e.what());
  }
  if (json) {
    print_json(cordon_json(c.job, instance, to_string(r.outcome), r.has_session));
  } else {
    std::cout << cordon_text(instance, r);
  }
  return kExitOk;
}

int run_uncordon(const ConnectOptions& c, const std::string& instance, bool json) {
  auto store = open_store(c);
  JobAdmin admin(*store);
  require_job(admin, c);
  UncordonOutcome o;
  try {
    o = guarded([&] { return admin.uncordon(instance); });
  } catch (const CliError&) {
    throw;
  } catch (const Error& e) {
    throw CliError(kExitRefused, e.what());
  }
  if (json) {
    print_json(cordon_json(c.job, instance, to_string(o), std::nullopt));
  } else {
    std::cout << uncordon_text(instance, o);
  }
  return kExitOk;
}

}  // namespace etlc::cli
