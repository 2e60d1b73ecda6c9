// --speculative-config: the flag and its help.
#include "cli/speculative_option.h"

namespace parallm::cli {

void AddSpeculativeOption(CLI::App* cmd, SpeculativeConfig* config) {
  CLI::Option* json = cmd->add_option_function<std::string>(
         "--speculative-config",
         [config](const std::string& json) {
           Result<SpeculativeConfig> parsed = ParseSpeculativeConfig(json);
           if (!parsed.ok()) throw CLI::ValidationError("--speculative-config: " + parsed.status().message());
           *config = *parsed;
         },
         "Speculative decoding, as vLLM's flag: drafts of up to K tokens, verified in the request's next step; the "
         "output is the same as without it. Prompt lookup: '{\"method\": \"ngram\", \"num_speculative_tokens\": K, "
         "\"prompt_lookup_max\": 3, \"prompt_lookup_min\": 1, \"disable_by_batch_size\": B}' (no drafts while more "
         "than B requests run); a draft model with the target's vocabulary: '{\"model\": PATH, "
         "\"num_speculative_tokens\": K}' (a file, folder or synthetic spec)")
      ->type_name("JSON");
  // vLLM's older flags for a draft model.
  CLI::Option* model = cmd->add_option_function<std::string>(
         "--speculative-model",
         [config](const std::string& path) {
           config->method = SpeculativeConfig::Method::kDraftModel;
           config->model = path;
         },
         "Draft model for speculative decoding (vLLM's older flag; with --num-speculative-tokens): as "
         "--speculative-config '{\"model\": PATH, \"num_speculative_tokens\": K}'")
      ->type_name("PATH");
  CLI::Option* k = cmd->add_option_function<int>(
         "--num-speculative-tokens",
         [config](int tokens) {
           config->num_speculative_tokens = tokens;
           if (Status st = config->Validate(); !st.ok()) throw CLI::ValidationError("--num-speculative-tokens: " + st.message());
         },
         "Draft tokens per step with --speculative-model")
      ->type_name("K");
  model->needs(k)->excludes(json);
  k->needs(model)->excludes(json);
}

}  // namespace parallm::cli
