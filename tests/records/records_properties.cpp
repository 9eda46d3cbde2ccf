// Properties of the record codecs: round trips for arbitrary contents, and hostile bytes only
// ever yield RecordError.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "records/generators.hpp"

namespace etlc::core {
namespace {

namespace t = etlc::testgen;

RC_GTEST_PROP(RecordProperties, LeaderRoundTrips, ()) {
  const auto r = t::leader_record();
  RC_ASSERT(decode_leader(kLeaderKey, encode(r)) == r);
}

RC_GTEST_PROP(RecordProperties, PlanRoundTrips, ()) {
  const auto r = t::plan_record();
  RC_ASSERT(decode_plan(kPlanKey, encode(r)) == r);
}

RC_GTEST_PROP(RecordProperties, SpecRoundTrips, ()) {
  const auto r = t::spec_record();
  RC_ASSERT(decode_spec(spec_key(r.spec.id), encode(r)) == r);
}

RC_GTEST_PROP(RecordProperties, SplitRoundTrips, ()) {
  const auto r = t::split_record();
  RC_ASSERT(decode_split(split_key(r.id), encode(r)) == r);
}

RC_GTEST_PROP(RecordProperties, LeaseRoundTrips, ()) {
  const auto r = t::lease_record();
  RC_ASSERT(decode_lease(lease_key(r.split), encode(r)) == r);
}

RC_GTEST_PROP(RecordProperties, MemberRoundTrips, ()) {
  const auto r = t::member_record();
  RC_ASSERT(decode_member(member_key(r.instance), encode(r)) == r);
}

RC_GTEST_PROP(RecordProperties, AssignmentRoundTrips, ()) {
  const auto r = t::assignment_record();
  RC_ASSERT(decode_assignment(assign_key(r.instance), encode(r)) == r);
}

RC_GTEST_PROP(RecordProperties, CordonRoundTrips, ()) {
  const auto r = t::cordon_record();
  RC_ASSERT(decode_cordon(cordon_key(r.instance), encode(r)) == r);
}

RC_GTEST_PROP(RecordProperties, PauseRoundTrips, ()) {
  const auto r = t::pause_record();
  RC_ASSERT(decode_pause(kPauseKey, encode(r)) == r);
}

// One record type: how to draw a valid record, its key and bytes, and how to decode and
// re-encode whatever a decoder accepts.
struct Codec {
  const char* name;
  // Draws a record; returns {key, encoded bytes}.
  std::function<std::pair<std::string, std::string>()> draw;
  // Decodes, then re-encodes the result (throws what the decoder throws).
  std::function<std::string(std::string_view key, std::string_view bytes)> decode_reencode;
};

template <typename Record, typename Draw, typename Key, typename Decode>
Codec make_codec(const char* name, Draw draw, Key key, Decode decode) {
  return Codec{name,
               [=] {
                 Record r = draw();
                 return std::pair<std::string, std::string>(key(r), encode(r));
               },
               [=](std::string_view k, std::string_view b) { return encode(decode(k, b)); }};
}

const std::vector<Codec>& codecs() {
  static const std::vector<Codec> all = {
      make_codec<LeaderRecord>(
          "leader", t::leader_record, [](const auto&) { return std::string(kLeaderKey); },
          decode_leader),
      make_codec<PlanRecord>(
          "plan", t::plan_record, [](const auto&) { return std::string(kPlanKey); }, decode_plan),
      make_codec<SpecRecord>(
          "spec", t::spec_record, [](const auto& r) { return spec_key(r.spec.id); }, decode_spec),
      make_codec<SplitRecord>(
          "split", t::split_record, [](const auto& r) { return split_key(r.id); }, decode_split),
      make_codec<LeaseRecord>(
          "lease", t::lease_record, [](const auto& r) { return lease_key(r.split); }, decode_lease),
      make_codec<MemberRecord>(
          "member", t::member_record, [](const auto& r) { return member_key(r.instance); },
          decode_member),
      make_codec<AssignmentRecord>(
          "assign", t::assignment_record, [](const auto& r) { return assign_key(r.instance); },
          decode_assignment),
      make_codec<CordonRecord>(
          "cordon", t::cordon_record, [](const auto& r) { return cordon_key(r.instance); },
          decode_cordon),
      make_codec<PauseRecord>(
          "pause", t::pause_record, [](const auto&) { return std::string(kPauseKey); },
          decode_pause),
  };
  return all;
}

// Runs every decoder on (key, bytes). Each must either accept, in which case the record it
// returns re-encodes and decodes to the same bytes again (the decoder accepts only what the
// encoder can produce), or throw RecordError. Anything else fails the property.
void check_only_record_errors(std::string_view key, std::string_view bytes) {
  int accepted = 0;
  for (const Codec& codec : codecs()) {
    std::optional<std::string> again;
    try {
      again = codec.decode_reencode(key, bytes);
    } catch (const RecordError&) {
      // the expected failure mode
    } catch (const std::exception& e) {
      RC_FAIL(std::string(codec.name) + " decoder threw " + typeid(e).name() + ": " + e.what());
    }
    if (!again) continue;
    ++accepted;
    std::string third;
    try {
      third = codec.decode_reencode(key, *again);
    } catch (const std::exception& e) {
      RC_FAIL(std::string(codec.name) + " rejected its own re-encoding: " + e.what());
    }
    RC_ASSERT(third == *again);
  }
  RC_CLASSIFY(accepted > 0, "some decoder accepted");
}

// Bytes that look like JSON often enough to get past the parser some of the time.
rc::Gen<std::string> jsonish() {
  return rc::gen::container<std::string>(
      rc::gen::elementOf(std::string("{}[]\":,0123456789-.eE+truefalsnl \\u/v=ABab\x01\xC3\xA9")));
}

RC_GTEST_PROP(RecordProperties, ArbitraryBytesOnlyYieldRecordError, ()) {
  const std::string bytes = *rc::gen::oneOf(t::bytes(), jsonish());
  const std::string key = *rc::gen::oneOf(rc::gen::element<std::string>("split.a", "job.plan"),
                                          rc::gen::arbitrary<std::string>());
  check_only_record_errors(key, bytes);
}

// One random edit of `s`: flip a byte, delete a range, insert a byte, duplicate a range, or
// replace a byte with a JSON-significant character.
std::string mutate(std::string s) {
  if (s.empty()) return s;
  const auto pos = *rc::gen::inRange<std::size_t>(0, s.size());
  switch (*rc::gen::inRange(0, 5)) {
    case 0:
      s[pos] = static_cast<char>(s[pos] ^ (1 << *rc::gen::inRange(0, 8)));
      break;
    case 1:
      s.erase(pos, *rc::gen::inRange<std::size_t>(1, 8));
      break;
    case 2:
      s.insert(pos, 1, *rc::gen::arbitrary<char>());
      break;
    case 3:
      s.insert(pos, s.substr(pos, *rc::gen::inRange<std::size_t>(1, 16)));
      break;
    default:
      s[pos] = *rc::gen::elementOf(std::string("{}[]\":,0-9.e \\nt"));
      break;
  }
  return s;
}

RC_GTEST_PROP(RecordProperties, MutatedEncodingsOnlyYieldRecordError, ()) {
  const Codec& codec = *rc::gen::elementOf(codecs());
  auto [key, bytes] = codec.draw();
  const int edits = *rc::gen::inRange(1, 6);
  for (int i = 0; i < edits; ++i) bytes = mutate(std::move(bytes));
  check_only_record_errors(key, bytes);
}

}  // namespace
}  // namespace etlc::core
