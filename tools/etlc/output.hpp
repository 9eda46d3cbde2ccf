// Rendering of the operator API's results: human-readable text and the stable JSON shapes.
//
// JSON shapes (each document carries "schema"; fields are only ever added within a schema
// version, never renamed or removed; docs/operations.md lists them):
//   etlc.status.v1   status (and each line of `watch --json`)
//   etlc.splits.v1   splits
//   etlc.requeue.v1  requeue
//   etlc.cordon.v1   cordon and uncordon
// Integers are exact 64-bit values; durations are integers in milliseconds (suffix _ms);
// an unknown value is null, never omitted.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "etlc/admin.hpp"

namespace etlc::cli {

// `s` with control characters escaped (\xNN), for anything read from the store or typed by a
// user that reaches the terminal.
std::string safe_text(std::string_view s);

// "850ms", "12s", "5m12s", "1h02m", "3d04h".
std::string format_duration(std::chrono::milliseconds d);

std::string status_text(const std::string& job, const std::string& bucket, const JobStatus& st);
// One line, for `watch` on something that is not a terminal.
std::string status_line(const JobStatus& st);
nlohmann::ordered_json status_json(const std::string& job, const JobStatus& st);

std::string splits_text(const SplitListing& l);
nlohmann::ordered_json splits_json(const std::string& job, const SplitListing& l);

std::string requeue_text(const std::vector<RequeueResult>& results);
nlohmann::ordered_json requeue_json(const std::string& job,
                                    const std::vector<RequeueResult>& results);

std::string cordon_text(const std::string& instance, const CordonResult& r);
std::string uncordon_text(const std::string& instance, UncordonOutcome o);
nlohmann::ordered_json cordon_json(const std::string& job, const std::string& instance,
                                   std::string_view outcome, std::optional<bool> has_session);

}  // namespace etlc::cli
