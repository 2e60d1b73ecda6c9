// Speculation: the prompt-lookup draft, and its configuration read from vLLM's JSON and checked.
#include "engine/speculation.h"

#include <algorithm>

#include <boost/json.hpp>

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

Result<SpeculativeConfig> ParseSpeculativeConfig(const std::string& json) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(json, ec);
  if (ec || !v.is_object())
    return Err("the speculative config must be a JSON object, e.g. '{{\"method\": \"ngram\", \"num_speculative_tokens\": "
               "4}}'");
  SpeculativeConfig config;
  config.num_speculative_tokens = -1;
  bool has_method = false;
  for (const auto& [key, value] : v.as_object()) {
    if (key == "method" || key == "model") {
      // vLLM names the drafter "method": "ngram" (or "[ngram]" as "model" in its older form).
      const std::string name = value.is_string() ? std::string(value.as_string()) : "";
      if (name != "ngram" && name != "[ngram]")
        return Err("{} \"{}\" is not available: parallm drafts by prompt lookup, \"method\": "
                   "\"ngram\"", std::string(key), name);
      has_method = true;
      continue;
    }
    int32_t* field = key == "num_speculative_tokens" ? &config.num_speculative_tokens
                     : key == "prompt_lookup_max"    ? &config.prompt_lookup_max
                     : key == "prompt_lookup_min"    ? &config.prompt_lookup_min
                     : key == "disable_by_batch_size" ? &config.disable_by_batch_size
                                                      : nullptr;
    if (field == nullptr)
      return Err("unknown field \"{}\" (known: method, num_speculative_tokens, "
                 "prompt_lookup_max, prompt_lookup_min, disable_by_batch_size)", std::string(key));
    if (!value.is_int64()) return Err("\"{}\" must be an integer", std::string(key));
    *field = static_cast<int32_t>(value.as_int64());
  }
  if (!has_method) return Err("\"method\" is required (\"ngram\")");
  if (config.num_speculative_tokens < 0) return Err("\"num_speculative_tokens\" is required");
  if (Status s = config.Validate(); !s.ok()) return s;
  return config;
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
