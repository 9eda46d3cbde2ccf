// UTF-8 validation for ids and record text (pure; no allocation on the validation path).
//
// Valid means well-formed per RFC 3629 / Unicode 15 table 3-7: no overlong forms, no surrogate
// code points (U+D800..U+DFFF), nothing above U+10FFFF, no stray continuation bytes, no
// sequence cut short by the end of the input.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace etlc::core {

// The first place `s` breaks UTF-8: the byte offset of the offending sequence's first byte and
// the rule it breaks (a static string such as "overlong encoding").
struct Utf8Problem {
  std::size_t offset = 0;
  std::string_view rule;
};

// nullopt if `s` is valid UTF-8 (the empty string is valid).
std::optional<Utf8Problem> find_utf8_problem(std::string_view s) noexcept;

inline bool is_valid_utf8(std::string_view s) noexcept {
  return !find_utf8_problem(s);
}

}  // namespace etlc::core
