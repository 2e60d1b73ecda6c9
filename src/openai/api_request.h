// OpenAI API requests: the bodies of POST /v1/completions and /v1/chat/completions turned into token ids and
// SamplingParams, or into the ApiError (HTTP status + OpenAI error object) that says what is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/json.hpp>

#include "chat/model_text.h"
#include "engine/sampling_params.h"
#include "openai/tool_parser.h"
#include "openai/tools.h"
#include "structured/structured_output.h"

namespace parallm::openai {

// An error as the API reports it: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field; empty is JSON null
};

// Errors from ParseSamplingParams and SamplingParams::Validate start with the field they are about ("'top_p'
// must be a number", "temperature must be >= 0"); returns that field when it is a request field, else "".
std::string ParamOfMessage(std::string_view message);

enum class Api { kCompletions, kChat };

struct ApiRequest {
  Api api = Api::kCompletions;
  std::string model;                          // as the client named it ("" when it named none)
  std::vector<std::vector<int32_t>> prompts;  // completions: one per prompt; chat: exactly one
  std::vector<std::string> echo_texts;        // echo: each prompt's text, put before its choices' text
  SamplingParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage and no choices
  bool echo = false;
  ToolsRequest tools;        // chat: tools, tool_choice, parallel_tool_calls
  std::string tool_opening;  // chat, forced tool_choice: the call's opening, appended to the prompt (ForcedCallOpening)
  ToolParser tool_parser = ToolParser::kNone;  // set when the answers are parsed for tool calls
};

// What parsing needs to know about the server and its model.
struct ParseContext {
  std::vector<std::string> model_names;  // names the server answers to; a request naming another is a 404
  // More names it answers to, asked when a request names none of model_names (the LoRA adapters loaded now).
  std::function<bool(const std::string&)> is_adapter;
  int32_t vocab_size = 0;
  int32_t max_model_len = 0;             // prompt tokens must be fewer (0: unchecked here)
  const ModelText* text = nullptr;       // text prompts and messages need a tokenizer (and chat a template)
  int32_t max_prompts = 256;             // completions: prompts in one request
  ToolParser tool_parser = ToolParser::kNone;  // --tool-call-parser, or the one the chat template calls for
  bool auto_tool_choice = false;               // --enable-auto-tool-choice: tool_choice "auto" is parsed
  // Compiles response_format / structured_outputs / guided_* for the model's vocabulary (null: no tokenizer).
  structured::GrammarCompiler* grammars = nullptr;
};

using ParsedRequest = std::variant<ApiRequest, ApiError>;

// `body` is the raw HTTP body. Completions: `prompt` is a string, a list of strings, a list of token ids or a
// list of token-id lists; `echo` is supported, `suffix` and `best_of` > n are refused. Chat: `messages` (text
// content as a string or a list of {"type": "text"} parts; assistant tool_calls and tool messages as tools.h says)
// through the model's chat template with `tools`; tool_choice "auto" needs context.auto_tool_choice, "required" and
// a named function a tool parser, whose call opening then ends the prompt;
// max_completion_tokens overrides max_tokens, whose default is what the context leaves after the prompt. Both:
// a prompt as long as the context is a 400 unless `truncate_prompt_tokens` (vLLM's) keeps only its last tokens.
ParsedRequest ParseCompletionRequest(std::string_view body, const ParseContext& context);
ParsedRequest ParseChatRequest(std::string_view body, const ParseContext& context);

// The body as a JSON object, or a 400 naming the problem (malformed JSON, invalid UTF-8, not an object).
std::variant<boost::json::object, ApiError> ParseJsonObject(std::string_view body);

}  // namespace parallm::openai
