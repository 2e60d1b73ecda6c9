// The requests of an online benchmark: vLLM's "random" dataset (random tokens of chosen lengths, with an
// optional shared prefix) and ShareGPT conversations, built as text when a tokenizer is at hand and as token-id
// lists otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace parallm::bench {

struct ServeRequest {
  std::string prompt;              // text; empty when the prompt is sent as token ids
  std::vector<int32_t> prompt_ids;  // the prompt as token ids (only without a tokenizer)
  int32_t prompt_len = 0;           // tokens (exact with a tokenizer or ids; characters/4 otherwise)
  int32_t output_len = 0;           // max_tokens to ask for
};

struct RandomDatasetOptions {
  int32_t num_prompts = 1000;
  int32_t input_len = 1024;
  int32_t output_len = 128;
  double range_ratio = 0;  // lengths drawn uniformly in [len * (1 - r), len * (1 + r)]
  int32_t prefix_len = 0;  // random tokens shared by every prompt, before its own input_len tokens
  int32_t vocab = 32000;   // ids drawn below this when there is no tokenizer
  uint64_t seed = 0;
};

// Random prompts. With `tokenizer`, each prompt is text that encodes (without special tokens) to its length,
// re-encoding as vLLM does; without one, token ids below `vocab`.
std::vector<ServeRequest> RandomDataset(const RandomDatasetOptions& o, const Tokenizer* tokenizer);

struct ShareGptOptions {
  int32_t num_prompts = 1000;
  int32_t output_len = 0;  // when > 0, every request asks for this many tokens instead of the reply's length
  uint64_t seed = 0;
};

// ShareGPT JSON ([{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}]}]): the first
// human turn is the prompt and the gpt reply that follows sets the output length (tokens with `tokenizer`,
// characters/4 without). Pairs are shuffled with the seed and filtered as vLLM does (prompt and reply at least 4
// tokens, prompt at most 1024, both together at most 2048); fewer than num_prompts valid pairs are cycled.
Result<std::vector<ServeRequest>> ShareGptDataset(const std::string& path, const ShareGptOptions& o,
                                                  const Tokenizer* tokenizer);

}  // namespace parallm::bench
