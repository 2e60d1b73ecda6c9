// Speculation: the prompt-lookup draft and its configuration's checks.
#include "engine/speculation.h"

#include <algorithm>

namespace parallm {

Status SpeculativeConfig::Validate() const {
  if (num_speculative_tokens < 0 || num_speculative_tokens > 64)
    return Err("num_speculative_tokens must be in [0, 64], got {}", num_speculative_tokens);
  if (prompt_lookup_min < 1) return Err("prompt_lookup_min must be at least 1, got {}", prompt_lookup_min);
  if (prompt_lookup_max < prompt_lookup_min)
    return Err("prompt_lookup_max ({}) must be at least prompt_lookup_min ({})", prompt_lookup_max, prompt_lookup_min);
  if (disable_by_batch_size < 0) return Err("disable_by_batch_size must be >= 0, got {}", disable_by_batch_size);
  return Status::Ok();
}

std::vector<int32_t> ProposeNgramDraft(std::span<const int32_t> tokens, const SpeculativeConfig& config,
                                       int32_t max_tokens) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0) return {};
  for (int64_t n = std::min<int64_t>(config.prompt_lookup_max, len - 1); n >= config.prompt_lookup_min; --n) {
    const std::span<const int32_t> suffix = tokens.last(static_cast<size_t>(n));
    // The earliest occurrence before the suffix itself, as vLLM's proposer takes it: it has the longest
    // continuation (a recent one runs into the end of the context and yields a short draft).
    for (int64_t start = 0; start + n < len; ++start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max_tokens, len - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + count);
    }
  }
  return {};
}

}  // namespace parallm
