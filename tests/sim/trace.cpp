#include "trace.hpp"

#include <fmt/format.h>

namespace etlc::sim {

namespace {
const char* kind_name(TraceKind k) {
  switch (k) {
    case TraceKind::step:
      return "step";
    case TraceKind::write:
      return "write";
    case TraceKind::write_err:
      return "write-error";
    case TraceKind::read:
      return "read";
    case TraceKind::watch:
      return "watch";
    case TraceKind::call:
      return "call";
    case TraceKind::event:
      return "event";
    case TraceKind::emit:
      return "emit";
    case TraceKind::fault:
      return "fault";
    case TraceKind::phase:
      return "phase";
    case TraceKind::note:
      return "note";
  }
  return "?";
}

const char* op_name(std::int64_t op) {
  static const char* const kOps[] = {"create", "update", "erase",      "get",
                                     "watch",  "list",   "watch_keys", "create_many"};
  return op >= 0 && op < 8 ? kOps[op] : "?";
}

const char* err_name(std::int64_t code) {
  static const char* const kErrs[] = {
      "unavailable", "unknown_outcome",  "watch_broken",     "invalid_argument", "incompatible",
      "closed",      "unknown(dropped)", "unknown(applied)", "unknown(late)",    "crashed"};
  return code >= 0 && code < 10 ? kErrs[code] : "?";
}

const char* call_name(std::int64_t c) {
  static const char* const kCalls[] = {"commit",          "complete",       "fail",
                                       "release_drained", "decline_revoke", "split"};
  return c >= 0 && c < 6 ? kCalls[c] : "?";
}

const char* outcome_name(std::int64_t o) {
  static const char* const kOut[] = {"durable", "fenced", "retryable"};
  return o >= 0 && o < 3 ? kOut[o] : "-";
}

const char* event_name(std::int64_t e) {
  static const char* const kEv[] = {
      "SplitGranted", "RevokeRequested", "SplitLost", "SplitQuarantined",
      "AllComplete",  "Stalled",         "Fatal",     "SplitRequested"};
  return e >= 0 && e < 8 ? kEv[e] : "?";
}
}  // namespace

void Trace::mix(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    hash_ ^= p[i];
    hash_ *= 0x100000001b3ULL;
  }
}

void Trace::add(VirtualNs at, TraceKind kind, std::int32_t actor, std::string_view key,
                std::int64_t a, std::int64_t b) {
  const auto k = static_cast<std::uint8_t>(kind);
  mix(&at, sizeof at);
  mix(&k, sizeof k);
  mix(&actor, sizeof actor);
  const std::uint64_t len = key.size();
  mix(&len, sizeof len);
  mix(key.data(), key.size());
  mix(&a, sizeof a);
  mix(&b, sizeof b);
  ++count_;
  if (tail_capacity_ == 0 && !keep_all_) return;
  TraceRecord r{at, kind, actor, std::string(key), a, b};
  if (keep_all_) all_.push_back(r);
  if (tail_capacity_ > 0) {
    if (tail_.size() == tail_capacity_) tail_.pop_front();
    tail_.push_back(std::move(r));
  }
}

std::string Trace::format(const TraceRecord& r, const std::vector<std::string>& names) {
  std::string who = "sim";
  if (r.actor >= 0) {
    who = static_cast<std::size_t>(r.actor) < names.size() && !names[r.actor].empty()
              ? names[r.actor]
              : fmt::format("#{}", r.actor);
  }
  const double t = static_cast<double>(r.at) / 1e9;
  std::string what;
  switch (r.kind) {
    case TraceKind::step:
      what = fmt::format("next at {:.6f}s", static_cast<double>(r.a) / 1e9);
      break;
    case TraceKind::write:
      what = r.a > 0 ? fmt::format("{} {} -> rev {}", op_name(r.b), r.key, r.a)
                     : fmt::format("{} {} -> lost the race", op_name(r.b), r.key);
      break;
    case TraceKind::write_err:
      what = fmt::format("{} {} -> error {}", op_name(r.a), r.key, err_name(r.b));
      break;
    case TraceKind::read:
      what = fmt::format("get {} -> {}{}", r.key, r.a > 0 ? fmt::format("rev {}", r.a) : "absent",
                         r.b ? " (stale)" : "");
      break;
    case TraceKind::watch:
      what = fmt::format("{} watch events delivered", r.a);
      break;
    case TraceKind::call:
      what = fmt::format("{}({}) -> {}", call_name(r.a), r.key, outcome_name(r.b));
      break;
    case TraceKind::event:
      what = fmt::format("{} {}", event_name(r.a), r.key);
      break;
    case TraceKind::emit:
      what = fmt::format("emitted {} records of {} from {}", r.b, r.key, r.a);
      break;
    case TraceKind::fault:
      what = fmt::format("FAULT {} ({}, {})", r.key, r.a, r.b);
      break;
    case TraceKind::phase:
      what = fmt::format("PHASE {}", r.key);
      break;
    case TraceKind::note:
      what = r.key;
      break;
  }
  return fmt::format("{:12.6f}s {:>9} {:<11} {}", t, who, kind_name(r.kind), what);
}

bool operator==(const TraceRecord& x, const TraceRecord& y) {
  return x.at == y.at && x.kind == y.kind && x.actor == y.actor && x.key == y.key && x.a == y.a &&
         x.b == y.b;
}

}  // namespace etlc::sim
