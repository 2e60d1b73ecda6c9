// Parsing of OpenAI completions and chat requests, with errors that name the field (OpenAI's `param`).
#include "openai/api_request.h"

#include <algorithm>
#include <array>

#include "openai/request_json.h"
#include "openai/structured_request.h"
#include "openai/tool_grammar.h"
#include "util/strings.h"

namespace parallm::openai {
namespace {

ApiError BadRequest(std::string message, std::string param = "") {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param)};
}

ApiError FromStatus(const Status& status) {
  return BadRequest(status.message(), ParamOfMessage(status.message()));
}

// Fields every generation request shares: model, stream, stream_options, sampling parameters.
std::variant<ApiRequest, ApiError> ParseCommon(const boost::json::object& o, Api api, const ParseContext& context) {
  ApiRequest r;
  r.api = api;
  if (const boost::json::value* m = o.if_contains("model"); m && !m->is_null()) {
    if (!m->is_string()) return BadRequest("'model' must be a string", "model");
    r.model = std::string(m->as_string());
    const auto& names = context.model_names;
    if (!names.empty() && std::find(names.begin(), names.end(), r.model) == names.end() &&
        !(context.is_adapter && context.is_adapter(r.model)))
      return ApiError{404, fmt::format("The model '{}' does not exist.", r.model), "NotFoundError", "model"};
  }
  if (const boost::json::value* s = o.if_contains("stream"); s && !s->is_null()) {
    if (!s->is_bool()) return BadRequest("'stream' must be true or false", "stream");
    r.stream = s->as_bool();
  }
  if (const boost::json::value* so = o.if_contains("stream_options"); so && !so->is_null()) {
    if (!so->is_object()) return BadRequest("'stream_options' must be an object", "stream_options");
    if (const boost::json::value* u = so->as_object().if_contains("include_usage"); u && !u->is_null()) {
      if (!u->is_bool()) return BadRequest("'stream_options.include_usage' must be true or false", "stream_options");
      r.include_usage = u->as_bool();
    }
  }
  auto params = ParseSamplingParams(o);
  if (!params.ok()) return FromStatus(params.status());
  r.params = std::move(*params);
  if (Status st = ApplyStructuredOutput(o, context.grammars, &r.params); !st.ok()) return FromStatus(st);
  return r;
}

// The prompt-independent checks (ranges), vLLM's truncate_prompt_tokens (keep the last k prompt tokens), then
// the prompt length against the context.
std::optional<ApiError> CheckPrompts(const boost::json::object& o, ApiRequest& r, const ParseContext& context) {
  if (Status st = r.params.Validate(context.vocab_size); !st.ok()) return FromStatus(st);
  if (const boost::json::value* t = o.if_contains("truncate_prompt_tokens"); t && !t->is_null()) {
    if (!t->is_int64() || t->as_int64() < 1)
      return BadRequest("'truncate_prompt_tokens' must be a positive integer", "truncate_prompt_tokens");
    const size_t keep = static_cast<size_t>(t->as_int64());
    for (auto& p : r.prompts)
      if (p.size() > keep) p.erase(p.begin(), p.end() - static_cast<std::ptrdiff_t>(keep));
  }
  for (const auto& p : r.prompts) {
    if (p.empty()) return BadRequest("the prompt is empty", r.api == Api::kChat ? "messages" : "prompt");
    if (context.max_model_len > 0 && static_cast<int32_t>(p.size()) >= context.max_model_len)
      return BadRequest(fmt::format("This model's maximum context length is {} tokens. However, your prompt has {} "
                                    "tokens (prompt + output must fit in the context; "
                                    "truncate_prompt_tokens keeps only the last ones).",
                                    context.max_model_len, p.size()),
                        r.api == Api::kChat ? "messages" : "prompt");
  }
  return std::nullopt;
}

Result<std::vector<int32_t>> TokenIds(const boost::json::array& a, int32_t vocab_size) {
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  for (const auto& t : a) {
    if (!t.is_int64() && !t.is_uint64()) return Err("'prompt' token ids must be integers");
    const int64_t id = t.is_int64() ? t.as_int64() : -1;
    if (id < 0 || id >= vocab_size)
      return Err("'prompt' token id {} is outside this model's vocabulary ({})", boost::json::serialize(t), vocab_size);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// Chat content: a string, or a list of parts of which only text is understood; null for an assistant turn
// that only called tools. Normalized to a string so every template can render it.
std::optional<ApiError> NormalizeContent(boost::json::object& message, size_t index) {
  boost::json::value* content = message.if_contains("content");
  if (content == nullptr || content->is_null() || content->is_string()) return std::nullopt;
  if (!content->is_array())
    return BadRequest(fmt::format("messages[{}].content must be a string or a list of content parts", index),
                      "messages");
  std::string text;
  for (const auto& part : content->as_array()) {
    const boost::json::object* p = part.if_object();
    const boost::json::value* type = p ? p->if_contains("type") : nullptr;
    if (type == nullptr || !type->is_string() || type->as_string() != "text" || !p->contains("text") ||
        !p->at("text").is_string())
      return BadRequest(fmt::format("messages[{}].content: only {{\"type\": \"text\", \"text\": ...}} parts are "
                                    "supported",
                                    index),
                        "messages");
    if (!text.empty()) text += "\n";
    text += p->at("text").as_string();
  }
  *content = boost::json::string(text);
  return std::nullopt;
}

}  // namespace

std::string ParamOfMessage(std::string_view message) {
  static constexpr std::array<std::string_view, 30> kFields = {
      "max_tokens", "n",  "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
      "repetition_penalty", "seed", "ignore_eos", "skip_special_tokens", "logprobs", "top_logprobs", "logit_bias",
      "stop", "stop_token_ids", "prompt", "messages", "model", "stream", "max_completion_tokens", "response_format",
      "structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar", "tools", "tool_choice"};
  std::string_view word = message;
  if (!word.empty() && word.front() == '\'') word.remove_prefix(1);
  const size_t end = word.find_first_not_of("abcdefghijklmnopqrstuvwxyz_");
  word = word.substr(0, end);
  for (std::string_view f : kFields)
    if (f == word) return std::string(f);
  return "";
}

std::variant<boost::json::object, ApiError> ParseJsonObject(std::string_view body) {
  // JSON must be UTF-8; say so rather than report a syntax error somewhere inside a string.
  if (ToValidUtf8(body) != body) return BadRequest("The request body is not valid UTF-8");
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(body, ec);
  if (ec) return BadRequest(fmt::format("The request body is not valid JSON: {}", ec.message()));
  if (!v.is_object()) return BadRequest("The request body must be a JSON object");
  return std::move(v.as_object());
}

ParsedRequest ParseCompletionRequest(std::string_view body, const ParseContext& context) {
  auto json = ParseJsonObject(body);
  if (auto* e = std::get_if<ApiError>(&json)) return *e;
  const boost::json::object& o = std::get<boost::json::object>(json);
  auto common = ParseCommon(o, Api::kCompletions, context);
  if (auto* e = std::get_if<ApiError>(&common)) return *e;
  ApiRequest r = std::move(std::get<ApiRequest>(common));

  if (const boost::json::value* s = o.if_contains("suffix"); s && !s->is_null())
    return BadRequest("'suffix' is not supported", "suffix");
  if (const boost::json::value* b = o.if_contains("best_of"); b && !b->is_null()) {
    if (!b->is_int64() || b->as_int64() != r.params.n)
      return BadRequest("'best_of' is not supported (only best_of == n)", "best_of");
  }
  if (const boost::json::value* e = o.if_contains("echo"); e && !e->is_null()) {
    if (!e->is_bool()) return BadRequest("'echo' must be true or false", "echo");
    r.echo = e->as_bool();
  }
  if (r.echo && r.params.logprobs >= 0)
    return BadRequest("'echo' with 'logprobs' is not supported (prompt logprobs are not computed)", "echo");

  const boost::json::value* prompt = o.if_contains("prompt");
  if (prompt == nullptr || prompt->is_null()) return BadRequest("'prompt' is required", "prompt");
  auto encode = [&](std::string_view text) -> Result<std::vector<int32_t>> {
    if (context.text == nullptr || !context.text->has_tokenizer())
      return Err("this model has no tokenizer for text prompts; send token ids");
    return context.text->EncodePrompt(std::string(text));
  };
  auto add_text = [&](std::string_view text) -> std::optional<ApiError> {
    auto ids = encode(text);
    if (!ids.ok()) return BadRequest(ids.status().message(), "prompt");
    r.prompts.push_back(std::move(*ids));
    r.echo_texts.emplace_back(text);
    return std::nullopt;
  };
  auto add_ids = [&](const boost::json::array& a) -> std::optional<ApiError> {
    auto ids = TokenIds(a, context.vocab_size);
    if (!ids.ok()) return BadRequest(ids.status().message(), "prompt");
    r.echo_texts.push_back(r.echo && context.text && context.text->has_tokenizer()
                               ? context.text->tokenizer()->Decode(*ids, /*skip_special=*/false)
                               : std::string());
    r.prompts.push_back(std::move(*ids));
    return std::nullopt;
  };
  const char* shape = "'prompt' must be a string, a list of strings, a list of token ids or a list of token-id lists";
  if (prompt->is_string()) {
    if (auto e = add_text(prompt->as_string())) return *e;
  } else if (prompt->is_array()) {
    const boost::json::array& a = prompt->as_array();
    if (a.empty()) return BadRequest("'prompt' is empty", "prompt");
    if (static_cast<int64_t>(a.size()) > context.max_prompts && !a[0].is_number())
      return BadRequest(fmt::format("at most {} prompts per request", context.max_prompts), "prompt");
    if (a[0].is_number()) {
      if (auto e = add_ids(a)) return *e;
    } else if (a[0].is_string()) {
      for (const auto& p : a) {
        if (!p.is_string()) return BadRequest(shape, "prompt");
        if (auto e = add_text(p.as_string())) return *e;
      }
    } else if (a[0].is_array()) {
      for (const auto& p : a) {
        if (!p.is_array()) return BadRequest(shape, "prompt");
        if (auto e = add_ids(p.as_array())) return *e;
      }
    } else {
      return BadRequest(shape, "prompt");
    }
  } else {
    return BadRequest(shape, "prompt");
  }
  if (auto e = CheckPrompts(o, r, context)) return *e;
  return r;
}

ParsedRequest ParseChatRequest(std::string_view body, const ParseContext& context) {
  auto json = ParseJsonObject(body);
  if (auto* e = std::get_if<ApiError>(&json)) return *e;
  const boost::json::object& o = std::get<boost::json::object>(json);
  auto common = ParseCommon(o, Api::kChat, context);
  if (auto* e = std::get_if<ApiError>(&common)) return *e;
  ApiRequest r = std::move(std::get<ApiRequest>(common));

  bool max_tokens_given = o.contains("max_tokens") && !o.at("max_tokens").is_null();
  if (const boost::json::value* m = o.if_contains("max_completion_tokens"); m && !m->is_null()) {
    if (!m->is_int64() || m->as_int64() < 0 || m->as_int64() > (1 << 24))
      return BadRequest("'max_completion_tokens' must be an integer between 0 and 16777216", "max_completion_tokens");
    r.params.max_tokens = static_cast<int32_t>(m->as_int64());
    max_tokens_given = true;
  }
  const boost::json::value* messages = o.if_contains("messages");
  if (messages == nullptr || messages->is_null()) return BadRequest("'messages' is required", "messages");
  if (!messages->is_array()) return BadRequest("'messages' must be a list of {role, content} objects", "messages");
  if (messages->as_array().empty()) return BadRequest("'messages' must not be empty", "messages");
  boost::json::array normalized = messages->as_array();
  for (size_t i = 0; i < normalized.size(); ++i) {
    boost::json::object* m = normalized[i].if_object();
    if (m == nullptr || !m->contains("role") || !m->at("role").is_string())
      return BadRequest(fmt::format("messages[{}] must be an object with a string 'role'", i), "messages");
    if (auto e = NormalizeContent(*m, i)) return *e;
    if (auto e = NormalizeToolMessage(*m, i)) return BadRequest(*e, "messages");
  }
  auto tools = ParseTools(o);
  if (auto* e = std::get_if<ToolsError>(&tools)) return BadRequest(e->message, e->param);
  r.tools = std::move(std::get<ToolsRequest>(tools));
  if (r.tools.choice == ToolChoice::kAuto && !context.auto_tool_choice)
    return BadRequest("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set "
                      "(or send tool_choice \"none\")",
                      "tool_choice");
  if (r.tools.choice == ToolChoice::kRequired || r.tools.choice == ToolChoice::kNamed) {
    if (context.tool_parser == ToolParser::kNone)
      return BadRequest("tool_choice \"required\" or a named function needs a tool-call parser: none was given "
                        "(--tool-call-parser) or recognized in the chat template",
                        "tool_choice");
    r.tool_opening = ForcedCallOpening(context.tool_parser, r.tools.named);
  }
  if (r.tools.parses_calls()) r.tool_parser = context.tool_parser;
  if (r.tools.parses_calls() && r.tool_parser == ToolParser::kNone)
    return BadRequest("no tool-call parser: give --tool-call-parser", "tool_choice");
  // "required" and named calls (and strict ones under "auto") are valid calls by construction: the grammar masks.
  if (Status st = ApplyToolChoiceGrammar(r.tool_parser, r.tools, context.grammars, &r.params); !st.ok())
    return FromStatus(st);
  if (context.text == nullptr || !context.text->has_tokenizer())
    return BadRequest("this model has no tokenizer, so it cannot take chat messages", "messages");
  boost::json::object extra;
  if (!r.tools.functions.empty()) extra["tools"] = o.at("tools");
  if (const boost::json::value* kw = o.if_contains("chat_template_kwargs"); kw && kw->is_object())
    for (const auto& [k, v] : kw->as_object()) extra[k] = v;
  auto rendered = context.text->RenderChat(normalized, extra);
  if (!rendered.ok()) return BadRequest(rendered.status().message(), "messages");
  // The template writes BOS and special tokens itself; a forced call's opening is the start of the answer.
  r.prompts.push_back(context.text->tokenizer()->Encode(*rendered + r.tool_opening, /*add_special=*/false,
                                                        /*parse_special=*/true));
  if (auto e = CheckPrompts(o, r, context)) return *e;
  // As vLLM: without a limit a chat answer may use whatever context the (truncated) prompt leaves.
  if (!max_tokens_given && context.max_model_len > 0)
    r.params.max_tokens = std::max<int32_t>(0, context.max_model_len - static_cast<int32_t>(r.prompts[0].size()));
  return r;
}

}  // namespace parallm::openai
