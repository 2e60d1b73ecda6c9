// Speculation: the configuration of speculative decoding, and prompt-lookup (n-gram) drafting. A decoding request
// drafts tokens, by prompt lookup (its last tokens occurred earlier in its own context: the tokens that followed them
// there) or from a smaller draft model (engine/draft_model.h); the engine computes the draft in the same step as the
// request's next token and keeps the longest prefix its sampler agrees with.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/status.h"

namespace parallm {

// vLLM's --speculative-config: method "ngram" (prompt lookup) or "draft_model". num_speculative_tokens = 0 turns it
// off.
struct SpeculativeConfig {
  enum class Method { kNgram, kDraftModel };
  Method method = Method::kNgram;
  // kDraftModel: the draft model's file, folder or synthetic spec (loaded by LoadDraftModel, engine/draft_model.h).
  std::string model;
  int32_t num_speculative_tokens = 0;  // draft tokens per step at most
  int32_t prompt_lookup_min = 1;       // the shortest suffix n-gram matched
  int32_t prompt_lookup_max = 3;       // the longest, tried first
  // No drafts in a step when more requests than this are running (0: never disabled): a batch that already
  // saturates the cores gains nothing from extra tokens per sequence.
  int32_t disable_by_batch_size = 0;

  bool enabled() const { return num_speculative_tokens > 0; }
  bool uses_draft_model() const { return enabled() && method == Method::kDraftModel; }
  // Ranges, with errors naming the field.
  Status Validate() const;
};

// Parses vLLM's speculative config JSON: {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": N,
// "prompt_lookup_min": M, "disable_by_batch_size": B}, or {"model": PATH, "num_speculative_tokens": K} for a draft
// model ("method": "draft_model" may be given; "model": "[ngram]" is vLLM's older spelling of prompt lookup). Errors
// name the field; unknown fields and other methods are refused.
Result<SpeculativeConfig> ParseSpeculativeConfig(const std::string& json);

// Up to `max_tokens` draft tokens for a request whose tokens so far are `tokens`: for n from prompt_lookup_max
// down to prompt_lookup_min, the earliest earlier occurrence of the last n tokens; the draft is what followed it
// (cut at the end of `tokens`). Empty when no suffix n-gram recurs. Depends only on `tokens`, never on the batch.
std::vector<int32_t> ProposeNgramDraft(std::span<const int32_t> tokens, const SpeculativeConfig& config,
                                       int32_t max_tokens);

}  // namespace parallm
