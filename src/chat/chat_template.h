// Chat templates: turns an OpenAI-style message list into a model's prompt text with the model's own Jinja
// template, rendering exactly as @huggingface/jinja (and so transformers.js) does.
//
// Scope: everything @huggingface/jinja 0.5.11 supports, with its quirks kept on purpose (e.g. `true` prints as
// "true", `s.strip('x')` trims whitespace, `x is iterable` is false for mappings), because prompts must match
// what the reference produces byte for byte. Error messages need not match; failing when it fails must.
// Extensions (Jinja2 features the reference rejects, so no template it accepts changes meaning): the filters
// `d`, bare `default`, `round`, `escape`/`e`; the string methods count, find, format; tests with an argument
// (`is divisibleby(3)`, `is eq 2`, sameas, ne, in).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "chat/jinja_ast.h"
#include "chat/jinja_interpreter.h"
#include "util/status.h"

namespace parallm::chat {

class ChatTemplate {
 public:
  // Parses once; a syntax error names the construct and its line:column.
  static Result<ChatTemplate> Parse(std::string source);

  // Renders with `context` as the template's variables (messages, tools, add_generation_prompt, bos_token...).
  // Thread-safe: a ChatTemplate is immutable and each render has its own scopes.
  Result<std::string> Render(const boost::json::object& context) const { return Render(context, RenderOptions{}); }
  // `options.now` pins what strftime_now() sees (tests and golden files use this).
  Result<std::string> Render(const boost::json::object& context, const RenderOptions& options) const;

  const std::string& source() const { return program_->source; }

 private:
  explicit ChatTemplate(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

// Parses and renders in one go with context {messages, ...extra}. As transformers does, add_generation_prompt
// is false unless `extra` says otherwise. `extra` must not contain "messages".
Result<std::string> ApplyChatTemplate(const std::string& template_source, const boost::json::array& messages,
                                      const boost::json::object& extra, const RenderOptions& options = {});

// The chat template of a tokenizer_config.json: `chat_template` is either a string or a list of
// {name, template}; `name` picks from the list ("default" when absent, or the only entry).
Result<std::string> ChatTemplateFromConfig(const boost::json::object& config, std::string_view name = "default");
// A special token of a tokenizer_config.json (e.g. "bos_token"): a string, or an AddedToken object's `content`.
// Empty when absent or null.
std::string SpecialTokenFromConfig(const boost::json::object& config, std::string_view key);

}  // namespace parallm::chat
