// The simulator's only source of randomness: xoshiro256** seeded through splitmix64.
//
// Everything random in a run (the fleet's shape, member scheduling, watch delivery, every fault,
// the source's pace) is drawn from streams forked from one seed, so a seed reproduces a run event
// for event. The distributions are written out here (not <random>'s, whose algorithms differ
// between standard libraries) so a seed means the same run with any compiler.
//
// Not thread-safe: the simulator is single-threaded.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace etlc::sim {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    std::uint64_t x = seed;
    for (auto& word : s_) word = splitmix64(x);
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n); n == 0 returns 0. Rejection sampling: no modulo bias.
  std::uint64_t below(std::uint64_t n) {
    if (n == 0) return 0;
    const std::uint64_t limit =
        std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
    std::uint64_t x = next();
    while (x >= limit) x = next();
    return x % n;
  }

  // Uniform in [lo, hi] (inclusive); hi < lo returns lo.
  std::int64_t range(std::int64_t lo, std::int64_t hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
  }

  // Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  bool chance(double p) { return p > 0 && unit() < p; }

  // Exponentially distributed waiting time of a Poisson process of `rate_per_s` events per
  // second, in nanoseconds (capped at an hour; rate 0 never fires).
  std::int64_t exponential_ns(double rate_per_s) {
    constexpr std::int64_t kHourNs = 3'600'000'000'000;
    if (rate_per_s <= 0) return kHourNs;
    // -ln(1-u)/rate, with ln computed by the standard library on doubles: deterministic for a
    // given binary, which is all a seed promises.
    const double u = unit();
    const double s = -log1m(u) / rate_per_s;
    const double ns = s * 1e9;
    return ns >= static_cast<double>(kHourNs) ? kHourNs : static_cast<std::int64_t>(ns) + 1;
  }

  // An independent stream derived from this one's seed and a stream number.
  static Rng stream(std::uint64_t seed, std::uint64_t stream_no) {
    std::uint64_t x = seed ^ (0x9e3779b97f4a7c15ULL * (stream_no + 1));
    return Rng(splitmix64(x));
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  static double log1m(double u) { return std::log1p(-u); }  // ln(1 - u)

  std::uint64_t s_[4];
};

}  // namespace etlc::sim
