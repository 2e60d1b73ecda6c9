// --speculative-config: vLLM's JSON, checked field by field.
#include "cli/speculative_option.h"

#include <boost/json.hpp>

namespace parallm::cli {

Result<SpeculativeConfig> ParseSpeculativeConfig(const std::string& json) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(json, ec);
  if (ec || !v.is_object())
    return Err("--speculative-config must be a JSON object, e.g. '{{\"method\": \"ngram\", \"num_speculative_tokens\": "
               "4}}'");
  SpeculativeConfig config;
  config.num_speculative_tokens = -1;
  bool has_method = false;
  for (const auto& [key, value] : v.as_object()) {
    if (key == "method" || key == "model") {
      // vLLM names the drafter "method": "ngram" (or "[ngram]" as "model" in its older form).
      const std::string name = value.is_string() ? std::string(value.as_string()) : "";
      if (name != "ngram" && name != "[ngram]")
        return Err("--speculative-config: {} \"{}\" is not available: parallm drafts by prompt lookup, \"method\": "
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
      return Err("--speculative-config: unknown field \"{}\" (known: method, num_speculative_tokens, "
                 "prompt_lookup_max, prompt_lookup_min, disable_by_batch_size)", std::string(key));
    if (!value.is_int64()) return Err("--speculative-config: \"{}\" must be an integer", std::string(key));
    *field = static_cast<int32_t>(value.as_int64());
  }
  if (!has_method) return Err("--speculative-config: \"method\" is required (\"ngram\")");
  if (config.num_speculative_tokens < 0) return Err("--speculative-config: \"num_speculative_tokens\" is required");
  if (Status s = config.Validate(); !s.ok()) return s.WithContext("--speculative-config");
  return config;
}

void AddSpeculativeOption(CLI::App* cmd, SpeculativeConfig* config) {
  cmd->add_option_function<std::string>(
         "--speculative-config",
         [config](const std::string& json) {
           Result<SpeculativeConfig> parsed = ParseSpeculativeConfig(json);
           if (!parsed.ok()) throw CLI::ValidationError(parsed.status().message());
           *config = *parsed;
         },
         "Speculative decoding, as vLLM's flag: prompt-lookup drafts of up to K tokens, verified in the request's "
         "next step; the output is the same as without it. "
         "'{\"method\": \"ngram\", \"num_speculative_tokens\": K, \"prompt_lookup_max\": 3, \"prompt_lookup_min\": 1, "
         "\"disable_by_batch_size\": B}' (no drafts while more than B requests run)")
      ->type_name("JSON");
}

}  // namespace parallm::cli
