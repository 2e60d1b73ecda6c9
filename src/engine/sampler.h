// Sampler: picks the next token from logits with temperature, top-k, top-p and a seeded RNG.
// (The engine issue extends it with penalties, min-p, logit bias and logprobs.)
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace parallm {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: all
  float top_p = 1.0f;        // 1: all
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}
  // Greedy ties go to the lowest id, so greedy decoding is deterministic.
  int32_t Sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

int32_t ArgMax(std::span<const float> logits);

}  // namespace parallm
