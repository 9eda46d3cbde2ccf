// Unit tests of the record codecs (src/core/records.hpp): the wire format, and every error code.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/keys.hpp"
#include "core/records.hpp"
#include "etlc/store.hpp"

namespace etlc::core {
namespace {

using Json = nlohmann::json;

struct Failure {
  RecordErrc code = RecordErrc::malformed;
  std::string key;
  std::string message;
  bool thrown = false;
};

// What `f` throws as a RecordError (thrown == false if it returns).
Failure failure_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const RecordError& e) {
    return {e.code(), e.key(), e.what(), true};
  }
  return {};
}

// Expects decoding to fail with `code` and a message containing `needle`.
void expect_failure(const std::function<void()>& f, RecordErrc code, const std::string& needle) {
  Failure got = failure_of(f);
  ASSERT_TRUE(got.thrown) << "expected " << to_string(code) << " containing: " << needle;
  EXPECT_EQ(to_string(got.code), to_string(code)) << got.message;
  EXPECT_NE(got.message.find(needle), std::string::npos) << got.message;
}

SplitRecord sample_split() {
  SplitRecord r;
  r.id = "a.b";
  r.epoch = 7;
  r.status = SplitStatus::runnable;
  r.owner = "m1";
  r.owner_nonce = "n1";
  r.attempts = 2;
  r.weight = 10;
  r.progress = {42, std::string("\x00\xFF", 2)};
  r.last_error = "boom";
  return r;
}

const std::string kSplitKey = "split.a=2Eb";
const std::string kSplitJson =
    R"({"v":1,"id":"a.b","epoch":7,"status":"runnable","owner":"m1","owner_nonce":"n1",)"
    R"("attempts":2,"weight":10,"progress":{"watermark":42,"state":"AP8="},"last_error":"boom"})";

// kSplitJson with `edit` applied to its parsed form.
std::string edited_split(const std::function<void(Json&)>& edit) {
  Json j = Json::parse(kSplitJson);
  edit(j);
  return j.dump();
}

// A 250-byte id; ids for increasing i sort in increasing order.
std::string long_id(int i) {
  std::string s = std::to_string(100000 + i);
  s.resize(250, 'x');
  return s;
}

// --- the wire format -----------------------------------------------------------------------------

TEST(RecordFormat, SplitRecordGolden) {
  EXPECT_EQ(encode(sample_split()), kSplitJson);
  EXPECT_EQ(decode_split(kSplitKey, kSplitJson), sample_split());
}

TEST(RecordFormat, OptionalFieldsAreOmittedWhenAbsent) {
  SplitRecord r = sample_split();
  r.owner.reset();
  r.owner_nonce.reset();
  r.last_error.reset();
  const std::string bytes = encode(r);
  EXPECT_EQ(bytes, R"({"v":1,"id":"a.b","epoch":7,"status":"runnable","attempts":2,"weight":10,)"
                   R"("progress":{"watermark":42,"state":"AP8="}})");
  EXPECT_EQ(decode_split(kSplitKey, bytes), r);
}

// progress.done is read and written back before any release reports it (decision 0011): a
// member of this release must not take a later member's record for damage.
TEST(RecordFormat, ProgressDoneIsReadAndKept) {
  const std::string later =
      R"({"v":1,"id":"a.b","epoch":7,"status":"runnable","attempts":2,"weight":10,)"
      R"("progress":{"watermark":42,"state":"AP8=","done":6}})";
  SplitRecord r = decode_split(kSplitKey, later);
  ASSERT_TRUE(r.progress.done.has_value());
  EXPECT_EQ(*r.progress.done, 6u);
  EXPECT_EQ(encode(r), later);
  r.progress.done.reset();
  EXPECT_EQ(encode(r).find("done"), std::string::npos);
  const std::string negative =
      R"({"v":1,"id":"a.b","epoch":7,"status":"runnable","attempts":2,"weight":10,)"
      R"("progress":{"watermark":42,"state":"AP8=","done":-1}})";
  EXPECT_THROW(decode_split(kSplitKey, negative), RecordError);
}

TEST(RecordFormat, EveryOtherRecordGolden) {
  const LeaderRecord leader{"m1", "n1", 3};
  const std::string leader_json = R"({"v":1,"owner":"m1","nonce":"n1","term":3})";
  EXPECT_EQ(encode(leader), leader_json);
  EXPECT_EQ(decode_leader(kLeaderKey, leader_json), leader);

  PlanRecord plan;
  plan.fingerprint = "fp";
  plan.term = 4;
  plan.finality = Finality::final;
  plan.planned = true;
  plan.split_count = 10;
  plan.cursor = "c";
  plan.completed = 9;
  plan.quarantined = 1;
  plan.verdict = Verdict::stalled;
  const std::string plan_json =
      R"({"v":1,"fingerprint":"fp","term":4,"finality":"final","planned":true,"split_count":10,)"
      R"("cursor":"c","completed":9,"quarantined":1,"verdict":"stalled"})";
  EXPECT_EQ(encode(plan), plan_json);
  EXPECT_EQ(decode_plan(kPlanKey, plan_json), plan);

  const SpecRecord spec{SplitSpec{"s/1", "desc", 5}};
  const std::string spec_json = R"({"v":1,"id":"s/1","descriptor":"ZGVzYw==","weight":5})";
  EXPECT_EQ(encode(spec), spec_json);
  EXPECT_EQ(decode_spec("spec.s=2F1", spec_json), spec);

  const LeaseRecord lease{"s/1", "m1", "n1", 8};
  const std::string lease_json = R"({"v":1,"split":"s/1","owner":"m1","nonce":"n1","epoch":8})";
  EXPECT_EQ(encode(lease), lease_json);
  EXPECT_EQ(decode_lease("lease.s=2F1", lease_json), lease);

  const MemberRecord member{"m1", "n1", "fp", 4, 12, 3000};
  const std::string member_json =
      R"({"v":1,"instance":"m1","nonce":"n1","fingerprint":"fp","max_in_flight":4,)"
      R"("counter":12,"lease_ms":3000})";
  EXPECT_EQ(encode(member), member_json);
  EXPECT_EQ(decode_member("member.m1", member_json), member);

  const AssignmentRecord assign{"m1", 4, {"a", "b.c"}};
  const std::string assign_json = R"({"v":1,"instance":"m1","term":4,"splits":["a","b.c"]})";
  EXPECT_EQ(encode(assign), assign_json);
  EXPECT_EQ(decode_assignment("assign.m1", assign_json), assign);

  const CordonRecord cordon{"m1", "disk \"full\"\n"};
  const std::string cordon_json = R"({"v":1,"instance":"m1","reason":"disk \"full\"\n"})";
  EXPECT_EQ(encode(cordon), cordon_json);
  EXPECT_EQ(decode_cordon("cordon.m1", cordon_json), cordon);
}

TEST(RecordFormat, SixtyFourBitIntegersAreExact) {
  SplitRecord r = sample_split();
  r.epoch = std::numeric_limits<std::uint64_t>::max();
  r.weight = (std::uint64_t{1} << 53) + 1;  // not representable as a double
  r.progress.watermark = std::numeric_limits<std::uint64_t>::max() - 1;
  r.attempts = std::numeric_limits<std::uint32_t>::max();
  const std::string bytes = encode(r);
  EXPECT_NE(bytes.find("\"epoch\":18446744073709551615"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("\"weight\":9007199254740993"), std::string::npos) << bytes;
  EXPECT_EQ(decode_split(kSplitKey, bytes), r);
}

TEST(RecordFormat, AcceptsAnyJsonLayoutOfAValidRecord) {
  // Field order, whitespace and \u escapes are JSON's business, not the schema's.
  const std::string pretty = Json::parse(kSplitJson).dump(2);
  EXPECT_EQ(decode_split(kSplitKey, pretty), sample_split());
  EXPECT_EQ(decode_leader(kLeaderKey, R"({ "term" : 3, "nonce":"n\u0031", "owner":"m1", "v":1 })"),
            (LeaderRecord{"m1", "n1", 3}));
}

TEST(RecordFormat, ToStringNamesEveryEnumerator) {
  EXPECT_EQ(to_string(SplitStatus::runnable), "runnable");
  EXPECT_EQ(to_string(SplitStatus::completed), "completed");
  EXPECT_EQ(to_string(SplitStatus::quarantined), "quarantined");
  EXPECT_EQ(to_string(Finality::open), "open");
  EXPECT_EQ(to_string(Finality::final), "final");
  EXPECT_EQ(to_string(Verdict::running), "running");
  EXPECT_EQ(to_string(Verdict::complete), "complete");
  EXPECT_EQ(to_string(Verdict::stalled), "stalled");
  EXPECT_EQ(to_string(RecordErrc::malformed), "malformed");
  EXPECT_EQ(to_string(RecordErrc::wrong_version), "wrong_version");
  EXPECT_EQ(to_string(RecordErrc::missing_field), "missing_field");
  EXPECT_EQ(to_string(RecordErrc::unknown_field), "unknown_field");
  EXPECT_EQ(to_string(RecordErrc::wrong_type), "wrong_type");
  EXPECT_EQ(to_string(RecordErrc::id_mismatch), "id_mismatch");
  EXPECT_EQ(to_string(RecordErrc::too_large), "too_large");
}

// --- error codes ---------------------------------------------------------------------------------

TEST(RecordErrors, MessageNamesKeyAndField) {
  Failure f = failure_of([] { decode_split("split.a", R"({"v":1,"id":"a"})"); });
  ASSERT_TRUE(f.thrown);
  EXPECT_EQ(f.code, RecordErrc::missing_field);
  EXPECT_EQ(f.key, "split.a");
  EXPECT_EQ(f.message, "record at key 'split.a': missing field 'epoch'");
}

TEST(RecordErrors, Malformed) {
  const auto split = [](std::string bytes) { return [bytes] { decode_split(kSplitKey, bytes); }; };
  expect_failure(split(""), RecordErrc::malformed, "not valid JSON");
  expect_failure(split("not json"), RecordErrc::malformed, "not valid JSON");
  expect_failure(split(kSplitJson + " x"), RecordErrc::malformed, "not valid JSON");
  expect_failure(split(kSplitJson + "{}"), RecordErrc::malformed, "not valid JSON");
  expect_failure(split(kSplitJson.substr(0, kSplitJson.size() - 1)), RecordErrc::malformed,
                 "not valid JSON");
  expect_failure(split("[1]"), RecordErrc::malformed, "not a JSON object");
  expect_failure(split("\"text\""), RecordErrc::malformed, "not a JSON object");
  expect_failure(split("null"), RecordErrc::malformed, "not a JSON object");
  expect_failure(split(R"({"v":1,"v":1})"), RecordErrc::malformed, "duplicate field 'v'");
  expect_failure(split(R"({"v":1,"progress":{"state":"","state":""}})"), RecordErrc::malformed,
                 "duplicate field 'state'");
  expect_failure(split("]"), RecordErrc::malformed, "unbalanced");
  expect_failure(split(std::string("{\"v\":\"\xC3\"}")), RecordErrc::malformed,
                 "not valid JSON");  // invalid UTF-8 inside a string
}

TEST(RecordErrors, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  expect_failure([&] { decode_split(kSplitKey, deep); }, RecordErrc::malformed, "nested deeper");
  const std::string deep_field = R"({"v":1,"x":)" + std::string(9, '[') + std::string(9, ']') + "}";
  expect_failure([&] { decode_split(kSplitKey, deep_field); }, RecordErrc::malformed,
                 "nested deeper");
  // Brackets inside strings are text, not nesting.
  SplitRecord r = sample_split();
  r.last_error = std::string(5000, '[') + "\\\"[";
  EXPECT_EQ(decode_split(kSplitKey, encode(r)), r);
}

TEST(RecordErrors, WrongVersion) {
  const auto with_v = [](const Json& v) { return edited_split([&](Json& j) { j["v"] = v; }); };
  expect_failure([] { decode_split(kSplitKey, "{}"); }, RecordErrc::wrong_version,
                 "missing field 'v'");
  expect_failure([&] { decode_split(kSplitKey, edited_split([](Json& j) { j.erase("v"); })); },
                 RecordErrc::wrong_version, "missing field 'v'");
  for (const Json& v : {Json(2), Json(0), Json("1"), Json(1.0), Json(-1), Json(nullptr)}) {
    expect_failure([&] { decode_split(kSplitKey, with_v(v)); }, RecordErrc::wrong_version,
                   "field 'v' is '" + v.dump());
  }
  // The version is checked before anything else in the object.
  expect_failure([] { decode_leader(kLeaderKey, R"({"v":2,"future":true})"); },
                 RecordErrc::wrong_version, "this version reads only 1");
}

TEST(RecordErrors, UnknownField) {
  expect_failure([] { decode_split(kSplitKey, edited_split([](Json& j) { j["extra"] = 1; })); },
                 RecordErrc::unknown_field, "unknown field 'extra'");
  expect_failure(
      [] { decode_split(kSplitKey, edited_split([](Json& j) { j["progress"]["x"] = 1; })); },
      RecordErrc::unknown_field, "unknown field 'progress.x'");
  expect_failure(
      [] { decode_leader(kLeaderKey, R"({"v":1,"owner":"m","nonce":"n","term":1,"":0})"); },
      RecordErrc::unknown_field, "unknown field ''");
}

TEST(RecordErrors, MissingFieldForEveryRequiredField) {
  for (const char* field : {"id", "epoch", "status", "attempts", "weight", "progress"}) {
    expect_failure([&] { decode_split(kSplitKey, edited_split([&](Json& j) { j.erase(field); })); },
                   RecordErrc::missing_field, std::string("missing field '") + field + "'");
  }
  for (const char* field : {"watermark", "state"}) {
    expect_failure(
        [&] {
          decode_split(kSplitKey, edited_split([&](Json& j) { j["progress"].erase(field); }));
        },
        RecordErrc::missing_field, std::string("missing field 'progress.") + field + "'");
  }
  // Each other record type: drop each field of a valid encoding in turn.
  struct Case {
    std::string key;
    std::string json;
    std::function<void(std::string_view, std::string_view)> decode;
  };
  const std::vector<Case> cases = {
      {std::string(kLeaderKey), encode(LeaderRecord{"m1", "n", 1}),
       [](auto k, auto b) { decode_leader(k, b); }},
      {std::string(kPlanKey), encode(PlanRecord{}), [](auto k, auto b) { decode_plan(k, b); }},
      {"spec.s", encode(SpecRecord{SplitSpec{"s", "d", 1}}),
       [](auto k, auto b) { decode_spec(k, b); }},
      {"lease.s", encode(LeaseRecord{"s", "m1", "n", 1}),
       [](auto k, auto b) { decode_lease(k, b); }},
      {"member.m1", encode(MemberRecord{"m1", "n", "fp", 1, 1, 1}),
       [](auto k, auto b) { decode_member(k, b); }},
      {"assign.m1", encode(AssignmentRecord{"m1", 1, {"s"}}),
       [](auto k, auto b) { decode_assignment(k, b); }},
      {"cordon.m1", encode(CordonRecord{"m1", "r"}), [](auto k, auto b) { decode_cordon(k, b); }},
  };
  for (const auto& c : cases) {
    EXPECT_NO_THROW(c.decode(c.key, c.json)) << c.json;
    const Json parsed = Json::parse(c.json);
    for (const auto& item : parsed.items()) {
      if (item.key() == "v") continue;
      Json j = Json::parse(c.json);
      j.erase(item.key());
      expect_failure([&] { c.decode(c.key, j.dump()); }, RecordErrc::missing_field,
                     "record at key '" + c.key + "': missing field '" + item.key() + "'");
    }
  }
}

TEST(RecordErrors, WrongTypeForNumbers) {
  const auto with = [](const char* field, const Json& value) {
    return [=] { decode_split(kSplitKey, edited_split([&](Json& j) { j[field] = value; })); };
  };
  for (const Json& bad :
       {Json(-1), Json(1.5), Json(7.0), Json("7"), Json(true), Json(nullptr), Json::array({7})}) {
    expect_failure(with("epoch", bad), RecordErrc::wrong_type,
                   "field 'epoch' must be an unsigned 64-bit integer");
  }
  expect_failure(with("attempts", Json(std::uint64_t{1} << 32)), RecordErrc::wrong_type,
                 "field 'attempts' must be an unsigned 32-bit integer");
  EXPECT_EQ(
      decode_split(kSplitKey, edited_split([](Json& j) { j["attempts"] = 4294967295U; })).attempts,
      4294967295U);
  // Text-level forms nlohmann would turn into floats or signed values.
  std::string over = kSplitJson;
  over.replace(over.find("\"epoch\":7"), 9, "\"epoch\":18446744073709551616");
  expect_failure([&] { decode_split(kSplitKey, over); }, RecordErrc::wrong_type, "'epoch'");
  std::string exp = kSplitJson;
  exp.replace(exp.find("\"epoch\":7"), 9, "\"epoch\":7e0");
  expect_failure([&] { decode_split(kSplitKey, exp); }, RecordErrc::wrong_type, "'epoch'");
  std::string neg_zero = kSplitJson;
  neg_zero.replace(neg_zero.find("\"epoch\":7"), 9, "\"epoch\":-0");
  expect_failure([&] { decode_split(kSplitKey, neg_zero); }, RecordErrc::wrong_type, "'epoch'");
}

TEST(RecordErrors, WrongTypeForStringsEnumsAndBytes) {
  const auto with = [](const std::function<void(Json&)>& edit) {
    return [=] { decode_split(kSplitKey, edited_split(edit)); };
  };
  expect_failure(with([](Json& j) { j["status"] = "Runnable"; }), RecordErrc::wrong_type,
                 "field 'status' must be one of runnable, completed, quarantined");
  expect_failure(with([](Json& j) { j["status"] = 0; }), RecordErrc::wrong_type, "'status'");
  expect_failure(with([](Json& j) { j["owner"] = nullptr; }), RecordErrc::wrong_type,
                 "field 'owner' must be a string");  // absent, not null, means nullopt
  expect_failure(with([](Json& j) { j["last_error"] = nullptr; }), RecordErrc::wrong_type,
                 "field 'last_error' must be a string");
  expect_failure(with([](Json& j) { j["owner"] = ""; }), RecordErrc::wrong_type,
                 "field 'owner' is not a valid id (id is empty)");
  expect_failure(with([](Json& j) { j["id"] = std::string(300, 'x'); }), RecordErrc::wrong_type,
                 "field 'id' is not a valid id");
  expect_failure(with([](Json& j) { j["progress"] = "x"; }), RecordErrc::wrong_type,
                 "field 'progress' must be an object");
  expect_failure(with([](Json& j) { j["progress"]["state"] = "not base64!"; }),
                 RecordErrc::wrong_type,
                 "field 'progress.state' must be canonical standard base64");
  expect_failure(with([](Json& j) { j["progress"]["state"] = "AP9="; }), RecordErrc::wrong_type,
                 "'progress.state'");  // non-zero unused bits
  expect_failure(with([](Json& j) { j["progress"]["state"] = 5; }), RecordErrc::wrong_type,
                 "field 'progress.state' must be a string");
  expect_failure(with([](Json& j) {
                   j["progress"]["state"] = std::string((kMaxProgressStateBytes / 3 + 1) * 4, 'A');
                 }),
                 RecordErrc::wrong_type, "more than kMaxProgressStateBytes");

  expect_failure(
      [] {
        decode_plan(kPlanKey, R"({"v":1,"fingerprint":"f","term":1,"finality":"open",)"
                              R"("planned":1,"split_count":0,"completed":0,)"
                              R"("quarantined":0,"verdict":"running"})");
      },
      RecordErrc::wrong_type, "field 'planned' must be true or false");
  expect_failure(
      [] {
        decode_plan(kPlanKey, R"({"v":1,"fingerprint":"f","term":1,"finality":"closed",)"
                              R"("planned":true,"split_count":0,"completed":0,)"
                              R"("quarantined":0,"verdict":"running"})");
      },
      RecordErrc::wrong_type, "field 'finality' must be one of open, final");
}

TEST(RecordErrors, WrongTypeForAssignmentSplits) {
  const auto splits = [](const Json& s) {
    return [=] {
      Json j = {{"v", 1}, {"instance", "m1"}, {"term", 1}, {"splits", s}};
      decode_assignment("assign.m1", j.dump());
    };
  };
  expect_failure(splits(Json::array({"b", "a"})), RecordErrc::wrong_type,
                 "field 'splits' must be sorted and unique, but 'a' follows 'b'");
  expect_failure(splits(Json::array({"a", "a"})), RecordErrc::wrong_type,
                 "must be sorted and unique");
  expect_failure(splits(Json::array({"a", 1})), RecordErrc::wrong_type,
                 "field 'splits[1]' must be a string");
  expect_failure(splits(Json::array({""})), RecordErrc::wrong_type,
                 "field 'splits[0]' is not a valid id");
  expect_failure(splits("a"), RecordErrc::wrong_type, "field 'splits' must be an array of ids");
  EXPECT_EQ(decode_assignment(
                "assign.m1",
                Json{{"v", 1}, {"instance", "m1"}, {"term", 1}, {"splits", Json::array()}}.dump())
                .splits,
            std::vector<std::string>{});
  // Bytewise order: "\xC3\xA9" (U+00E9) sorts after "z".
  EXPECT_NO_THROW(splits(Json::array({"z", "\xC3\xA9"}))());
}

TEST(RecordErrors, IdMismatch) {
  expect_failure([] { decode_split("split.other", kSplitJson); }, RecordErrc::id_mismatch,
                 "record at key 'split.other': field 'id' is 'a.b' but the key holds 'other'");
  expect_failure([] { decode_split("spec.a=2Eb", kSplitJson); }, RecordErrc::id_mismatch,
                 "the key is not 'split.' followed by an encoded id");
  expect_failure([] { decode_split("split.a=2eb", kSplitJson); }, RecordErrc::id_mismatch,
                 "not 'split.' followed by an encoded id");  // non-canonical encoding
  expect_failure([] { decode_split("split.a.b", kSplitJson); }, RecordErrc::id_mismatch,
                 "'split.'");
  expect_failure(
      [] {
        decode_spec("spec.t", encode(SpecRecord{SplitSpec{"s", "", 1}}));
      },
      RecordErrc::id_mismatch, "field 'id' is 's'");
  expect_failure(
      [] {
        decode_lease("lease.t", encode(LeaseRecord{"s", "m", "n", 1}));
      },
      RecordErrc::id_mismatch, "field 'split' is 's'");
  expect_failure(
      [] {
        decode_member("member.x", encode(MemberRecord{"m", "n", "f", 1, 1, 1}));
      },
      RecordErrc::id_mismatch, "field 'instance' is 'm'");
  expect_failure(
      [] {
        decode_assignment("assign.x", encode(AssignmentRecord{"m", 1, {}}));
      },
      RecordErrc::id_mismatch, "field 'instance' is 'm'");
  expect_failure(
      [] {
        decode_cordon("cordon.x", encode(CordonRecord{"m", ""}));
      },
      RecordErrc::id_mismatch, "field 'instance' is 'm'");
}

TEST(RecordErrors, TooLarge) {
  AssignmentRecord big{"m1", 1, {}};
  for (int i = 0; i < 3000; ++i) big.splits.push_back(long_id(i));
  Failure f = failure_of([&] { (void)encode(big); });
  ASSERT_TRUE(f.thrown);
  EXPECT_EQ(f.code, RecordErrc::too_large);
  EXPECT_EQ(f.key, "assign.m1");
  EXPECT_NE(f.message.find("more than kMaxValueBytes (524288)"), std::string::npos) << f.message;

  // Decoders read anything a store can hold (kMaxStoredValueBytes), nothing larger.
  const std::string huge(kMaxStoredValueBytes + 1, ' ');
  expect_failure([&] { decode_split(kSplitKey, huge); }, RecordErrc::too_large,
                 "exceeds kMaxStoredValueBytes");
  const std::string stored(kMaxStoredValueBytes, ' ');
  expect_failure([&] { decode_split(kSplitKey, stored); }, RecordErrc::malformed, "");
}

TEST(RecordEncoding, RefusesWhatTheDecoderWouldRefuse) {
  SplitRecord bad_owner = sample_split();
  bad_owner.owner = "";
  EXPECT_THROW((void)encode(bad_owner), ConfigError);
  SplitRecord bad_text = sample_split();
  bad_text.last_error = "\xC3";
  EXPECT_THROW((void)encode(bad_text), ConfigError);
  SplitRecord big_state = sample_split();
  big_state.progress.state.assign(kMaxProgressStateBytes + 1, 'x');
  EXPECT_THROW((void)encode(big_state), ConfigError);
  EXPECT_THROW(
      (void)encode(SpecRecord{SplitSpec{"s", std::string(kMaxDescriptorBytes + 1, 'x'), 1}}),
      ConfigError);
  EXPECT_THROW((void)encode(AssignmentRecord{"m", 1, {"b", "a"}}), ConfigError);
  EXPECT_THROW((void)encode(AssignmentRecord{"m", 1, {"a", "a"}}), ConfigError);
  EXPECT_THROW((void)encode(LeaderRecord{"", "n", 1}), ConfigError);
  try {
    (void)encode(bad_text);
  } catch (const ConfigError& e) {
    EXPECT_STREQ(
        e.what(),
        "split record field 'last_error' is not valid UTF-8: truncated sequence at byte 0");
  }
  // At the limits, everything still encodes and decodes.
  SpecRecord spec{
      SplitSpec{std::string(kMaxSplitIdBytes, '.'), std::string(kMaxDescriptorBytes, '\xFF'), 1}};
  EXPECT_EQ(decode_spec(spec_key(spec.spec.id), encode(spec)), spec);
}

}  // namespace
}  // namespace etlc::core
