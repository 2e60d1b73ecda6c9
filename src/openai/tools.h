// Tool calling in chat requests: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls`, and the assistant
// `tool_calls` and `tool` messages of a conversation, checked and put in the shape chat templates expect.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <boost/json.hpp>

namespace parallm::openai {

// One {"type": "function", "function": {...}} entry of `tools`.
struct ToolFunction {
  std::string name;
  std::string description;
  boost::json::value parameters;  // a JSON Schema object, or null when not given
  bool strict = false;
};

enum class ToolChoice {
  kNone,      // tools may be rendered into the prompt, but the output is text
  kAuto,      // the model decides; calls are parsed out of its text
  kRequired,  // at least one call
  kNamed,     // exactly one call of ToolsRequest::named
};

struct ToolsRequest {
  std::vector<ToolFunction> functions;
  ToolChoice choice = ToolChoice::kNone;  // OpenAI's default: "auto" when tools are given, else "none"
  std::string named;                      // the function tool_choice names (kNamed)
  bool parallel_tool_calls = true;        // false: at most one call per answer

  // Whether the output is parsed for calls.
  bool parses_calls() const { return !functions.empty() && choice != ToolChoice::kNone; }
  const ToolFunction* Find(const std::string& name) const;
};

// A bad shape, with the request field it is about (OpenAI's `param`).
struct ToolsError {
  std::string message;
  std::string param;
};

// Reads `tools`, `tool_choice` and `parallel_tool_calls` from a chat request body. Function names must be
// 1-64 characters of [A-Za-z0-9_-] (OpenAI's rule) and unique; a named tool_choice must name one of them.
std::variant<ToolsRequest, ToolsError> ParseTools(const boost::json::object& body);

// Checks one message's tool fields and rewrites them as chat templates expect them (as vLLM does before
// rendering): an assistant message's `tool_calls` need an `id`, type "function" and a function {name,
// arguments}, whose `arguments` string (OpenAI's wire shape) becomes the JSON object it encodes, and a null content
// becomes "" (as vLLM renders it); a `tool` message
// needs a string `tool_call_id`. The error names messages[index].
std::optional<std::string> NormalizeToolMessage(boost::json::object& message, size_t index);

}  // namespace parallm::openai
