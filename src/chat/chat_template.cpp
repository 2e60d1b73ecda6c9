// Chat templates: parse once, render per request, plus reading templates and special tokens out of
// tokenizer_config.json.
#include "chat/chat_template.h"

#include "chat/jinja_parser.h"

namespace parallm::chat {

Result<ChatTemplate> ChatTemplate::Parse(std::string source) {
  PARALLM_ASSIGN_OR_RETURN(std::shared_ptr<const Program> program, ParseTemplate(std::move(source)));
  return ChatTemplate(std::move(program));
}

Result<std::string> ChatTemplate::Render(const boost::json::object& context, const RenderOptions& options) const {
  Interpreter interpreter(*program_, options);
  return interpreter.Render(context);
}

Result<std::string> ApplyChatTemplate(const std::string& template_source, const boost::json::array& messages,
                                      const boost::json::object& extra, const RenderOptions& options) {
  if (extra.contains("messages")) return Err("ApplyChatTemplate: pass the messages separately, not in `extra`");
  PARALLM_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::Parse(template_source));
  boost::json::object context;
  context["messages"] = messages;
  for (const auto& kv : extra) context[kv.key()] = kv.value();
  if (!context.contains("add_generation_prompt")) context["add_generation_prompt"] = false;
  return tmpl.Render(context, options);
}

Result<std::string> ChatTemplateFromConfig(const boost::json::object& config, std::string_view name) {
  const boost::json::value* tmpl = config.if_contains("chat_template");
  if (!tmpl || tmpl->is_null()) return Err("tokenizer config has no chat_template");
  if (tmpl->is_string()) return std::string(tmpl->get_string());
  if (!tmpl->is_array()) return Err("tokenizer config: chat_template is neither a string nor a list");
  const boost::json::array& list = tmpl->get_array();
  for (const auto& entry : list) {
    const boost::json::object* obj = entry.if_object();
    if (!obj) return Err("tokenizer config: chat_template list entries must be objects");
    const boost::json::value* n = obj->if_contains("name");
    const boost::json::value* t = obj->if_contains("template");
    if (n && n->is_string() && n->get_string() == name && t && t->is_string()) return std::string(t->get_string());
  }
  if (list.size() == 1 && list[0].is_object()) {
    const boost::json::value* t = list[0].get_object().if_contains("template");
    if (t && t->is_string()) return std::string(t->get_string());
  }
  return Err("tokenizer config: no chat template named '{}'", name);
}

std::string SpecialTokenFromConfig(const boost::json::object& config, std::string_view key) {
  const boost::json::value* v = config.if_contains(key);
  if (!v) return "";
  if (v->is_string()) return std::string(v->get_string());
  if (const boost::json::object* obj = v->if_object()) {
    const boost::json::value* content = obj->if_contains("content");
    if (content && content->is_string()) return std::string(content->get_string());
  }
  return "";
}

}  // namespace parallm::chat
