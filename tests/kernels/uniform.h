// Random inputs for the kernel tests: n floats drawn uniformly from [lo, hi) by the test's own seeded generator.
#pragma once

#include <random>
#include <vector>

namespace parallm {

inline std::vector<float> Uniform(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace parallm
