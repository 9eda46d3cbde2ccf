// Key layout and the canonical, injective id encoding (see keys.hpp for the format).
#include "core/keys.hpp"

#include <fmt/format.h>

#include "core/utf8.hpp"
#include "etlc/split.hpp"

namespace etlc::core {

namespace {

// Bytes that stand for themselves in an encoded token; every other byte is escaped.
bool stands_for_itself(unsigned char b) noexcept {
  return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == '_' ||
         b == '-';
}

// Upper-case hex only: accepting both cases would give one id two encodings.
int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Precondition: `id` passed validate_id.
std::string encode_valid(std::string_view id) {
  constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(id.size() * 3);
  for (char c : id) {
    const auto b = static_cast<unsigned char>(c);
    if (stands_for_itself(b)) {
      out.push_back(c);
    } else {
      out.push_back('=');
      out.push_back(kHex[b >> 4U]);
      out.push_back(kHex[b & 0x0FU]);
    }
  }
  return out;
}

std::string make_key(std::string_view prefix, std::string_view id, std::string_view what) {
  validate_id(id, what);
  std::string key(prefix);
  key += encode_valid(id);
  return key;
}

}  // namespace

void validate_id(std::string_view id, std::string_view what) {
  if (id.empty()) throw ConfigError(fmt::format("{} is empty", what));
  if (id.size() > kMaxSplitIdBytes) {
    throw ConfigError(fmt::format("{} of {} bytes exceeds kMaxSplitIdBytes ({})", what, id.size(),
                                  kMaxSplitIdBytes));
  }
  if (auto problem = find_utf8_problem(id)) {
    throw ConfigError(
        fmt::format("{} is not valid UTF-8: {} at byte {}", what, problem->rule, problem->offset));
  }
}

std::string encode_id(std::string_view id) {
  validate_id(id, "id");
  return encode_valid(id);
}

std::optional<std::string> decode_id(std::string_view token) {
  // A valid id encodes to at least one and at most 3 * kMaxSplitIdBytes bytes.
  if (token.empty() || token.size() > 3 * kMaxSplitIdBytes) return std::nullopt;
  std::string id;
  id.reserve(token.size());
  for (std::size_t i = 0; i < token.size(); ++i) {
    const auto b = static_cast<unsigned char>(token[i]);
    if (stands_for_itself(b)) {
      id.push_back(token[i]);
      continue;
    }
    if (b != '=' || token.size() - i < 3) return std::nullopt;  // '=' needs two digits
    const int hi = hex_value(token[i + 1]);
    const int lo = hex_value(token[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    const auto decoded = static_cast<unsigned char>(hi * 16 + lo);
    // An escaped byte that could have stood for itself is not canonical.
    if (stands_for_itself(decoded)) return std::nullopt;
    id.push_back(static_cast<char>(decoded));
    i += 2;
  }
  if (id.size() > kMaxSplitIdBytes || !is_valid_utf8(id)) return std::nullopt;
  return id;
}

std::string spec_key(std::string_view split_id) {
  return make_key(kSpecPrefix, split_id, "split id");
}
std::string split_key(std::string_view split_id) {
  return make_key(kSplitPrefix, split_id, "split id");
}
std::string lease_key(std::string_view split_id) {
  return make_key(kLeasePrefix, split_id, "split id");
}
std::string member_key(std::string_view instance_id) {
  return make_key(kMemberPrefix, instance_id, "instance id");
}
std::string assign_key(std::string_view instance_id) {
  return make_key(kAssignPrefix, instance_id, "instance id");
}
std::string cordon_key(std::string_view instance_id) {
  return make_key(kCordonPrefix, instance_id, "instance id");
}

std::optional<std::string> id_from_key(std::string_view key, std::string_view prefix) {
  if (!key.starts_with(prefix)) return std::nullopt;
  return decode_id(key.substr(prefix.size()));
}

}  // namespace etlc::core
