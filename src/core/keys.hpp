// The key layout of a job, and the injective encoding of ids into the store's key alphabet.
//
// Layout (one bucket/namespace per job):
//   job.leader           LeaderRecord
//   job.plan             PlanRecord
//   job.pause            PauseRecord (operator-written: while it exists the job is paused)
//   job.standby          StandbyRecord (the member keeping warm fleet-wide views for failover)
// (leader and plan share the "job." prefix so one prefix watch follows both: the store contract
// has prefix watches only, and NATS subject filters are token-aligned.)
//   spec.{split}         SpecRecord
//   split.{split}        SplitRecord (the fence)
//   lease.{split}        LeaseRecord
//   member.{instance}    MemberRecord
//   assign.{instance}    AssignmentRecord
//   cordon.{instance}    CordonRecord
//
// Encoding of an id into one key token: bytes [A-Za-z0-9_-] stand for themselves; every other
// byte (including '=', '.', '/', and each byte of multi-byte UTF-8) becomes "=XX" with two
// upper-case hex digits. The result is one token of the NATS alphabet, never empty for a
// non-empty id, and decoding inverts it exactly. Ids must be non-empty valid UTF-8 of at most
// kMaxSplitIdBytes bytes; the encoded key is then at most 8 + 3 * 256 bytes < kMaxKeyBytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "etlc/errors.hpp"

namespace etlc::core {

inline constexpr std::string_view kJobPrefix = "job.";
inline constexpr std::string_view kLeaderKey = "job.leader";
inline constexpr std::string_view kPlanKey = "job.plan";
inline constexpr std::string_view kPauseKey = "job.pause";
inline constexpr std::string_view kStandbyKey = "job.standby";
inline constexpr std::string_view kProgressKey = "job.progress";
inline constexpr std::string_view kSpecPrefix = "spec.";
inline constexpr std::string_view kSplitPrefix = "split.";
inline constexpr std::string_view kLeasePrefix = "lease.";
inline constexpr std::string_view kMemberPrefix = "member.";
inline constexpr std::string_view kAssignPrefix = "assign.";
inline constexpr std::string_view kCordonPrefix = "cordon.";

// Throws ConfigError naming the rule when `id` is empty, too long or not valid UTF-8.
// `what` names the id in the message ("split id", "instance id").
void validate_id(std::string_view id, std::string_view what);

std::string encode_id(std::string_view id);  // validates first
// Inverse of encode_id; nullopt if `token` is not a valid encoding (garbage in the store).
std::optional<std::string> decode_id(std::string_view token);

std::string spec_key(std::string_view split_id);
std::string split_key(std::string_view split_id);
std::string lease_key(std::string_view split_id);
std::string member_key(std::string_view instance_id);
std::string assign_key(std::string_view instance_id);
std::string cordon_key(std::string_view instance_id);

// If `key` starts with `prefix` and the rest is a valid encoded id, the decoded id.
std::optional<std::string> id_from_key(std::string_view key, std::string_view prefix);

}  // namespace etlc::core
