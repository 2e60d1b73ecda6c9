// ApiServer: the OpenAI-compatible application behind the HTTP sessions: routing, the API key, and every
// endpoint of docs/API.md (completions and chat through GenerationCall; models, tokenize, detokenize, health,
// metrics here). Lives on the io thread; JSON parsing and tokenization of generation requests run on a small
// worker pool so a long prompt does not hold up other connections.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <boost/asio.hpp>

#include "chat/model_text.h"
#include "engine/async_engine.h"
#include "engine/lora_registry.h"
#include "openai/api_request.h"
#include "server/http_session.h"

namespace parallm::server {

struct ApiConfig {
  std::string served_model_name;  // /v1/models id and the name requests must use
  std::string model_root;         // /v1/models root: the path the model was loaded from
  std::string api_key;            // empty: no authentication
  int32_t max_prompts = 256;      // completions: prompts per request
};

class ApiServer : public HttpHandler {
 public:
  ApiServer(boost::asio::io_context& io, const ApiConfig& config, int parse_threads);
  ~ApiServer() override;

  // Called once the model is loaded (from any thread): generation endpoints and /health open.
  // `loras`: the LoRA adapters requests may name as their `model` (nullptr: none, and no adapter endpoints).
  void SetEngine(std::shared_ptr<AsyncEngine> engine, std::shared_ptr<const ModelText> text,
                 std::shared_ptr<LoraRegistry> loras = nullptr,
                 openai::ToolParser tool_parser = openai::ToolParser::kNone, bool auto_tool_choice = false);
  // Shutting down: /health answers 503, new generation requests 503, connections close after their answer.
  void BeginShutdown() { shutting_down_ = true; }
  bool ready() const { return ready_.load(); }
  // Generation requests being answered (io thread).
  int32_t num_active_calls() const { return active_calls_; }

  void Handle(const std::shared_ptr<HttpSession>& session, HttpRequest request) override;

  // Used by GenerationCall.
  boost::asio::io_context& io() { return io_; }
  AsyncEngine& engine() { return *engine_; }
  const ModelText& text() const { return *text_; }
  const ApiConfig& config() const { return config_; }
  void CallStarted() { ++active_calls_; }
  void CallEnded() { --active_calls_; }

 private:
  void HandleGeneration(const std::shared_ptr<HttpSession>& session, const HttpRequest& request, openai::Api api,
                        const Headers& headers);
  void HandleTokenize(const std::shared_ptr<HttpSession>& session, const HttpRequest& request, const Headers& headers);
  void HandleDetokenize(const std::shared_ptr<HttpSession>& session, const HttpRequest& request,
                        const Headers& headers);
  // What /tokenize and /detokenize share: `answer(object)` runs on a worker thread once the body is a JSON object
  // naming this model (or none) and the model has a tokenizer; its reply goes back on the io thread.
  template <typename Answer>
  void AnswerTokenizerRequest(const std::shared_ptr<HttpSession>& session, const HttpRequest& request,
                              const Headers& headers, Answer answer);
  std::string ModelsJson() const;
  // vLLM's POST /v1/load_lora_adapter {"lora_name", "lora_path"} and /v1/unload_lora_adapter {"lora_name"}.
  void HandleLoraAdapter(const std::shared_ptr<HttpSession>& session, const HttpRequest& request, bool load,
                         const Headers& headers);

  boost::asio::io_context& io_;
  ApiConfig config_;
  boost::asio::thread_pool workers_;  // request parsing and tokenization
  std::atomic<bool> ready_{false};
  std::atomic<bool> shutting_down_{false};
  // Set once by SetEngine (before ready_ becomes true), read after.
  std::shared_ptr<AsyncEngine> engine_;
  std::shared_ptr<const ModelText> text_;
  std::shared_ptr<LoraRegistry> loras_;
  openai::ParseContext parse_context_;
  std::unique_ptr<structured::GrammarCompiler> grammars_;  // structured outputs; when the model has a tokenizer
  int32_t active_calls_ = 0;
  int64_t created_ = 0;  // Unix seconds when the model became ready
};

// Answers `error` as OpenAI's error body with its status.
void ReplyError(HttpSession& session, const openai::ApiError& error, const Headers& headers = {});

}  // namespace parallm::server
