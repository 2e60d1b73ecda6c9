// SplitMix64: a tiny, fast, well-mixed random generator whose sequence is the same on every platform (the standard
// library's distributions are not). Random-weight models, generated files and benchmark inputs draw from it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace parallm {

struct SplitMix64 {
  uint64_t state;

  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1), 53 bits.
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [-1, 1).
  float Uniform() { return static_cast<float>(static_cast<double>(Next() >> 11) * 0x1.0p-52 - 1.0); }
  // Uniform in [0, n) (modulo bias below 2^-40 for the n used here).
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
};

}  // namespace parallm
