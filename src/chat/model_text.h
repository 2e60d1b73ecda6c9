// ModelText: a model's text side, found beside its weights: the tokenizer (tokenizer.json in a Hugging Face /
// MLX folder, tokenizer.ggml.* in a GGUF file, or one given explicitly) and the chat template
// (tokenizer_config.json, chat_template.jinja, or tokenizer.chat_template in GGUF). Turns prompts and chat
// messages into token ids and ids back into text.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace parallm {

class ModelText {
 public:
  // `model_path`: a .gguf file, a folder, a llama2.c .bin or a synthetic:... spec. `tokenizer_path` (optional)
  // overrides where the tokenizer comes from: a tokenizer.json, a folder holding one, a llama2.c tokenizer.bin or
  // a .gguf file. A model with no tokenizer still loads: text methods then fail with `missing()`.
  static Result<ModelText> ForModel(const std::string& model_path, const std::string& tokenizer_path = "");

  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  bool has_chat_template() const { return chat_template_.has_value(); }
  // The chat template's Jinja text ("" without one): what --tool-call-parser is detected from.
  std::string_view chat_template_source() const {
    // Both branches a string_view: a ternary of `const std::string&` and "" would copy into a temporary string.
    return chat_template_ ? std::string_view(chat_template_->source()) : std::string_view();
  }
  // Replaces the model's chat template (or gives one to a model without): `source` is Jinja text, `label` names it
  // in errors (e.g. the file it came from). A syntax error leaves the old template in place.
  Status SetChatTemplate(const std::string& source, const std::string& label);
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  std::shared_ptr<const Tokenizer> shared_tokenizer() const { return tokenizer_; }

  // A plain prompt: BOS/EOS as the tokenizer's configuration says, special-token text parsed (as vLLM and
  // transformers tokenize prompts).
  Result<std::vector<int32_t>> EncodePrompt(const std::string& text) const;
  // Chat messages through the chat template (add_generation_prompt true, bos_token/eos_token, `extra` such as
  // tools merged in), then encoded without adding BOS/EOS again (the template writes them).
  Result<std::string> RenderChat(const boost::json::array& messages, const boost::json::object& extra = {}) const;
  Result<std::vector<int32_t>> EncodeChat(const boost::json::array& messages, const boost::json::object& extra = {}) const;
  // Generated text, special tokens skipped.
  std::string Decode(std::span<const int32_t> ids) const;

  // Why there is no tokenizer / template (for error messages).
  const std::string& missing() const { return missing_; }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::optional<chat::ChatTemplate> chat_template_;
  std::string bos_token_, eos_token_;
  std::string missing_ = "no tokenizer";
  std::string missing_template_ = "no chat template";
};

}  // namespace parallm
