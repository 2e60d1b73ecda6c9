// Speculation: the prompt-lookup draft, and its configuration read from vLLM's JSON and checked.
#include "engine/speculation.h"

#include <algorithm>
#include <string>

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
  std::string method, model;
  for (const auto& [key, value] : v.as_object()) {
    if (key == "method" || key == "model") {
      if (!value.is_string() || value.as_string().empty())
        return Err("\"{}\" must be a non-empty string", std::string(key));
      (key == "method" ? method : model) = std::string(value.as_string());
      continue;
    }
    int32_t* field = key == "num_speculative_tokens" ? &config.num_speculative_tokens
                     : key == "prompt_lookup_max"    ? &config.prompt_lookup_max
                     : key == "prompt_lookup_min"    ? &config.prompt_lookup_min
                     : key == "disable_by_batch_size" ? &config.disable_by_batch_size
                                                      : nullptr;
    if (field == nullptr)
      return Err("unknown field \"{}\" (known: method, model, num_speculative_tokens, "
                 "prompt_lookup_max, prompt_lookup_min, disable_by_batch_size)", std::string(key));
    if (!value.is_int64()) return Err("\"{}\" must be an integer", std::string(key));
    *field = static_cast<int32_t>(value.as_int64());
  }
  // vLLM names prompt lookup "method": "ngram" (or "model": "[ngram]" in its older form); a "model" that is a path
  // or a synthetic spec is a draft model, with "method": "draft_model" or no method at all.
  if (model == "[ngram]") {
    if (!method.empty() && method != "ngram") return Err("\"model\": \"[ngram]\" is prompt lookup, not \"{}\"", method);
    method = "ngram";
    model.clear();
  }
  if (method.empty() && !model.empty()) method = "draft_model";
  if (method.empty()) return Err("\"method\" is required (\"ngram\"), or \"model\" (a draft model)");
  if (method == "ngram") {
    if (!model.empty()) return Err("\"method\": \"ngram\" drafts by prompt lookup and takes no \"model\"");
    config.method = SpeculativeConfig::Method::kNgram;
  } else if (method == "draft_model") {
    if (model.empty()) return Err("\"method\": \"draft_model\" needs \"model\": the draft model's path");
    config.method = SpeculativeConfig::Method::kDraftModel;
    config.model = model;
  } else {
    return Err("method \"{}\" is not available: parallm drafts by prompt lookup (\"method\": \"ngram\") or with a "
               "draft model (\"model\": PATH)", method);
  }
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
