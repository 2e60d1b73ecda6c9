// ModelText: finding a model's tokenizer and chat template, and the prompt/chat encoding rules.
#include "chat/model_text.h"

#include <filesystem>

#include "formats/gguf.h"
#include "formats/hf_folder.h"
#include "formats/llama2c.h"
#include "util/mapped_file.h"
#include "util/strings.h"

namespace parallm {
namespace fs = std::filesystem;

namespace {

// tokenizer_config.json's chat template, BOS and EOS text, when the file exists.
Status ReadTokenizerConfig(const fs::path& dir, std::optional<std::string>* chat_template, std::string* bos,
                           std::string* eos) {
  const fs::path config_path = dir / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    PARALLM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(config_path.string()));
    PARALLM_ASSIGN_OR_RETURN(boost::json::value v, ParseJson(text, config_path.string()));
    if (v.is_object()) {
      const boost::json::object& o = v.as_object();
      if (o.contains("chat_template")) {
        auto t = chat::ChatTemplateFromConfig(o);
        if (!t.ok()) return t.status().WithContext(config_path.string());
        *chat_template = *t;
      }
      *bos = chat::SpecialTokenFromConfig(o, "bos_token");
      *eos = chat::SpecialTokenFromConfig(o, "eos_token");
    }
  }
  // Newer Hugging Face folders keep the template in its own file.
  const fs::path jinja = dir / "chat_template.jinja";
  if (!*chat_template && fs::exists(jinja)) {
    PARALLM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(jinja.string()));
    *chat_template = text;
  }
  return Status::Ok();
}

}  // namespace

Result<ModelText> ModelText::ForModel(const std::string& model_path, const std::string& tokenizer_path) {
  ModelText t;
  std::optional<std::string> template_source;
  const std::string source = tokenizer_path.empty() ? model_path : tokenizer_path;
  if (StartsWith(source, "synthetic:")) {
    t.missing_ = "synthetic models have no tokenizer; pass --tokenizer";
    return t;
  }
  std::error_code ec;
  if (fs::is_directory(source, ec)) {
    const fs::path json = fs::path(source) / "tokenizer.json";
    if (!fs::exists(json)) {
      t.missing_ = fmt::format("{} has no tokenizer.json", source);
    } else {
      PARALLM_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromTokenizerJson(json.string()));
      t.tokenizer_ = std::make_shared<Tokenizer>(std::move(tok));
    }
    PARALLM_RETURN_IF_ERROR(ReadTokenizerConfig(source, &template_source, &t.bos_token_, &t.eos_token_));
  } else if (EndsWith(source, ".json")) {
    PARALLM_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromTokenizerJson(source));
    t.tokenizer_ = std::make_shared<Tokenizer>(std::move(tok));
    PARALLM_RETURN_IF_ERROR(
        ReadTokenizerConfig(fs::path(source).parent_path(), &template_source, &t.bos_token_, &t.eos_token_));
  } else if (EndsWith(source, ".gguf")) {
    PARALLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(source));
    if (file.Find("tokenizer.ggml.tokens") == nullptr) {
      t.missing_ = fmt::format("{} has no tokenizer.ggml.tokens", source);
    } else {
      PARALLM_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromGguf(file, source));
      t.tokenizer_ = std::make_shared<Tokenizer>(std::move(tok));
    }
    if (auto tmpl = file.GetString("tokenizer.chat_template")) template_source = *tmpl;
  } else if (!tokenizer_path.empty()) {
    // Anything else given explicitly is a llama2.c tokenizer.bin.
    PARALLM_ASSIGN_OR_RETURN(Llama2cTokenizer tok, ReadLlama2cTokenizer(source));
    t.tokenizer_ = std::make_shared<Tokenizer>(Tokenizer::FromLlama2c(tok));
  } else {
    t.missing_ = fmt::format("{} carries no tokenizer; pass --tokenizer (e.g. a llama2.c tokenizer.bin)", source);
  }
  if (t.tokenizer_) {
    if (t.bos_token_.empty() && t.tokenizer_->bos_id() >= 0) t.bos_token_ = t.tokenizer_->TokenText(t.tokenizer_->bos_id());
    if (t.eos_token_.empty() && t.tokenizer_->eos_id() >= 0) t.eos_token_ = t.tokenizer_->TokenText(t.tokenizer_->eos_id());
  }
  if (template_source) {
    auto parsed = chat::ChatTemplate::Parse(*template_source);
    if (!parsed.ok()) return parsed.status().WithContext(fmt::format("{}: chat template", source));
    t.chat_template_ = std::move(*parsed);
  } else {
    t.missing_template_ = fmt::format(
        "{} has no chat template; send a plain prompt instead of messages, or give one with --chat-template", source);
  }
  return t;
}

Status ModelText::SetChatTemplate(const std::string& source, const std::string& label) {
  auto parsed = chat::ChatTemplate::Parse(source);
  if (!parsed.ok()) return parsed.status().WithContext(fmt::format("{}: chat template", label));
  chat_template_ = std::move(*parsed);
  return Status::Ok();
}

Result<std::vector<int32_t>> ModelText::EncodePrompt(const std::string& text) const {
  if (!tokenizer_) return Status::Error(missing_);
  return tokenizer_->Encode(text, /*add_special=*/true, /*parse_special=*/true);
}

Result<std::string> ModelText::RenderChat(const boost::json::array& messages, const boost::json::object& extra) const {
  if (!chat_template_) return Status::Error(missing_template_);
  if (messages.empty()) return Err("messages is empty");
  boost::json::object context = extra;
  context["messages"] = messages;
  if (!context.contains("add_generation_prompt")) context["add_generation_prompt"] = true;
  if (!bos_token_.empty() && !context.contains("bos_token")) context["bos_token"] = bos_token_;
  if (!eos_token_.empty() && !context.contains("eos_token")) context["eos_token"] = eos_token_;
  return chat_template_->Render(context);
}

Result<std::vector<int32_t>> ModelText::EncodeChat(const boost::json::array& messages,
                                                   const boost::json::object& extra) const {
  if (!tokenizer_) return Status::Error(missing_);
  PARALLM_ASSIGN_OR_RETURN(std::string prompt, RenderChat(messages, extra));
  return tokenizer_->Encode(prompt, /*add_special=*/false, /*parse_special=*/true);
}

std::string ModelText::Decode(std::span<const int32_t> ids) const {
  if (!tokenizer_) return "";
  return tokenizer_->Decode(ids, /*skip_special=*/true);
}

}  // namespace parallm
