// Properties of the id → key-token encoding (src/core/keys.hpp).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

#include "core/keys.hpp"
#include "core/utf8.hpp"
#include "etlc/split.hpp"
#include "etlc/store.hpp"
#include "records/generators.hpp"

namespace etlc::core {
namespace {

bool in_token_alphabet(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '=';
}

// "=XX" for byte c, upper-case hex: the escape the encoding would use.
std::string escape_of(char c) {
  constexpr char kHex[] = "0123456789ABCDEF";
  const auto b = static_cast<unsigned char>(c);
  return {'=', kHex[b >> 4U], kHex[b & 0x0FU]};
}

RC_GTEST_PROP(KeysProperties, DecodeInvertsEncode, ()) {
  const std::string id = *testgen::id();
  const auto decoded = decode_id(encode_id(id));
  RC_ASSERT(decoded.has_value());
  RC_ASSERT(*decoded == id);
}

RC_GTEST_PROP(KeysProperties, EncodingUsesOnlyTokenAlphabet, ()) {
  const std::string encoded = encode_id(*testgen::id());
  RC_ASSERT(!encoded.empty());
  for (char c : encoded) RC_ASSERT(in_token_alphabet(c));
}

RC_GTEST_PROP(KeysProperties, DistinctIdsHaveDistinctEncodings, ()) {
  const std::string a = *testgen::id();
  // Half the time b is a near neighbour of a (one code point appended, replaced or removed),
  // which random pairs almost never produce.
  std::string b = *testgen::id();
  if (*rc::gen::arbitrary<bool>()) {
    const std::string piece = testgen::utf8(*testgen::code_point());
    b = a.size() + piece.size() <= kMaxSplitIdBytes ? a + piece : a.substr(0, a.size() - 1);
    if (b.empty() || !is_valid_utf8(b)) b = piece;
  }
  RC_PRE(a != b);
  RC_ASSERT(encode_id(a) != encode_id(b));
}

RC_GTEST_PROP(KeysProperties, EncodedKeysAreBoundedAndValidStoreKeys, ()) {
  const std::string id = *testgen::id();
  const std::string encoded = encode_id(id);
  RC_ASSERT(encoded.size() <= 3 * id.size());
  const std::vector<std::pair<std::string, std::string_view>> keys = {
      {spec_key(id), kSpecPrefix},     {split_key(id), kSplitPrefix},
      {lease_key(id), kLeasePrefix},   {member_key(id), kMemberPrefix},
      {assign_key(id), kAssignPrefix}, {cordon_key(id), kCordonPrefix}};
  for (const auto& [key, prefix] : keys) {
    RC_ASSERT(key.size() <= kMaxKeyBytes);
    validate_key(key);  // throws StoreError (failing the property) if the store would refuse it
    RC_ASSERT(key == std::string(prefix) + encoded);
    RC_ASSERT(id_from_key(key, prefix) == std::optional<std::string>(id));
  }
}

// Arbitrary tokens, biased towards escape-like text so that near-miss encodings are common.
rc::Gen<std::string> token_like() {
  return rc::gen::oneOf(rc::gen::container<std::string>(
                            rc::gen::elementOf(std::string("=0123456789ABCDEFabcdef_-.a/"))),
                        rc::gen::container<std::string>(rc::gen::arbitrary<char>()));
}

// decode_id accepts exactly the canonical encodings: whatever it accepts re-encodes to the very
// same token, and it never crashes on anything else.
RC_GTEST_PROP(KeysProperties, DecodeAcceptsOnlyCanonicalTokens, ()) {
  const std::string token = *token_like();
  const auto decoded = decode_id(token);
  RC_CLASSIFY(decoded.has_value(), "decoded");
  if (decoded) {
    RC_ASSERT(encode_id(*decoded) == token);
  }
}

// Two specific non-canonical rewrites of a valid encoding are always refused: lower-case hex,
// and escaping a byte that stands for itself.
RC_GTEST_PROP(KeysProperties, NonCanonicalRewritesAreRejected, ()) {
  const std::string id = *testgen::id();
  const std::string encoded = encode_id(id);
  std::string lowered = encoded;
  bool changed = false;
  for (std::size_t i = 0; i + 2 < lowered.size(); ++i) {
    if (lowered[i] != '=') continue;
    for (std::size_t k = i + 1; k <= i + 2; ++k) {
      if (lowered[k] >= 'A' && lowered[k] <= 'F') {
        lowered[k] = static_cast<char>(lowered[k] - 'A' + 'a');
        changed = true;
      }
    }
    i += 2;
  }
  if (changed) RC_ASSERT(!decode_id(lowered).has_value());

  for (std::size_t i = 0; i < encoded.size(); ++i) {
    const char c = encoded[i];
    if (c == '=' || (i >= 1 && encoded[i - 1] == '=') || (i >= 2 && encoded[i - 2] == '=')) {
      continue;  // part of an escape
    }
    std::string escaped = encoded.substr(0, i) + escape_of(c) + encoded.substr(i + 1);
    RC_ASSERT(!decode_id(escaped).has_value());
    break;
  }
}

}  // namespace
}  // namespace etlc::core
