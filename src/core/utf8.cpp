#include "core/utf8.hpp"

#include <cstdint>

namespace etlc::core {

namespace {

bool is_continuation(unsigned char b) noexcept {
  return (b & 0xC0U) == 0x80U;
}

}  // namespace

std::optional<Utf8Problem> find_utf8_problem(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<unsigned char>(s[i]);
    if (lead < 0x80U) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (lead < 0xC0U) return Utf8Problem{i, "unexpected continuation byte"};
    if (lead < 0xE0U) {
      len = 2;
      cp = lead & 0x1FU;
    } else if (lead < 0xF0U) {
      len = 3;
      cp = lead & 0x0FU;
    } else if (lead < 0xF8U) {
      len = 4;
      cp = lead & 0x07U;
    } else {
      return Utf8Problem{i, "invalid lead byte"};
    }
    for (std::size_t k = 1; k < len; ++k) {
      if (i + k >= s.size()) return Utf8Problem{i, "truncated sequence"};
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (!is_continuation(b)) return Utf8Problem{i, "truncated sequence"};
      cp = (cp << 6U) | (b & 0x3FU);
    }
    // The smallest code point each length may carry; anything below is an overlong form.
    constexpr std::uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLen[len]) return Utf8Problem{i, "overlong encoding"};
    if (cp >= 0xD800U && cp <= 0xDFFFU) return Utf8Problem{i, "surrogate code point"};
    if (cp > 0x10FFFFU) return Utf8Problem{i, "code point above U+10FFFF"};
    i += len;
  }
  return std::nullopt;
}

}  // namespace etlc::core
