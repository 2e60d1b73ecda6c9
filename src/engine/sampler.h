// Sampler: picks one request's next token from its logits: logit bias and penalties, then greedy, or
// temperature -> top-k -> top-p -> min-p and a draw from the request's own seeded RNG. Everything depends
// only on the request's logits, its tokens so far and its seed, never on the batch (batch invariance).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sampling_params.h"
#include "kernels/ops.h"  // ArgMax: the greedy pick

namespace parallm {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0;                 // of the chosen token under the model's distribution (before processing)
  std::vector<TokenLogprob> top;     // the `logprobs` most likely, when asked
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // `logits` is modified in place (bias, penalties, temperature). `prompt` and `output` are the request's
  // tokens so far, for the penalties. `allowed` (when not empty): a bitmask (bit t of word t / 32) of the tokens
  // that may be chosen (a grammar's mask); the others get -inf before anything else (logprobs stay the model's).
  SampleResult Sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output,
                      std::span<const uint32_t> allowed = {});

 private:
  // Draws from softmax(logits) truncated by top-k, top-p and min-p, with the request's RNG.
  int32_t Draw(std::span<const float> logits);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // (weight, token), best first
  std::vector<float> weights_;  // exp(logit - max) per token
  std::vector<float> raw_;      // the logits as the model gave them, when logprobs are asked
  std::unordered_map<int32_t, int32_t> counts_;
};

// Sets the logits of the tokens whose bit in `allowed` is clear (and of all ids past its end) to -inf.
void ApplyTokenMask(std::span<float> logits, std::span<const uint32_t> allowed);

}  // namespace parallm
