// SamplingParams: how one request picks its tokens and when it stops (OpenAI field names in comments).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace parallm {

namespace structured {
class CompiledGrammar;
}


struct SamplingParams {
  int32_t max_tokens = 16;          // max_tokens
  float temperature = 0.0f;         // temperature; 0 = greedy
  int32_t top_k = 0;                // top_k; 0 = all
  float top_p = 1.0f;               // top_p; 1 = all
  float min_p = 0.0f;               // min_p: drop tokens below min_p * p(best)
  float repetition_penalty = 1.0f;  // >1 discourages tokens seen in prompt or output (CTRL-style)
  float frequency_penalty = 0.0f;   // frequency_penalty: minus count(token in output) * f
  float presence_penalty = 0.0f;    // presence_penalty: minus p if the token is in the output
  std::unordered_map<int32_t, float> logit_bias;  // logit_bias: added to the raw logits
  std::vector<int32_t> stop_token_ids;            // stop_token_ids (besides EOS)
  std::vector<std::string> stop;                  // stop: strings that end the text (matched by the frontend)
  bool ignore_eos = false;                        // ignore_eos
  int32_t logprobs = -1;            // logprobs: -1 none, 0 the chosen token's, k > 0 also the top k
  int32_t n = 1;                    // n: completions per prompt; the copies share the prompt's KV blocks
  uint64_t seed = 0;                // seed: the request's own RNG stream (copy k of n uses seed + k)
  bool has_seed = false;            // no seed: the engine derives one from the request id
  // skip_special_tokens (vLLM's): special tokens the model writes are left out of the text. The mistral tool
  // parser turns it off, since its [TOOL_CALLS] marker is one. A stop token (EOS, stop_token_ids) is not part of
  // the output, so never of the text.
  bool skip_special_tokens = true;
  // response_format / structured_outputs: the output must follow this grammar (compiled for the model's
  // vocabulary by structured::GrammarCompiler); each step's logits are masked to the tokens it allows, and the
  // request stops once the grammar is complete and nothing may follow.
  std::shared_ptr<const structured::CompiledGrammar> grammar;

  // Checks ranges (temperature >= 0, 0 < top_p <= 1, ...) with errors naming the field.
  Status Validate(int32_t vocab_size) const;
};

}  // namespace parallm
