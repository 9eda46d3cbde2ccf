#include "core/base64.hpp"

#include <cstdint>

namespace etlc::core {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) noexcept {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16U) |
                            (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8U) |
                            std::uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    out.push_back(kAlphabet[(v >> 18U) & 63U]);
    out.push_back(kAlphabet[(v >> 12U) & 63U]);
    out.push_back(kAlphabet[(v >> 6U) & 63U]);
    out.push_back(kAlphabet[v & 63U]);
  }
  const std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    const std::uint32_t v = std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16U;
    out.push_back(kAlphabet[(v >> 18U) & 63U]);
    out.push_back(kAlphabet[(v >> 12U) & 63U]);
    out += "==";
  } else if (rest == 2) {
    const std::uint32_t v = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16U) |
                            (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8U);
    out.push_back(kAlphabet[(v >> 18U) & 63U]);
    out.push_back(kAlphabet[(v >> 12U) & 63U]);
    out.push_back(kAlphabet[(v >> 6U) & 63U]);
    out.push_back('=');
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    std::size_t pad = 0;
    if (last) {
      if (text[i + 3] == '=') pad = text[i + 2] == '=' ? 2 : 1;
    }
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4 - pad; ++k) {
      const int s = sextet(text[i + k]);
      if (s < 0) return std::nullopt;  // includes a '=' anywhere but the final padding
      v |= static_cast<std::uint32_t>(s) << (18U - 6U * k);
    }
    out.push_back(static_cast<char>((v >> 16U) & 0xFFU));
    if (pad == 2) {
      if ((v & 0xFFFFU) != 0) return std::nullopt;  // non-zero unused bits: not canonical
      break;
    }
    out.push_back(static_cast<char>((v >> 8U) & 0xFFU));
    if (pad == 1) {
      if ((v & 0xFFU) != 0) return std::nullopt;
      break;
    }
    out.push_back(static_cast<char>(v & 0xFFU));
  }
  return out;
}

}  // namespace etlc::core
