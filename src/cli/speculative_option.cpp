// --speculative-config: the flag and its help.
#include "cli/speculative_option.h"

namespace parallm::cli {

void AddSpeculativeOption(CLI::App* cmd, SpeculativeConfig* config) {
  cmd->add_option_function<std::string>(
         "--speculative-config",
         [config](const std::string& json) {
           Result<SpeculativeConfig> parsed = ParseSpeculativeConfig(json);
           if (!parsed.ok()) throw CLI::ValidationError("--speculative-config: " + parsed.status().message());
           *config = *parsed;
         },
         "Speculative decoding, as vLLM's flag: prompt-lookup drafts of up to K tokens, verified in the request's "
         "next step; the output is the same as without it. "
         "'{\"method\": \"ngram\", \"num_speculative_tokens\": K, \"prompt_lookup_max\": 3, \"prompt_lookup_min\": 1, "
         "\"disable_by_batch_size\": B}' (no drafts while more than B requests run)")
      ->type_name("JSON");
}

}  // namespace parallm::cli
