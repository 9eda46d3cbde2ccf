// See stable_hash.hpp for the normative algorithm; this file must match it bit for bit.
#include "core/stable_hash.hpp"

#include <bit>
#include <cstddef>
#include <cstring>

namespace etlc::core {

namespace {
constexpr std::uint64_t kLengthMultiplier = 0x9e3779b97f4a7c15ULL;
constexpr std::uint64_t kFinalXor = 0xc2b2ae3d27d4eb4fULL;

inline std::uint64_t mix(std::uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

}  // namespace

std::uint64_t fmix64(std::uint64_t x) noexcept {
  return mix(x);
}

std::uint64_t stable_hash64(std::uint64_t seed, std::string_view bytes) noexcept {
  const std::size_t n = bytes.size();
  std::uint64_t h = seed ^ (static_cast<std::uint64_t>(n) * kLengthMultiplier);
  std::size_t i = 0;
  if constexpr (std::endian::native == std::endian::little) {
    // Fast path for full chunks: on a little-endian host a plain load IS the little-endian
    // assembly the algorithm defines.
    for (; n - i >= 8; i += 8) {
      std::uint64_t c;
      std::memcpy(&c, bytes.data() + i, 8);
      h = mix(h ^ c);
    }
  }
  for (; i < n; i += 8) {
    // Assemble the chunk byte by byte: little-endian by definition, whatever the host is.
    std::uint64_t c = 0;
    const std::size_t end = (n - i < 8) ? n : i + 8;
    for (std::size_t k = i; k < end; ++k) {
      c |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[k])) << (8 * (k - i));
    }
    h = mix(h ^ c);
  }
  return mix(h ^ kFinalXor);
}

}  // namespace etlc::core
