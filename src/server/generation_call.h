// GenerationCall: one /v1/completions or /v1/chat/completions request from submission to its last byte: submits
// each prompt to the AsyncEngine, turns the engine's updates (posted to the io thread) into stream chunks or one
// response, and cancels everything when the client goes away.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "openai/api_request.h"
#include "openai/api_response.h"
#include "openai/tool_parser.h"
#include "server/http_session.h"

namespace parallm::server {

class ApiServer;

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  // `headers` go on the response (x-request-id); `adapter`: the LoRA adapter the request's `model` named (nullptr:
  // the base model).
  GenerationCall(ApiServer& server, std::shared_ptr<HttpSession> session, openai::ApiRequest request,
                 Headers headers, std::shared_ptr<const LoraAdapter> adapter = nullptr);
  // Validates and submits every prompt; answers at once when the engine refuses (400, 429, 503).
  void Start();

 private:
  struct ChoiceState {
    std::string text;                   // non-streamed: the whole text so far (echo first)
    std::vector<SampleResult> samples;  // non-streamed, with logprobs
    int64_t text_offset = 0;            // completions logprobs: characters before the next token
    int64_t num_tokens = 0;
    FinishReason finish_reason = FinishReason::kNone;
    std::unique_ptr<openai::ToolCallStream> tools;  // streamed chat with tool parsing: content and calls so far
    int32_t calls_sent = 0;
  };

  void OnUpdate(size_t prompt, RequestUpdate update);
  // Streamed chat with tool parsing: the update's text through the choice's ToolCallStream, out as content and
  // tool_calls deltas.
  void StreamWithTools(size_t index, ChoiceState& st, ChoiceUpdate& c);
  // A forced tool_choice whose answer holds no valid call (or calls an unknown function): the error message.
  std::string ForcedCallError(const std::vector<openai::ToolCall>& calls, const std::string& text) const;
  void CancelAll();
  void Finish();
  openai::Usage TotalUsage() const;

  ApiServer& server_;
  std::shared_ptr<HttpSession> session_;
  openai::ApiRequest request_;
  std::shared_ptr<const LoraAdapter> adapter_;
  Headers headers_;
  openai::ResponseMeta meta_;
  std::vector<uint64_t> ids_;          // engine submission per prompt
  std::vector<bool> prompt_done_;
  std::vector<int32_t> cached_tokens_;  // per prompt
  std::vector<ChoiceState> choices_;    // prompt * n + copy
  std::string error_;                   // the engine refused a request after all, or a forced tool call failed
  bool server_error_ = false;           // error_ is the model's failure (500 server_error), not the request's
  size_t open_prompts_ = 0;
  bool finished_ = false;
  std::shared_ptr<GenerationCall> self_;  // the call keeps itself alive from submission until Finish
};

// "cmpl-" / "chatcmpl-" followed by 32 random hex digits.
std::string NewResponseId(openai::Api api);

}  // namespace parallm::server
