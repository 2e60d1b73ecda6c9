// The model-side flags every command that loads a model shares, as vLLM and llama.cpp name them:
// --max-model-len (the context to serve, overriding the file's) and --chat-template (a template for a model
// without one, or instead of its own); and loading a model and its text side with them applied.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "chat/model_text.h"
#include "model/model.h"

namespace parallm::cli {

void AddMaxModelLenOption(CLI::App* cmd, int* max_model_len);
void AddChatTemplateOption(CLI::App* cmd, std::string* chat_template);

// A model file, folder or synthetic spec. With max_model_len > 0 the model serves that many tokens of context
// whatever its file declares; above the trained context a warning says so on stderr.
Result<std::unique_ptr<Model>> LoadModelForCommand(const std::string& spec, int max_model_len);

// The model's tokenizer and chat template (ModelText::ForModel), then --chat-template when given: the path of a
// template file (.jinja), or the template text itself.
Result<ModelText> LoadModelTextForCommand(const std::string& model, const std::string& tokenizer,
                                          const std::string& chat_template);

}  // namespace parallm::cli
