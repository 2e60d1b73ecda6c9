// Tool definitions, tool_choice and tool messages in chat requests: shapes checked with errors naming the field.
#include "openai/tools.h"

#include <fmt/format.h>

namespace parallm::openai {
namespace {

bool ValidFunctionName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

ToolsError Bad(std::string message, std::string param) { return ToolsError{std::move(message), std::move(param)}; }

std::variant<ToolFunction, ToolsError> ParseTool(const boost::json::value& entry, size_t i) {
  const std::string at = fmt::format("tools[{}]", i);
  const boost::json::object* tool = entry.if_object();
  if (tool == nullptr) return Bad(at + " must be an object {\"type\": \"function\", \"function\": {...}}", "tools");
  const boost::json::value* type = tool->if_contains("type");
  if (type == nullptr || !type->is_string() || type->as_string() != "function")
    return Bad(at + ".type must be \"function\" (the only kind of tool supported)", "tools");
  const boost::json::value* fn = tool->if_contains("function");
  if (fn == nullptr || !fn->is_object()) return Bad(at + ".function must be an object with a 'name'", "tools");
  const boost::json::object& f = fn->as_object();
  ToolFunction out;
  const boost::json::value* name = f.if_contains("name");
  if (name == nullptr || !name->is_string() || !ValidFunctionName(name->as_string()))
    return Bad(at + ".function.name must be a string of 1 to 64 letters, digits, '_' or '-'", "tools");
  out.name = std::string(name->as_string());
  if (const boost::json::value* d = f.if_contains("description"); d && !d->is_null()) {
    if (!d->is_string()) return Bad(at + ".function.description must be a string", "tools");
    out.description = std::string(d->as_string());
  }
  if (const boost::json::value* p = f.if_contains("parameters"); p && !p->is_null()) {
    if (!p->is_object()) return Bad(at + ".function.parameters must be a JSON Schema object", "tools");
    out.parameters = *p;
  }
  if (const boost::json::value* s = f.if_contains("strict"); s && !s->is_null()) {
    if (!s->is_bool()) return Bad(at + ".function.strict must be true or false", "tools");
    out.strict = s->as_bool();
  }
  return out;
}

}  // namespace

const ToolFunction* ToolsRequest::Find(const std::string& name) const {
  for (const ToolFunction& f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

std::variant<ToolsRequest, ToolsError> ParseTools(const boost::json::object& body) {
  ToolsRequest r;
  if (const boost::json::value* tools = body.if_contains("tools"); tools && !tools->is_null()) {
    if (!tools->is_array()) return Bad("'tools' must be a list", "tools");
    const boost::json::array& list = tools->as_array();
    for (size_t i = 0; i < list.size(); ++i) {
      auto tool = ParseTool(list[i], i);
      if (auto* e = std::get_if<ToolsError>(&tool)) return *e;
      ToolFunction& f = std::get<ToolFunction>(tool);
      if (r.Find(f.name) != nullptr)
        return Bad(fmt::format("tools[{}]: a function named '{}' is defined twice", i, f.name), "tools");
      r.functions.push_back(std::move(f));
    }
  }
  r.choice = r.functions.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (const boost::json::value* c = body.if_contains("tool_choice"); c && !c->is_null()) {
    const char* shape = "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}";
    if (c->is_string()) {
      const std::string_view s = c->as_string();
      if (s == "none") r.choice = ToolChoice::kNone;
      else if (s == "auto") r.choice = ToolChoice::kAuto;
      else if (s == "required") r.choice = ToolChoice::kRequired;
      else return Bad(shape, "tool_choice");
    } else if (const boost::json::object* o = c->if_object()) {
      const boost::json::value* type = o->if_contains("type");
      const boost::json::value* fn = o->if_contains("function");
      const boost::json::value* name = fn && fn->is_object() ? fn->as_object().if_contains("name") : nullptr;
      if (type == nullptr || !type->is_string() || type->as_string() != "function" || name == nullptr ||
          !name->is_string())
        return Bad(shape, "tool_choice");
      r.choice = ToolChoice::kNamed;
      r.named = std::string(name->as_string());
    } else {
      return Bad(shape, "tool_choice");
    }
    if (r.choice != ToolChoice::kNone && r.functions.empty())
      return Bad("'tool_choice' other than \"none\" needs 'tools'", "tool_choice");
    if (r.choice == ToolChoice::kNamed && r.Find(r.named) == nullptr)
      return Bad(fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", r.named), "tool_choice");
  }
  if (const boost::json::value* p = body.if_contains("parallel_tool_calls"); p && !p->is_null()) {
    if (!p->is_bool()) return Bad("'parallel_tool_calls' must be true or false", "parallel_tool_calls");
    r.parallel_tool_calls = p->as_bool();
  }
  return r;
}

std::optional<std::string> NormalizeToolMessage(boost::json::object& message, size_t index) {
  const std::string_view role = message.at("role").as_string();
  if (role == "tool") {
    const boost::json::value* id = message.if_contains("tool_call_id");
    if (id == nullptr || !id->is_string())
      return fmt::format("messages[{}]: a 'tool' message needs a string 'tool_call_id'", index);
    return std::nullopt;
  }
  boost::json::value* calls = message.if_contains("tool_calls");
  if (calls == nullptr || calls->is_null()) return std::nullopt;
  if (role != "assistant") return fmt::format("messages[{}]: only assistant messages have 'tool_calls'", index);
  if (!calls->is_array()) return fmt::format("messages[{}].tool_calls must be a list", index);

  boost::json::array& list = calls->as_array();
  for (size_t k = 0; k < list.size(); ++k) {
    const std::string at = fmt::format("messages[{}].tool_calls[{}]", index, k);
    boost::json::object* call = list[k].if_object();
    if (call == nullptr) return at + " must be an object {\"id\", \"type\": \"function\", \"function\"}";
    const boost::json::value* id = call->if_contains("id");
    if (id == nullptr || !id->is_string()) return at + ".id must be a string";
    if (const boost::json::value* type = call->if_contains("type");
        type && !(type->is_string() && type->as_string() == "function"))
      return at + ".type must be \"function\"";
    boost::json::value* fn = call->if_contains("function");
    if (fn == nullptr || !fn->is_object()) return at + ".function must be an object {\"name\", \"arguments\"}";
    boost::json::object& f = fn->as_object();
    const boost::json::value* name = f.if_contains("name");
    if (name == nullptr || !name->is_string()) return at + ".function.name must be a string";
    boost::json::value* args = f.if_contains("arguments");
    if (args == nullptr || args->is_null()) {
      f["arguments"] = boost::json::object();
    } else if (args->is_string()) {
      // OpenAI sends arguments as JSON text; the templates (Hermes, Qwen2.5, Llama 3.1) render them with tojson.
      boost::system::error_code ec;
      boost::json::value parsed = boost::json::parse(args->as_string(), ec);
      if (ec) return at + ".function.arguments must be a JSON string (" + ec.message() + ")";
      *args = std::move(parsed);
    } else if (!args->is_object()) {
      return at + ".function.arguments must be a JSON string";
    }
  }
  // OpenAI's clients send a call's turn back with "content": null; templates (Qwen3's) test it as a string, and vLLM
  // renders it as "". Last: adding a key may move the object's members (and invalidate `calls` and `role`).
  if (const boost::json::value* c = message.if_contains("content"); c == nullptr || c->is_null()) message["content"] = "";
  return std::nullopt;
}

}  // namespace parallm::openai
