// Structured-output benchmark: the token-mask cost per generated token over a corpus of JSON Schemas on a real
// vocabulary (Qwen's 151K), and aggregate decode with N constrained requests against N unconstrained ones.
#pragma once

#include <string>
#include <vector>

#include <boost/json.hpp>

#include "engine/llm.h"
#include "tokenizer/tokenizer.h"

namespace parallm::bench {

struct MaskBenchOptions {
  int32_t vocab_size = 0;  // the logits width (>= the tokenizer's size)
  int32_t max_steps = 64;  // tokens per simulated request
  int32_t walks = 2;       // requests per schema: the first meets every state cold, later ones share the caches
  uint64_t seed = 1;
};

// For each schema: compile it (timed), then `walks` simulated requests that each pick a random allowed token per
// step (seeded) until the grammar ends or max_steps. Each step times the mask (Mask + EOS bits into the request's
// buffer), masking a row of logits, and advancing by the token. Prints a table; returns
// {"benchmark": "structured-mask", "schemas", "steps", "compile_ms": {median, p99}, "mask_us": {...},
// "apply_us": {...}, "accept_us": {...}, "step_us": {...}, "cold_step_us": {...}, "warm_step_us": {...},
// "completed": walks that reached the end of their grammar}.
Result<boost::json::object> RunMaskBenchmark(const Tokenizer& tokenizer, const std::vector<std::string>& schemas,
                                             const MaskBenchOptions& options);

// `prompts` through `llm` twice, both greedy: unconstrained (ignore_eos, max_tokens
// matched to the constrained twin's length) and with schema i % schemas as the grammar (a random model then walks
// its grammar). Returns
// {"benchmark": "structured-decode", "requests", "unconstrained": {...}, "constrained": {...},
// "decode_tps_ratio"}.
Result<boost::json::object> RunConstrainedDecodeBenchmark(LLM& llm, const Tokenizer& tokenizer,
                                                          const std::vector<std::string>& schemas,
                                                          const std::vector<std::vector<int32_t>>& prompts,
                                                          int32_t max_tokens);

}  // namespace parallm::bench
