// JobAdmin::cordon / uncordon: create, rewrite or delete cordon.{instance} by CAS. The leader
// watches cordon.* and balances a cordoned member as having no lanes (publish.cpp).
#include <fmt/format.h>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/admin.hpp"

namespace etlc {

namespace {
constexpr int kCasAttempts = 4;
}

CordonResult JobAdmin::cordon(std::string_view instance, std::string_view reason) {
  core::validate_id(instance, "instance id");
  if (reason.size() > kMaxCordonReasonBytes) {
    throw ConfigError(fmt::format("cordon reason of {} bytes exceeds {} bytes", reason.size(),
                                  kMaxCordonReasonBytes));
  }
  const core::CordonRecord rec{std::string(instance), std::string(reason)};
  const std::string bytes = core::encode(rec);  // ConfigError if the reason is not UTF-8
  const std::string key = core::cordon_key(instance);

  std::optional<CordonOutcome> outcome;
  std::optional<CordonOutcome> unconfirmed;  // what a write of ours with no answer would mean
  for (int attempt = 0; attempt < kCasAttempts && !outcome; ++attempt) {
    const std::optional<Entry> cur = store_.get(key);
    bool same = false;
    if (cur) {
      try {
        same = core::decode_cordon(key, cur->value) == rec;
      } catch (const core::RecordError&) {
        same = false;  // garbage under the key: the operator's record replaces it
      }
    }
    if (same) {
      outcome = unconfirmed.value_or(CordonOutcome::unchanged);
      break;
    }
    const CordonOutcome intent = cur ? CordonOutcome::updated : CordonOutcome::cordoned;
    try {
      const WriteResult r =
          cur ? store_.update(key, bytes, cur->revision) : store_.create(key, bytes);
      if (r.ok) outcome = intent;
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unknown_outcome) throw;
      unconfirmed = intent;  // the next read decides
    }
  }
  if (!outcome) {
    throw Error(fmt::format("cordon of '{}': the record kept changing; try again", instance));
  }
  CordonResult res;
  res.outcome = *outcome;
  res.has_session = store_.get(core::member_key(instance)).has_value();
  return res;
}

UncordonOutcome JobAdmin::uncordon(std::string_view instance) {
  core::validate_id(instance, "instance id");
  const std::string key = core::cordon_key(instance);
  bool sent = false;
  for (int attempt = 0; attempt < kCasAttempts; ++attempt) {
    std::optional<Entry> cur = store_.get(key);
    if (!cur) return sent ? UncordonOutcome::uncordoned : UncordonOutcome::not_cordoned;
    try {
      if (store_.erase(key, cur->revision).ok) return UncordonOutcome::uncordoned;
    } catch (const StoreError& e) {
      if (e.code() != StoreErrc::unknown_outcome) throw;
      sent = true;
    }
  }
  throw Error(fmt::format("uncordon of '{}': the record kept changing; try again", instance));
}

}  // namespace etlc
