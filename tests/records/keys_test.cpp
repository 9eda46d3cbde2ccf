// Unit tests of id validation, the key encoding and the key helpers (src/core/keys.hpp).
#include <gtest/gtest.h>

#include <string>

#include "core/keys.hpp"
#include "core/utf8.hpp"
#include "etlc/split.hpp"
#include "etlc/store.hpp"

namespace etlc::core {
namespace {

// The message of the ConfigError validate_id throws, or "" if it accepts.
std::string id_error(std::string_view id, std::string_view what = "split id") {
  try {
    validate_id(id, what);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ValidateId, AcceptsUtf8UpToTheLimit) {
  EXPECT_EQ(id_error("a"), "");
  EXPECT_EQ(id_error(std::string(kMaxSplitIdBytes, 'x')), "");
  EXPECT_EQ(id_error("caf\xC3\xA9 / 2024.csv"), "");
  EXPECT_EQ(id_error("\xED\x9F\xBF"), "");          // U+D7FF, just below the surrogates
  EXPECT_EQ(id_error("\xEE\x80\x80"), "");          // U+E000, just above
  EXPECT_EQ(id_error("\xF4\x8F\xBF\xBF"), "");      // U+10FFFF, the last code point
  EXPECT_EQ(id_error(std::string("a\0b", 3)), "");  // NUL is a valid code point
}

TEST(ValidateId, NamesTheRuleAndTheId) {
  EXPECT_EQ(id_error("", "instance id"), "instance id is empty");
  EXPECT_EQ(id_error(std::string(kMaxSplitIdBytes + 1, 'x')),
            "split id of 257 bytes exceeds kMaxSplitIdBytes (256)");
  EXPECT_EQ(id_error("ab\x80"),
            "split id is not valid UTF-8: unexpected continuation byte at byte 2");
  EXPECT_EQ(id_error("\xFF"), "split id is not valid UTF-8: invalid lead byte at byte 0");
  EXPECT_EQ(id_error("a\xE2\x82"), "split id is not valid UTF-8: truncated sequence at byte 1");
  EXPECT_EQ(id_error("\xE2(\xAC"), "split id is not valid UTF-8: truncated sequence at byte 0");
}

TEST(ValidateId, RejectsOverlongsSurrogatesAndOutOfRange) {
  const std::string overlong = "split id is not valid UTF-8: overlong encoding at byte 0";
  EXPECT_EQ(id_error("\xC0\xAF"), overlong);  // '/' in two bytes
  EXPECT_EQ(id_error("\xC1\xBF"), overlong);
  EXPECT_EQ(id_error("\xE0\x80\xAF"), overlong);      // '/' in three bytes
  EXPECT_EQ(id_error("\xF0\x8F\xBF\xBF"), overlong);  // U+FFFF in four bytes
  EXPECT_EQ(id_error("\xED\xA0\x80"),
            "split id is not valid UTF-8: surrogate code point at byte 0");  // U+D800
  EXPECT_EQ(id_error("\xED\xBF\xBF"),
            "split id is not valid UTF-8: surrogate code point at byte 0");  // U+DFFF
  EXPECT_EQ(id_error("\xF4\x90\x80\x80"),
            "split id is not valid UTF-8: code point above U+10FFFF at byte 0");
  EXPECT_EQ(id_error("\xF8\x88\x80\x80\x80"),
            "split id is not valid UTF-8: invalid lead byte at byte 0");
}

TEST(EncodeId, EscapesEverythingButTheUnreservedBytes) {
  EXPECT_EQ(encode_id("Az09_-"), "Az09_-");
  EXPECT_EQ(encode_id("a.b"), "a=2Eb");
  EXPECT_EQ(encode_id("="), "=3D");
  EXPECT_EQ(encode_id("s3://bucket/k ey"), "s3=3A=2F=2Fbucket=2Fk=20ey");
  EXPECT_EQ(encode_id("caf\xC3\xA9"), "caf=C3=A9");
  EXPECT_EQ(encode_id(std::string("\0", 1)), "=00");
  EXPECT_THROW(encode_id(""), ConfigError);
  EXPECT_THROW(encode_id("\xC0\xAF"), ConfigError);
}

TEST(DecodeId, InvertsCanonicalEncodings) {
  EXPECT_EQ(decode_id("a=2Eb"), "a.b");
  EXPECT_EQ(decode_id("caf=C3=A9"), "caf\xC3\xA9");
  EXPECT_EQ(decode_id("=00"), std::string("\0", 1));
  EXPECT_EQ(decode_id("x"), "x");
}

TEST(DecodeId, RejectsEverythingThatIsNotCanonical) {
  EXPECT_EQ(decode_id(""), std::nullopt);           // an id is never empty
  EXPECT_EQ(decode_id("a=2eb"), std::nullopt);      // lower-case hex
  EXPECT_EQ(decode_id("=41"), std::nullopt);        // 'A' must stand for itself
  EXPECT_EQ(decode_id("=5F"), std::nullopt);        // '_' too
  EXPECT_EQ(decode_id("="), std::nullopt);          // '=' without digits
  EXPECT_EQ(decode_id("=2"), std::nullopt);         // one digit
  EXPECT_EQ(decode_id("=G0"), std::nullopt);        // not hex
  EXPECT_EQ(decode_id("a.b"), std::nullopt);        // raw '.' should have been escaped
  EXPECT_EQ(decode_id("a/b"), std::nullopt);        // raw '/' too
  EXPECT_EQ(decode_id("=C3"), std::nullopt);        // decodes to truncated UTF-8
  EXPECT_EQ(decode_id("=C0=AF"), std::nullopt);     // decodes to an overlong
  EXPECT_EQ(decode_id("=ED=A0=80"), std::nullopt);  // decodes to a surrogate
  EXPECT_EQ(decode_id(std::string(kMaxSplitIdBytes + 1, 'a')), std::nullopt);  // too long
  EXPECT_EQ(decode_id(std::string(kMaxSplitIdBytes, 'a')), std::string(kMaxSplitIdBytes, 'a'));
}

TEST(KeyHelpers, PrefixTheEncodedId) {
  EXPECT_EQ(spec_key("a.b"), "spec.a=2Eb");
  EXPECT_EQ(split_key("a.b"), "split.a=2Eb");
  EXPECT_EQ(lease_key("a.b"), "lease.a=2Eb");
  EXPECT_EQ(member_key("host/1"), "member.host=2F1");
  EXPECT_EQ(assign_key("host/1"), "assign.host=2F1");
  EXPECT_EQ(cordon_key("host/1"), "cordon.host=2F1");
}

TEST(KeyHelpers, NameTheKindOfIdInErrors) {
  try {
    split_key("");
    FAIL() << "split_key accepted an empty id";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "split id is empty");
  }
  try {
    member_key(std::string(300, 'm'));
    FAIL() << "member_key accepted a 300-byte id";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "instance id of 300 bytes exceeds kMaxSplitIdBytes (256)");
  }
}

TEST(KeyHelpers, LongestIdMakesAValidKey) {
  // Every byte escaped, at the length limit: the longest key the layout can produce.
  const std::string id(kMaxSplitIdBytes, '.');
  const std::string key = member_key(id);
  EXPECT_EQ(key.size(), kMemberPrefix.size() + 3 * kMaxSplitIdBytes);
  EXPECT_LE(key.size(), kMaxKeyBytes);
  EXPECT_NO_THROW(validate_key(key));
  EXPECT_EQ(id_from_key(key, kMemberPrefix), id);
}

TEST(IdFromKey, RequiresThePrefixAndACanonicalToken) {
  EXPECT_EQ(id_from_key("split.a=2Eb", kSplitPrefix), "a.b");
  EXPECT_EQ(id_from_key("split.a=2Eb", kSpecPrefix), std::nullopt);
  EXPECT_EQ(id_from_key("split.", kSplitPrefix), std::nullopt);
  EXPECT_EQ(id_from_key("split.a.b", kSplitPrefix), std::nullopt);  // two tokens
  EXPECT_EQ(id_from_key("spli", kSplitPrefix), std::nullopt);
  EXPECT_EQ(id_from_key(kLeaderKey, kSplitPrefix), std::nullopt);
}

TEST(Utf8, ReportsTheOffsetOfTheFirstProblem) {
  EXPECT_FALSE(find_utf8_problem(""));
  EXPECT_FALSE(find_utf8_problem("plain ascii"));
  auto p = find_utf8_problem("ok\xC3\xA9\xC3");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->offset, 4U);
  EXPECT_EQ(p->rule, "truncated sequence");
}

}  // namespace
}  // namespace etlc::core
