// --max-model-len and --chat-template: their help text, and loading with them applied.
#include "cli/model_options.h"

#include <cstdio>
#include <filesystem>

#include "model/synthetic_model.h"
#include "util/mapped_file.h"

namespace parallm::cli {

void AddMaxModelLenOption(CLI::App* cmd, int* max_model_len) {
  cmd->add_option("--max-model-len", *max_model_len,
                  "Context length in tokens (prompt + output), overriding the model file's declared context (a "
                  "warning when above the context it was trained with)")
      ->check(CLI::PositiveNumber);
}

void AddChatTemplateOption(CLI::App* cmd, std::string* chat_template) {
  cmd->add_option("--chat-template", *chat_template,
                  "Chat template to use instead of the model's (or for a model without one): a .jinja file, or the "
                  "template text itself");
}

Result<std::unique_ptr<Model>> LoadModelForCommand(const std::string& spec, int max_model_len) {
  PARALLM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelSpec(spec));
  if (max_model_len > 0) {
    const int trained = model->config().context_length;
    if (max_model_len > trained)
      std::fprintf(stderr,
                   "warning: --max-model-len %d is more than the %d tokens of context %s declares; positions past "
                   "%d are beyond what the model was trained on and its output there may degrade\n",
                   max_model_len, trained, spec.c_str(), trained);
    model->OverrideContextLength(max_model_len);
  }
  return model;
}

Result<ModelText> LoadModelTextForCommand(const std::string& model, const std::string& tokenizer,
                                          const std::string& chat_template) {
  PARALLM_ASSIGN_OR_RETURN(ModelText text, ModelText::ForModel(model, tokenizer));
  if (chat_template.empty()) return text;
  std::error_code ec;
  if (std::filesystem::is_regular_file(chat_template, ec)) {
    PARALLM_ASSIGN_OR_RETURN(std::string source, ReadTextFile(chat_template));
    PARALLM_RETURN_IF_ERROR(text.SetChatTemplate(source, chat_template));
  } else if (chat_template.find_first_of("{}\n") != std::string::npos) {
    // As vLLM: what is not a file but looks like Jinja is the template itself.
    PARALLM_RETURN_IF_ERROR(text.SetChatTemplate(chat_template, "--chat-template"));
  } else {
    return Err("--chat-template {}: no such file, and not template text (it has no '{{' or '}}')", chat_template);
  }
  return text;
}

}  // namespace parallm::cli
