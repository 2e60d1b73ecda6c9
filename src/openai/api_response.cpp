// OpenAI response objects, stream chunks and error bodies, built as Boost.JSON values.
#include "openai/api_response.h"

#include <cmath>
#include <cstdlib>

namespace parallm::openai {
namespace {

// JSON has no -infinity; a token the sampler ruled out gets vLLM's stand-in.
// The float's shortest decimal form, so JSON shows -1.25 rather than the double -1.2500000476837158.
double LogprobJson(float logprob) {
  if (!std::isfinite(logprob)) return -9999.0;
  return std::strtod(fmt::format("{}", logprob).c_str(), nullptr);
}

boost::json::array Bytes(std::string_view text) {
  boost::json::array a;
  for (unsigned char c : text) a.push_back(static_cast<int64_t>(c));
  return a;
}

const char* ObjectName(Api api, bool chunk) {
  if (api == Api::kChat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

boost::json::object Envelope(const ResponseMeta& meta, bool chunk) {
  return boost::json::object{{"id", meta.id},
                             {"object", ObjectName(meta.api, chunk)},
                             {"created", meta.created},
                             {"model", meta.model}};
}

}  // namespace

int64_t Utf8Length(std::string_view text) {
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

boost::json::object ErrorBody(const ApiError& error) {
  boost::json::object e{{"message", error.message}, {"type", error.type}};
  e["param"] = error.param.empty() ? boost::json::value(nullptr) : boost::json::value(error.param);
  e["code"] = nullptr;
  return boost::json::object{{"error", e}};
}

boost::json::value FinishReasonJson(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "abort";
    case FinishReason::kNone: break;
  }
  return nullptr;
}

boost::json::object UsageJson(const Usage& usage) {
  return boost::json::object{
      {"prompt_tokens", usage.prompt_tokens},
      {"completion_tokens", usage.completion_tokens},
      {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
      {"prompt_tokens_details", boost::json::object{{"cached_tokens", usage.cached_tokens}}}};
}

std::string TokenString(const Tokenizer* tokenizer, int32_t id) {
  if (tokenizer == nullptr) return fmt::format("token_id:{}", id);
  const int32_t one[1] = {id};
  return tokenizer->Decode(one, /*skip_special=*/false);
}

boost::json::object CompletionLogprobs(std::span<const SampleResult> samples, const Tokenizer* tokenizer, int32_t top,
                                       int64_t* text_offset) {
  boost::json::array tokens, token_logprobs, top_logprobs, offsets;
  for (const SampleResult& s : samples) {
    const std::string text = TokenString(tokenizer, s.token);
    tokens.emplace_back(text);
    token_logprobs.emplace_back(LogprobJson(s.logprob));
    offsets.emplace_back(*text_offset);
    *text_offset += Utf8Length(text);
    if (top > 0) {
      boost::json::object alternatives;
      for (const TokenLogprob& t : s.top) alternatives[TokenString(tokenizer, t.token)] = LogprobJson(t.logprob);
      top_logprobs.emplace_back(std::move(alternatives));
    }
  }
  boost::json::object o{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"text_offset", offsets}};
  o["top_logprobs"] = top > 0 ? boost::json::value(top_logprobs) : boost::json::value(nullptr);
  return o;
}

boost::json::object ChatLogprobs(std::span<const SampleResult> samples, const Tokenizer* tokenizer) {
  boost::json::array content;
  for (const SampleResult& s : samples) {
    const std::string text = TokenString(tokenizer, s.token);
    boost::json::array top;
    for (const TokenLogprob& t : s.top) {
      const std::string alt = TokenString(tokenizer, t.token);
      top.emplace_back(boost::json::object{{"token", alt}, {"logprob", LogprobJson(t.logprob)}, {"bytes", Bytes(alt)}});
    }
    content.emplace_back(boost::json::object{
        {"token", text}, {"logprob", LogprobJson(s.logprob)}, {"bytes", Bytes(text)}, {"top_logprobs", top}});
  }
  return boost::json::object{{"content", content}};
}

boost::json::object CompletionResponse(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                                       const Usage& usage, const Tokenizer* tokenizer) {
  boost::json::object o = Envelope(meta, /*chunk=*/false);
  boost::json::array out;
  for (const ChoiceResult& c : choices) {
    boost::json::object choice{{"index", c.index}};
    if (meta.api == Api::kChat) {
      boost::json::object message{{"role", "assistant"}, {"content", c.text}};
      if (!c.tool_calls.empty()) {
        if (c.text.empty()) message["content"] = nullptr;  // as OpenAI: a call alone has null content
        boost::json::array calls;
        for (const ToolCallResult& t : c.tool_calls)
          calls.emplace_back(boost::json::object{
              {"id", t.id},
              {"type", "function"},
              {"function", boost::json::object{{"name", t.name}, {"arguments", t.arguments}}}});
        message["tool_calls"] = std::move(calls);
      }
      choice["message"] = std::move(message);
    } else {
      choice["text"] = c.text;
    }
    if (meta.logprobs < 0) {
      choice["logprobs"] = nullptr;
    } else if (meta.api == Api::kChat) {
      choice["logprobs"] = ChatLogprobs(c.samples, tokenizer);
    } else {
      int64_t offset = c.text_offset;
      choice["logprobs"] = CompletionLogprobs(c.samples, tokenizer, meta.logprobs, &offset);
    }
    choice["finish_reason"] = FinishReasonJson(c.finish_reason);
    if (!c.tool_calls.empty() && c.finish_reason != FinishReason::kNone) choice["finish_reason"] = "tool_calls";
    out.emplace_back(std::move(choice));
  }
  o["choices"] = std::move(out);
  o["usage"] = UsageJson(usage);
  return o;
}

boost::json::object StreamChunk(const ResponseMeta& meta, const ChunkPart& part, const Tokenizer* tokenizer,
                                int64_t* text_offset, bool usage_null) {
  boost::json::object o = Envelope(meta, /*chunk=*/true);
  boost::json::object choice{{"index", part.index}};
  if (meta.api == Api::kChat) {
    boost::json::object delta;
    if (part.role_only) {
      delta["role"] = "assistant";
      delta["content"] = "";
    } else if (!part.text.empty()) {
      delta["content"] = part.text;
    }
    if (!part.tool_calls.empty()) delta["tool_calls"] = part.tool_calls;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = part.text;
  }
  if (meta.logprobs < 0 || part.role_only) {
    choice["logprobs"] = nullptr;
  } else if (meta.api == Api::kChat) {
    choice["logprobs"] = ChatLogprobs(part.samples, tokenizer);
  } else {
    choice["logprobs"] = CompletionLogprobs(part.samples, tokenizer, meta.logprobs, text_offset);
  }
  choice["finish_reason"] = FinishReasonJson(part.finish_reason);
  if (part.called_tools && part.finish_reason != FinishReason::kNone) choice["finish_reason"] = "tool_calls";
  o["choices"] = boost::json::array{std::move(choice)};
  if (usage_null) o["usage"] = nullptr;
  return o;
}

boost::json::object ToolCallDelta(int32_t call_index, const ToolCallResult& call) {
  if (call.id.empty())
    return boost::json::object{{"index", call_index}, {"function", boost::json::object{{"arguments", call.arguments}}}};
  return boost::json::object{{"index", call_index},
                             {"id", call.id},
                             {"type", "function"},
                             {"function", boost::json::object{{"name", call.name}, {"arguments", call.arguments}}}};
}

boost::json::object UsageChunk(const ResponseMeta& meta, const Usage& usage) {
  boost::json::object o = Envelope(meta, /*chunk=*/true);
  o["choices"] = boost::json::array();
  o["usage"] = UsageJson(usage);
  return o;
}

std::string SseEvent(const boost::json::object& chunk) {
  std::string s = "data: ";
  s += boost::json::serialize(chunk);
  s += "\n\n";
  return s;
}

}  // namespace parallm::openai
