// OpenAI API responses: completion and chat.completion objects, their stream chunks and SSE framing, usage,
// logprobs in both of OpenAI's shapes, and error bodies. Pure functions of plain data.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "engine/request.h"
#include "engine/sampler.h"
#include "openai/api_request.h"
#include "tokenizer/tokenizer.h"

namespace parallm::openai {

// {"error": {"message", "type", "param", "code": null}}
boost::json::object ErrorBody(const ApiError& error);

// "stop", "length", or "abort" (a cancelled request, as vLLM names it); null when not finished.
boost::json::value FinishReasonJson(FinishReason reason);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};
// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
boost::json::object UsageJson(const Usage& usage);

// Characters (code points) in UTF-8 text: OpenAI's text_offset counts characters, as Python's len() does.
int64_t Utf8Length(std::string_view text);

// A token as logprobs show it: its text alone (special tokens included); "token_id:N" without a tokenizer.
std::string TokenString(const Tokenizer* tokenizer, int32_t id);

// Completions logprobs, {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, for `samples`;
// `*text_offset` is the offset (in characters) of the first token in the choice's text and is advanced past
// the last, so consecutive stream chunks continue where the previous one ended. `top_logprobs` is null when
// `top` is 0 (only the chosen tokens were asked for).
boost::json::object CompletionLogprobs(std::span<const SampleResult> samples, const Tokenizer* tokenizer, int32_t top,
                                       int64_t* text_offset);
// Chat logprobs, {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
boost::json::object ChatLogprobs(std::span<const SampleResult> samples, const Tokenizer* tokenizer);

// What identifies one response and each of its chunks.
struct ResponseMeta {
  Api api = Api::kCompletions;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  int32_t logprobs = -1;  // the request's: -1 none, else top-k count (0: chosen token only)
};

// A parsed tool call as responses carry it: {"id", "type": "function", "function": {"name", "arguments"}}.
struct ToolCallResult {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};

// One finished choice of a non-streamed response.
struct ChoiceResult {
  int32_t index = 0;                  // prompt * n + copy
  std::string text;                   // with echo: the prompt's text first; with tool calls: the content
  int64_t text_offset = 0;            // completions logprobs: where the generated text starts (after an echo)
  std::vector<SampleResult> samples;  // when logprobs were asked
  FinishReason finish_reason = FinishReason::kNone;
  std::vector<ToolCallResult> tool_calls;  // chat: non-empty makes finish_reason "tool_calls" (content null if empty)
};

// The whole non-streamed answer: a "text_completion" or a "chat.completion".
boost::json::object CompletionResponse(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                                       const Usage& usage, const Tokenizer* tokenizer);

// One stream chunk for one choice. Chat: `role_only` makes the opening chunk (delta {"role": "assistant",
// "content": ""}); otherwise the delta carries `text` (none when empty). `*text_offset` as CompletionLogprobs.
struct ChunkPart {
  int32_t index = 0;
  std::string text;
  std::span<const SampleResult> samples;
  FinishReason finish_reason = FinishReason::kNone;
  bool role_only = false;
  boost::json::array tool_calls;  // delta.tool_calls entries (ToolCallDelta); none when empty
  bool called_tools = false;      // the choice made tool calls: its finish_reason is "tool_calls"
};
// A delta.tool_calls entry: the first one of a call carries {index, id, type, function: {name, arguments: ""}}
// (`call.id` set), later ones {index, function: {arguments}} with a fragment of the arguments.
boost::json::object ToolCallDelta(int32_t call_index, const ToolCallResult& call);
boost::json::object StreamChunk(const ResponseMeta& meta, const ChunkPart& part, const Tokenizer* tokenizer,
                                int64_t* text_offset, bool usage_null);
// The last chunk with include_usage: "choices": [] and the usage.
boost::json::object UsageChunk(const ResponseMeta& meta, const Usage& usage);

// Server-sent event framing: "data: <json>\n\n"; the stream ends with kSseDone.
std::string SseEvent(const boost::json::object& chunk);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace parallm::openai
