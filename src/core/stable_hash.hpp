// A stable 64-bit hash for tie-breaks that must never change.
//
// The leader breaks ties in the work assignment with this hash, keyed by the job's seed (its
// fingerprint). If the hash changed between releases or differed between platforms, a leader
// upgrade or a failover onto another architecture would re-break every tie and churn the fleet
// for nothing. So the algorithm is fully specified here, independent of endianness, word size,
// compiler and standard library, and pinned by known-answer tests (tests/unit/assignment_test.cpp).
// Changing a single output is a breaking change of the assignment contract.
//
// Algorithm (all arithmetic on unsigned 64-bit integers, modulo 2^64):
//
//   fmix64(x):  x ^= x >> 33;  x *= 0xff51afd7ed558ccd;
//               x ^= x >> 33;  x *= 0xc4ceb9fe1a85ec53;
//               x ^= x >> 33;  return x
//
//   stable_hash64(seed, bytes of length n):
//     h = seed ^ (n * 0x9e3779b97f4a7c15)
//     for each chunk of 8 bytes b[i .. i+8) (the last one may be shorter):
//       c = b[i] | b[i+1] << 8 | ... | b[i+7] << 56   (little-endian; missing bytes are 0)
//       h = fmix64(h ^ c)
//     return fmix64(h ^ 0xc2b2ae3d27d4eb4f)
//
// The length enters the initial state, so zero padding of the last chunk is unambiguous ("a" and
// "a\0" differ). fmix64 is a bijection with full avalanche, which is all a tie-break needs. This is
// NOT a cryptographic hash: it is for spreading ties, not for resisting an adversary.
#pragma once

#include <cstdint>
#include <string_view>

namespace etlc::core {

// The finalizer above. Pure; thread-safe.
std::uint64_t fmix64(std::uint64_t x) noexcept;

// The hash above. Pure; thread-safe; identical on every platform and every release.
std::uint64_t stable_hash64(std::uint64_t seed, std::string_view bytes) noexcept;

}  // namespace etlc::core
