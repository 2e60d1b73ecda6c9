// Requests as JSON objects with OpenAI field names: sampling parameters, and `parallm batch` input lines.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "chat/model_text.h"
#include "engine/sampling_params.h"
#include "openai/tool_parser.h"
#include "openai/tools.h"
#include "structured/structured_output.h"
#include "util/status.h"

namespace parallm::openai {

// Reads max_tokens, temperature, top_p, top_k, min_p, seed, presence_penalty, frequency_penalty,
// repetition_penalty, logit_bias, stop_token_ids, ignore_eos, skip_special_tokens, logprobs from `o`; errors name
// the field and the expected type. Unknown fields are ignored (clients send many); range checks are
// SamplingParams::Validate's.
Result<SamplingParams> ParseSamplingParams(const boost::json::object& o);

struct BatchRequest {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams params;
  ToolsRequest tools;
  std::string tool_opening;                    // a forced tool_choice's call opening, at the end of the prompt
  ToolParser tool_parser = ToolParser::kNone;  // set when the answer is parsed for tool calls
  std::string model;  // "model": a LoRA adapter's name (empty: the base model)
};

// One input line: {"id": "q1", "prompt": "..." | "messages": [...] | "prompt_ids": [1, 2], "model": "...",
// ...sampling fields}. Ids may be strings or numbers (kept as text). Text prompts and messages (through the chat
// template, with "tools" when given) need `text`. The default max_tokens is 16, as OpenAI's completions API. With
// "messages", "tools", "tool_choice" and "parallel_tool_calls" as in chat requests (tools.h); answers are parsed for
// calls with `tool_parser` (tool_choice "auto", "required" or named need one). response_format /
// structured_outputs / guided_* are compiled with `grammars` (null: refused).
Result<BatchRequest> ParseBatchLine(const std::string& line, int line_no, int32_t vocab_size, const ModelText* text,
                                    ToolParser tool_parser = ToolParser::kNone,
                                    structured::GrammarCompiler* grammars = nullptr);

}  // namespace parallm::openai
