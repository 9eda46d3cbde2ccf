#include "cut.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace pgb {

namespace {

constexpr std::string_view kHi = "hi=";

std::optional<std::int64_t> parse_id(std::string_view t) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_hi(std::string_view t) {
  if (t.substr(0, kHi.size()) != kHi) return std::nullopt;
  return parse_id(t.substr(kHi.size()));
}

// Key distances in unsigned arithmetic: last - first may exceed INT64_MAX (a range from INT64_MIN).
std::uint64_t distance(std::int64_t from, std::int64_t to) {
  return static_cast<std::uint64_t>(to) - static_cast<std::uint64_t>(from);
}

}  // namespace

std::string encode_state(const LaneState& s) {
  std::string out = s.last ? std::to_string(*s.last) : "";
  if (s.hi) {
    if (!out.empty()) out += ' ';
    out += kHi;
    out += std::to_string(*s.hi);
  }
  return out;
}

std::optional<LaneState> decode_state(std::string_view t) {
  if (t.empty()) return LaneState{};
  const auto sp = t.find(' ');
  if (sp == std::string_view::npos) {
    if (auto hi = parse_hi(t)) return LaneState{std::nullopt, hi};
    if (auto last = parse_id(t)) return LaneState{last, std::nullopt};
    return std::nullopt;
  }
  auto last = parse_id(t.substr(0, sp));
  auto hi = parse_hi(t.substr(sp + 1));
  if (!last || !hi) return std::nullopt;
  return LaneState{last, hi};
}

std::optional<std::int64_t> cut_point(std::int64_t first, std::int64_t last, double keep) {
  if (!(keep > 0 && keep < 1) || first >= last) return std::nullopt;
  // long double holds every uint64 exactly on x86-64 and AArch64; the second bound keeps the
  // conversion below defined where it does not.
  constexpr long double kTwo64 = 18446744073709551616.0L;
  const std::uint64_t span = distance(first, last);  // ids - 1
  const long double kept = std::ceil(static_cast<long double>(keep) * (span + 1.0L));
  if (kept > static_cast<long double>(span) || kept >= kTwo64) return std::nullopt;
  const std::uint64_t k = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(kept));
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(first) + k);
}

std::uint64_t residual_rows(std::uint64_t remaining, std::int64_t first, std::int64_t last,
                            std::int64_t cut) {
  const long double share =
      (distance(cut, last) + 1.0L) / (static_cast<long double>(distance(first, last)) + 1.0L);
  const auto rows = static_cast<std::uint64_t>(std::round(share * remaining));
  return std::clamp<std::uint64_t>(rows, 1, remaining >= 2 ? remaining - 1 : 1);
}

}  // namespace pgb
