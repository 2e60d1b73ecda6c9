// JSON request parsing with errors that say which field is wrong and what was expected.
#include "openai/request_json.h"

#include <cmath>

#include "openai/structured_request.h"
#include "openai/tool_grammar.h"

namespace parallm::openai {
namespace {

Result<double> Number(const boost::json::value& v, const char* field) {
  if (v.is_int64()) return static_cast<double>(v.as_int64());
  if (v.is_uint64()) return static_cast<double>(v.as_uint64());
  if (v.is_double()) return v.as_double();
  return Err("'{}' must be a number", field);
}

Result<int64_t> Integer(const boost::json::value& v, const char* field) {
  if (v.is_int64()) return v.as_int64();
  if (v.is_uint64() && v.as_uint64() <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(v.as_uint64());
  if (v.is_double() && std::floor(v.as_double()) == v.as_double() && std::abs(v.as_double()) < 9e15)
    return static_cast<int64_t>(v.as_double());
  return Err("'{}' must be an integer", field);
}

}  // namespace

Result<SamplingParams> ParseSamplingParams(const boost::json::object& o) {
  SamplingParams p;
  auto get_float = [&](const char* field, float* out) -> Status {
    const boost::json::value* v = o.if_contains(field);
    if (v == nullptr || v->is_null()) return Status::Ok();
    PARALLM_ASSIGN_OR_RETURN(double d, Number(*v, field));
    *out = static_cast<float>(d);
    return Status::Ok();
  };
  auto get_int = [&](const char* field, auto* out, int64_t lo, int64_t hi) -> Status {
    const boost::json::value* v = o.if_contains(field);
    if (v == nullptr || v->is_null()) return Status::Ok();
    PARALLM_ASSIGN_OR_RETURN(int64_t i, Integer(*v, field));
    if (i < lo || i > hi) return Err("'{}' must be between {} and {}, got {}", field, lo, hi, i);
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(i);
    return Status::Ok();
  };
  PARALLM_RETURN_IF_ERROR(get_int("max_tokens", &p.max_tokens, 0, 1 << 24));
  PARALLM_RETURN_IF_ERROR(get_int("n", &p.n, 1, 128));
  PARALLM_RETURN_IF_ERROR(get_float("temperature", &p.temperature));
  PARALLM_RETURN_IF_ERROR(get_float("top_p", &p.top_p));
  PARALLM_RETURN_IF_ERROR(get_int("top_k", &p.top_k, -1, 1 << 24));
  if (p.top_k < 0) p.top_k = 0;  // vLLM: -1 means all
  PARALLM_RETURN_IF_ERROR(get_float("min_p", &p.min_p));
  PARALLM_RETURN_IF_ERROR(get_float("presence_penalty", &p.presence_penalty));
  PARALLM_RETURN_IF_ERROR(get_float("frequency_penalty", &p.frequency_penalty));
  PARALLM_RETURN_IF_ERROR(get_float("repetition_penalty", &p.repetition_penalty));
  if (const boost::json::value* v = o.if_contains("seed"); v && !v->is_null()) {
    PARALLM_ASSIGN_OR_RETURN(int64_t seed, Integer(*v, "seed"));
    p.seed = static_cast<uint64_t>(seed);
    p.has_seed = true;
  }
  if (const boost::json::value* v = o.if_contains("ignore_eos"); v && !v->is_null()) {
    if (!v->is_bool()) return Err("'ignore_eos' must be true or false");
    p.ignore_eos = v->as_bool();
  }
  if (const boost::json::value* v = o.if_contains("skip_special_tokens"); v && !v->is_null()) {
    if (!v->is_bool()) return Err("'skip_special_tokens' must be true or false");
    p.skip_special_tokens = v->as_bool();
  }
  if (const boost::json::value* v = o.if_contains("logprobs"); v && !v->is_null()) {
    // Completions API: an integer k; chat API: a boolean plus top_logprobs.
    if (v->is_bool()) {
      p.logprobs = v->as_bool() ? 0 : -1;
      if (v->as_bool()) PARALLM_RETURN_IF_ERROR(get_int("top_logprobs", &p.logprobs, 0, 20));
    } else {
      PARALLM_RETURN_IF_ERROR(get_int("logprobs", &p.logprobs, 0, 20));
    }
  }
  if (const boost::json::value* v = o.if_contains("logit_bias"); v && !v->is_null()) {
    if (!v->is_object()) return Err("'logit_bias' must be an object of token id -> bias");
    for (const auto& [key, bias] : v->as_object()) {
      int32_t token = 0;
      try {
        size_t used = 0;
        token = std::stoi(std::string(key), &used);
        if (used != key.size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        return Err("'logit_bias' key '{}' is not a token id", std::string(key));
      }
      PARALLM_ASSIGN_OR_RETURN(double b, Number(bias, "logit_bias"));
      p.logit_bias[token] = static_cast<float>(b);
    }
  }
  if (const boost::json::value* v = o.if_contains("stop"); v && !v->is_null()) {
    // OpenAI: a string or an array of strings.
    if (v->is_string()) {
      p.stop.emplace_back(v->as_string());
    } else if (v->is_array()) {
      for (const auto& s : v->as_array()) {
        if (!s.is_string()) return Err("'stop' must be a string or an array of strings");
        p.stop.emplace_back(s.as_string());
      }
    } else {
      return Err("'stop' must be a string or an array of strings");
    }
  }
  if (const boost::json::value* v = o.if_contains("stop_token_ids"); v && !v->is_null()) {
    if (!v->is_array()) return Err("'stop_token_ids' must be an array of token ids");
    for (const auto& t : v->as_array()) {
      PARALLM_ASSIGN_OR_RETURN(int64_t id, Integer(t, "stop_token_ids"));
      p.stop_token_ids.push_back(static_cast<int32_t>(id));
    }
  }
  return p;
}

Result<BatchRequest> ParseBatchLine(const std::string& line, int line_no, int32_t vocab_size, const ModelText* model_text,
                                    ToolParser tool_parser, structured::GrammarCompiler* grammars) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(line, ec);
  if (ec) return Err("invalid JSON: {}", ec.message());
  if (!v.is_object()) return Err("each line must be a JSON object");
  const boost::json::object& o = v.as_object();
  BatchRequest r;
  if (const boost::json::value* id = o.if_contains("id"); id && id->is_string()) {
    r.id = std::string(id->as_string());
  } else if (id && (id->is_int64() || id->is_uint64())) {
    r.id = boost::json::serialize(*id);
  } else if (id == nullptr) {
    r.id = fmt::format("line-{}", line_no);
  } else {
    return Err("'id' must be a string or an integer");
  }
  if (const boost::json::value* m = o.if_contains("model"); m && !m->is_null()) {
    if (!m->is_string()) return Err("'model' must be a string");
    r.model = std::string(m->as_string());
  }
  const boost::json::value* ids = o.if_contains("prompt_ids");
  const boost::json::value* text = o.if_contains("prompt");
  const boost::json::value* messages = o.if_contains("messages");
  if ((ids != nullptr) + (text != nullptr) + (messages != nullptr) > 1)
    return Err("give one of 'prompt', 'messages' or 'prompt_ids'");
  if (messages != nullptr) {
    if (!messages->is_array()) return Err("'messages' must be an array of {{role, content}} objects");
    boost::json::array normalized = messages->as_array();
    for (size_t i = 0; i < normalized.size(); ++i) {
      boost::json::object* m = normalized[i].if_object();
      if (m == nullptr || !m->contains("role") || !m->at("role").is_string())
        return Err("each message must be an object with a string 'role'");
      if (auto e = NormalizeToolMessage(*m, i)) return Status::Error(*e);
    }
    if (model_text == nullptr || !model_text->has_tokenizer()) return Err("this model has no tokenizer for 'messages'");
    auto tools = ParseTools(o);
    if (auto* e = std::get_if<ToolsError>(&tools)) return Status::Error(e->message);
    r.tools = std::move(std::get<ToolsRequest>(tools));
    if (r.tools.parses_calls()) {
      if (tool_parser == ToolParser::kNone)
        return Err("'tool_choice' needs a tool-call parser: give --tool-call-parser (none was recognized in the chat "
                   "template), or send \"tool_choice\": \"none\"");
      r.tool_parser = tool_parser;
      if (r.tools.choice != ToolChoice::kAuto) r.tool_opening = ForcedCallOpening(tool_parser, r.tools.named);
    }
    boost::json::object extra;
    if (!r.tools.functions.empty()) extra["tools"] = o.at("tools");
    PARALLM_ASSIGN_OR_RETURN(std::string rendered, model_text->RenderChat(normalized, extra));
    r.prompt = model_text->tokenizer()->Encode(rendered + r.tool_opening, /*add_special=*/false, /*parse_special=*/true);
  } else if (ids != nullptr) {
    if (!ids->is_array()) return Err("'prompt_ids' must be an array of token ids");
    for (const auto& t : ids->as_array()) {
      if (!t.is_int64() || t.as_int64() < 0 || t.as_int64() >= vocab_size)
        return Err("'prompt_ids' entry {} is not a token id of this model (vocabulary {})", boost::json::serialize(t),
                   vocab_size);
      r.prompt.push_back(static_cast<int32_t>(t.as_int64()));
    }
  } else if (text != nullptr) {
    if (!text->is_string()) return Err("'prompt' must be a string");
    if (model_text == nullptr) return Err("this model has no tokenizer for 'prompt'; use 'prompt_ids'");
    PARALLM_ASSIGN_OR_RETURN(r.prompt, model_text->EncodePrompt(std::string(text->as_string())));
  } else {
    return Err("a request needs 'prompt', 'messages' or 'prompt_ids'");
  }
  if (r.prompt.empty()) return Err("the prompt is empty");
  PARALLM_ASSIGN_OR_RETURN(r.params, ParseSamplingParams(o));
  PARALLM_RETURN_IF_ERROR(ApplyStructuredOutput(o, grammars, &r.params));
  PARALLM_RETURN_IF_ERROR(ApplyToolChoiceGrammar(r.tool_parser, r.tools, grammars, &r.params));
  PARALLM_RETURN_IF_ERROR(r.params.Validate(vocab_size));
  return r;
}

}  // namespace parallm::openai
