// GenerationCall: engine updates in, OpenAI stream chunks or one response out, on the io thread.
#include "server/generation_call.h"

#include <chrono>
#include <random>

#include "server/api_server.h"

namespace parallm::server {
namespace asio = boost::asio;
using openai::Api;

std::string NewResponseId(Api api) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{}{:016x}{:016x}", api == Api::kChat ? "chatcmpl-" : "cmpl-", rng(), rng());
}

GenerationCall::GenerationCall(ApiServer& server, std::shared_ptr<HttpSession> session, openai::ApiRequest request,
                               Headers headers, std::shared_ptr<const LoraAdapter> adapter)
    : server_(server),
      session_(std::move(session)),
      request_(std::move(request)),
      adapter_(std::move(adapter)),
      headers_(std::move(headers)) {
  meta_.api = request_.api;
  meta_.id = NewResponseId(request_.api);
  meta_.created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  meta_.model = request_.model.empty() ? server_.config().served_model_name : request_.model;
  meta_.logprobs = request_.params.logprobs;
  const size_t n = static_cast<size_t>(request_.params.n);
  choices_.resize(request_.prompts.size() * n);
  for (size_t p = 0; p < request_.prompts.size(); ++p) {
    const std::string& echo = request_.echo ? request_.echo_texts[p] : std::string();
    for (size_t k = 0; k < n; ++k) {
      choices_[p * n + k].text = request_.stream ? std::string() : echo;
      choices_[p * n + k].text_offset = openai::Utf8Length(echo);
      if (request_.stream && request_.tool_parser != openai::ToolParser::kNone)
        choices_[p * n + k].tools = std::make_unique<openai::ToolCallStream>(
            request_.tool_parser, request_.tool_opening, !request_.tools.parallel_tool_calls);
    }
  }
  prompt_done_.assign(request_.prompts.size(), false);
  cached_tokens_.assign(request_.prompts.size(), 0);
}

void GenerationCall::Start() {
  AsyncEngine& engine = server_.engine();
  // Everything the engine would refuse is refused before anything is submitted.
  for (const auto& prompt : request_.prompts) {
    GenerationRequest g{prompt, request_.params, 0, adapter_};
    if (Status st = engine.Validate(g); !st.ok()) {
      const std::string param = openai::ParamOfMessage(st.message());
      return ReplyError(*session_, {400, st.message(), "invalid_request_error",
                                    param.empty() ? (request_.api == Api::kChat ? "messages" : "prompt") : param},
                        headers_);
    }
  }
  server_.CallStarted();
  auto self = shared_from_this();
  std::weak_ptr<GenerationCall> weak = self;
  asio::io_context& io = server_.io();
  for (size_t p = 0; p < request_.prompts.size(); ++p) {
    // Called on the engine thread: hand the update to the io thread and return at once.
    RequestSink sink = [weak, p, &io](RequestUpdate update) {
      asio::post(io, [weak, p, update = std::move(update)]() mutable {
        if (auto call = weak.lock()) call->OnUpdate(p, std::move(update));
      });
    };
    Submission s = engine.Submit(GenerationRequest{request_.prompts[p], request_.params, 0, adapter_}, std::move(sink));
    if (s.admission != Admission::kAccepted) {
      CancelAll();
      finished_ = true;
      server_.CallEnded();
      if (s.admission == Admission::kQueueFull)
        return ReplyError(*session_, {429, "Too many requests are queued; try again later", "rate_limit_error", ""},
                          headers_);
      return ReplyError(*session_, {503, "The server is shutting down", "service_unavailable", ""}, headers_);
    }
    ids_.push_back(s.id);
  }
  open_prompts_ = request_.prompts.size();
  self_ = self;
  session_->OnDisconnect([weak] {
    if (auto call = weak.lock()) call->CancelAll();
  });
  if (!request_.stream) return;
  session_->StartEventStream(headers_);
  // Chat streams open each choice with its role; completions with echo open with the prompt's text.
  const int32_t n = request_.params.n;
  for (size_t i = 0; i < choices_.size(); ++i) {
    openai::ChunkPart part;
    part.index = static_cast<int32_t>(i);
    if (request_.api == Api::kChat) {
      part.role_only = true;
    } else if (request_.echo) {
      part.text = request_.echo_texts[i / static_cast<size_t>(n)];
      if (part.text.empty()) continue;
    } else {
      continue;
    }
    int64_t offset = 0;
    session_->SendEvent(openai::SseEvent(openai::StreamChunk(meta_, part, server_.engine().tokenizer(), &offset,
                                                             request_.include_usage)));
  }
}

void GenerationCall::CancelAll() {
  for (uint64_t id : ids_) server_.engine().Cancel(id);
}

void GenerationCall::OnUpdate(size_t prompt, RequestUpdate update) {
  if (finished_ || prompt_done_[prompt]) return;
  const size_t n = static_cast<size_t>(request_.params.n);
  cached_tokens_[prompt] = std::max(cached_tokens_[prompt], update.cached_tokens);
  const Tokenizer* tokenizer = server_.engine().tokenizer();
  for (ChoiceUpdate& c : update.choices) {
    const size_t index = prompt * n + static_cast<size_t>(c.index);
    if (index >= choices_.size()) continue;
    ChoiceState& st = choices_[index];
    st.num_tokens += static_cast<int64_t>(c.new_tokens.size());
    if (c.finished) st.finish_reason = c.finish_reason;
    if (request_.stream && st.tools) {
      StreamWithTools(index, st, c);
    } else if (request_.stream) {
      const bool has_logprobs = request_.params.logprobs >= 0 && !c.new_samples.empty();
      if (c.new_text.empty() && !c.finished && !has_logprobs) continue;  // text held back (a partial character)
      openai::ChunkPart part;
      part.index = static_cast<int32_t>(index);
      part.text = std::move(c.new_text);
      part.samples = c.new_samples;
      part.finish_reason = c.finished ? c.finish_reason : FinishReason::kNone;
      session_->SendEvent(
          openai::SseEvent(openai::StreamChunk(meta_, part, tokenizer, &st.text_offset, request_.include_usage)));
    } else {
      st.text += c.new_text;
      st.samples.insert(st.samples.end(), c.new_samples.begin(), c.new_samples.end());
    }
  }
  if (!update.error.empty() && error_.empty()) error_ = update.error;
  if (update.done) {
    prompt_done_[prompt] = true;
    if (--open_prompts_ == 0) Finish();
  }
}

std::string GenerationCall::ForcedCallError(const std::vector<openai::ToolCall>& calls, const std::string& text) const {
  const bool forced = !request_.tool_opening.empty();
  if (!forced) return "";
  if (calls.empty())
    // The grammar only lets the model write valid calls, so this is an answer cut short (max_tokens, a stop string).
    return fmt::format("tool_choice asked for a call, but the answer ended before a complete {} tool call "
                       "(max_tokens or a stop string cut it): {:.200}",
                       openai::ToolParserName(request_.tool_parser), request_.tool_opening + text);
  for (const openai::ToolCall& call : calls)
    if (request_.tools.Find(call.name) == nullptr)
      return fmt::format("tool_choice \"required\": the model called '{}', which is not in 'tools'", call.name);
  return "";
}

void GenerationCall::StreamWithTools(size_t index, ChoiceState& st, ChoiceUpdate& c) {
  const Tokenizer* tokenizer = server_.engine().tokenizer();
  const bool forced = !request_.tool_opening.empty();
  openai::ToolCallStream::Output out = st.tools->Add(c.new_text, c.finished);
  if (forced) out.content.clear();  // a forced answer is calls only; what is not a call makes it an error below
  auto send = [&](openai::ChunkPart part) {
    part.index = static_cast<int32_t>(index);
    session_->SendEvent(
        openai::SseEvent(openai::StreamChunk(meta_, part, tokenizer, &st.text_offset, request_.include_usage)));
  };
  const bool has_logprobs = request_.params.logprobs >= 0 && !c.new_samples.empty();
  if (!out.content.empty() || has_logprobs) {
    openai::ChunkPart part;
    part.text = std::move(out.content);
    part.samples = c.new_samples;
    send(std::move(part));
  }
  for (const openai::ToolCall& call : out.calls) {
    if (!ForcedCallError({call}, "").empty()) continue;  // reported when the answer ends
    // As OpenAI streams a call: id and name first, then the arguments.
    const int32_t k = st.calls_sent++;
    openai::ChunkPart head, args;
    head.tool_calls.push_back(openai::ToolCallDelta(k, {openai::NewToolCallId(request_.tool_parser), call.name, ""}));
    send(std::move(head));
    args.tool_calls.push_back(openai::ToolCallDelta(k, {"", call.name, call.arguments}));
    send(std::move(args));
  }
  if (!c.finished) return;
  if (std::string e = ForcedCallError(st.tools->calls(), st.tools->content()); !e.empty() && error_.empty()) {
    error_ = e;
    server_error_ = true;
  }
  openai::ChunkPart last;
  last.finish_reason = c.finish_reason;
  last.called_tools = st.calls_sent > 0;
  send(std::move(last));
}

openai::Usage GenerationCall::TotalUsage() const {
  openai::Usage u;
  for (const auto& p : request_.prompts) u.prompt_tokens += static_cast<int64_t>(p.size());
  for (int32_t c : cached_tokens_) u.cached_tokens += c;
  for (const ChoiceState& c : choices_) u.completion_tokens += c.num_tokens;
  return u;
}

void GenerationCall::Finish() {
  finished_ = true;
  server_.CallEnded();
  session_->OnDisconnect(nullptr);
  if (request_.stream) {
    if (!error_.empty()) {
      session_->SendEvent(openai::SseEvent(openai::ErrorBody(
          {server_error_ ? 500 : 400, error_, server_error_ ? "server_error" : "invalid_request_error", ""})));
    } else if (request_.include_usage) {
      session_->SendEvent(openai::SseEvent(openai::UsageChunk(meta_, TotalUsage())));
    }
    session_->SendEvent(std::string(openai::kSseDone));
    session_->EndEventStream();
  } else if (!error_.empty()) {
    ReplyError(*session_, {400, error_, "invalid_request_error", ""}, headers_);
  } else {
    std::vector<openai::ChoiceResult> results;
    std::string tool_error;
    for (size_t i = 0; i < choices_.size(); ++i) {
      ChoiceState& st = choices_[i];
      const int64_t offset = request_.echo ? openai::Utf8Length(request_.echo_texts[i / request_.params.n]) : 0;
      results.push_back({static_cast<int32_t>(i), std::move(st.text), offset, std::move(st.samples), st.finish_reason, {}});
      if (request_.tool_parser == openai::ToolParser::kNone) continue;
      openai::ChoiceResult& r = results.back();
      openai::ParsedToolCalls parsed = openai::ParseToolCalls(request_.tool_parser, r.text, request_.tool_opening,
                                                              !request_.tools.parallel_tool_calls);
      if (std::string e = ForcedCallError(parsed.calls, r.text); !e.empty()) {
        if (tool_error.empty()) tool_error = std::move(e);
        continue;
      }
      // A forced answer is calls only (as streamed: StreamWithTools drops its content).
      r.text = request_.tool_opening.empty() ? std::move(parsed.content) : std::string();
      for (openai::ToolCall& call : parsed.calls)
        r.tool_calls.push_back({openai::NewToolCallId(request_.tool_parser), std::move(call.name),
                                std::move(call.arguments)});
    }
    if (!tool_error.empty()) {
      // The request was valid; the model's answer was not a call.
      ReplyError(*session_, {500, tool_error, "server_error", ""}, headers_);
    } else {
      const auto body = openai::CompletionResponse(meta_, results, TotalUsage(), server_.engine().tokenizer());
      session_->Reply(200, "application/json", boost::json::serialize(body), headers_);
    }
  }
  session_.reset();  // the session may go; nothing more is written
  self_.reset();     // last: may destroy this
}

}  // namespace parallm::server
