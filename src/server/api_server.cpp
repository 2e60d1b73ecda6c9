// ApiServer: routing, authentication, and the endpoints that are not generation.
#include "server/api_server.h"

#include <chrono>

#include <boost/json.hpp>

#include "openai/api_response.h"
#include "server/chat_page.h"
#include "server/generation_call.h"
#include "server/prometheus.h"

namespace parallm::server {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using openai::Api;
using openai::ApiError;

void ReplyError(HttpSession& session, const ApiError& error, const Headers& headers) {
  session.Reply(error.status, "application/json", boost::json::serialize(openai::ErrorBody(error)), headers);
}

namespace {

ApiError Unavailable(const char* why) { return {503, why, "service_unavailable", ""}; }

// The json helper for endpoints answered off the io thread: a status and a JSON body.
struct JsonReply {
  int status = 200;
  std::string body;
};
JsonReply ErrorReply(const ApiError& e) { return {e.status, boost::json::serialize(openai::ErrorBody(e))}; }

}  // namespace

ApiServer::ApiServer(asio::io_context& io, const ApiConfig& config, int parse_threads)
    : io_(io), config_(config), workers_(static_cast<size_t>(std::max(1, parse_threads))) {}

ApiServer::~ApiServer() { workers_.join(); }

void ApiServer::SetEngine(std::shared_ptr<AsyncEngine> engine, std::shared_ptr<const ModelText> text,
                          std::shared_ptr<LoraRegistry> loras, openai::ToolParser tool_parser,
                          bool auto_tool_choice) {
  engine_ = std::move(engine);
  text_ = std::move(text);
  loras_ = std::move(loras);
  parse_context_.model_names = {config_.served_model_name};
  if (loras_ != nullptr)
    parse_context_.is_adapter = [loras = loras_](const std::string& name) { return loras->Has(name); };
  parse_context_.vocab_size = engine_->model_config().vocab;
  parse_context_.max_model_len = engine_->engine_config().scheduler.max_model_len;
  parse_context_.text = text_.get();
  parse_context_.max_prompts = config_.max_prompts;
  parse_context_.tool_parser = tool_parser;
  parse_context_.auto_tool_choice = auto_tool_choice;
  if (text_->has_tokenizer()) {
    grammars_ = std::make_unique<structured::GrammarCompiler>(
        structured::TokenVocab::FromTokenizer(*text_->tokenizer(), parse_context_.vocab_size));
    parse_context_.grammars = grammars_.get();
  }
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count();
  ready_ = true;
}

void ApiServer::Handle(const std::shared_ptr<HttpSession>& session, HttpRequest request) {
  Headers headers;
  if (auto it = request.find("x-request-id"); it != request.end() && !it->value().empty())
    headers.emplace_back("x-request-id", std::string(it->value()));
  if (shutting_down_) session->CloseAfterAnswer();
  std::string_view target(request.target().data(), request.target().size());
  const std::string path(target.substr(0, target.find('?')));
  const http::verb method = request.method();

  if (!config_.api_key.empty() && path.starts_with("/v1/")) {
    const auto auth = request[http::field::authorization];
    if (std::string_view(auth.data(), auth.size()) != "Bearer " + config_.api_key)
      return ReplyError(*session, {401, "Invalid or missing API key (send 'Authorization: Bearer <key>')",
                                   "authentication_error", ""},
                        headers);
  }
  auto expect = [&](http::verb verb) {
    if (method == verb) return true;
    ReplyError(*session, {405, fmt::format("{} takes {}", path, std::string(http::to_string(verb))),
                          "invalid_request_error", ""},
               headers);
    return false;
  };

  if (path == "/" || path == "/index.html") {
    // The chat page: static, so no API key (its requests to /v1/* carry the one typed into it).
    if (!expect(http::verb::get)) return;
    Headers page_headers = headers;
    page_headers.emplace_back("Content-Security-Policy", std::string(kChatPageCsp));
    return session->Reply(200, "text/html; charset=utf-8", std::string(ChatPageHtml()), page_headers);
  }
  if (path == "/health") {
    if (!expect(http::verb::get)) return;
    if (!ready_) return ReplyError(*session, Unavailable("The model is loading"), headers);
    if (shutting_down_) return ReplyError(*session, Unavailable("The server is shutting down"), headers);
    return session->Reply(200, "application/json", "{}", headers);
  }
  if (path == "/metrics") {
    if (!expect(http::verb::get)) return;
    std::string page = ready_ ? RenderPrometheus(engine_->Metrics(), config_.served_model_name) : std::string();
    return session->Reply(200, "text/plain; version=0.0.4; charset=utf-8", std::move(page), headers);
  }
  if (path == "/version") {
    if (!expect(http::verb::get)) return;
    return session->Reply(200, "application/json", R"({"version":"0.1.0"})", headers);
  }
  if (path == "/v1/models") {
    if (!expect(http::verb::get)) return;
    return session->Reply(200, "application/json", ModelsJson(), headers);
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!expect(http::verb::post)) return;
    return HandleGeneration(session, request, path == "/v1/completions" ? Api::kCompletions : Api::kChat, headers);
  }
  if (path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter") {
    if (!expect(http::verb::post)) return;
    return HandleLoraAdapter(session, request, path == "/v1/load_lora_adapter", headers);
  }
  if (path == "/tokenize") {
    if (!expect(http::verb::post)) return;
    return HandleTokenize(session, request, headers);
  }
  if (path == "/detokenize") {
    if (!expect(http::verb::post)) return;
    return HandleDetokenize(session, request, headers);
  }
  ReplyError(*session, {404, fmt::format("Not found: {}", path), "NotFoundError", ""}, headers);
}

std::string ApiServer::ModelsJson() const {
  boost::json::object model{{"id", config_.served_model_name},
                            {"object", "model"},
                            {"created", created_},
                            {"owned_by", "parallm"},
                            {"root", config_.model_root},
                            {"parent", nullptr}};
  if (ready_) model["max_model_len"] = engine_->engine_config().scheduler.max_model_len;
  boost::json::array data{model};
  // The adapters, as vLLM lists them: their path as root, the base model as parent.
  if (ready_ && loras_ != nullptr) {
    for (const LoraRegistry::Entry& e : loras_->List()) {
      boost::json::object adapter{{"id", e.name},          {"object", "model"},   {"created", created_},
                                  {"owned_by", "parallm"}, {"root", e.path},      {"parent", config_.served_model_name}};
      adapter["max_model_len"] = engine_->engine_config().scheduler.max_model_len;
      data.push_back(std::move(adapter));
    }
  }
  return boost::json::serialize(boost::json::object{{"object", "list"}, {"data", std::move(data)}});
}

void ApiServer::HandleLoraAdapter(const std::shared_ptr<HttpSession>& session, const HttpRequest& request, bool load,
                                  const Headers& headers) {
  if (!ready_) return ReplyError(*session, Unavailable("The model is loading"), headers);
  if (loras_ == nullptr)
    return ReplyError(*session, {400, "this server was started without LoRA support", "invalid_request_error", ""},
                      headers);
  // Loading reads the adapter's files: off the io thread.
  asio::post(workers_, [this, session, body = request.body(), load, headers] {
    auto work = [&]() -> JsonReply {
      auto json = openai::ParseJsonObject(body);
      if (auto* e = std::get_if<ApiError>(&json)) return ErrorReply(*e);
      const boost::json::object& o = std::get<boost::json::object>(json);
      const auto* name = o.if_contains("lora_name");
      if (name == nullptr || !name->is_string() || name->as_string().empty())
        return ErrorReply({400, "'lora_name' must be a non-empty string", "invalid_request_error", "lora_name"});
      const std::string lora_name(name->as_string());
      if (!load) {
        if (!loras_->Remove(lora_name))
          return ErrorReply({404, fmt::format("The lora adapter '{}' cannot be found.", lora_name), "NotFoundError",
                             "lora_name"});
        return {200, boost::json::serialize(boost::json::string(
                         fmt::format("Success: LoRA adapter '{}' removed successfully.", lora_name)))};
      }
      const auto* path = o.if_contains("lora_path");
      if (path == nullptr || !path->is_string() || path->as_string().empty())
        return ErrorReply({400, "'lora_path' must be a non-empty string", "invalid_request_error", "lora_path"});
      if (lora_name == config_.served_model_name || loras_->Has(lora_name))
        return ErrorReply({400, fmt::format("The lora adapter '{}' has already been loaded.", lora_name),
                           "invalid_request_error", "lora_name"});
      if (Status st = loras_->Add(lora_name, std::string(path->as_string())); !st.ok())
        return ErrorReply({400, st.message(), "invalid_request_error", "lora_path"});
      return {200, boost::json::serialize(boost::json::string(
                       fmt::format("Success: LoRA adapter '{}' added successfully.", lora_name)))};
    };
    JsonReply reply = work();
    asio::post(io_, [session, reply = std::move(reply), headers] {
      session->Reply(reply.status, "application/json", reply.body, headers);
    });
  });
}

void ApiServer::HandleGeneration(const std::shared_ptr<HttpSession>& session, const HttpRequest& request, Api api,
                                 const Headers& headers) {
  if (!ready_) return ReplyError(*session, Unavailable("The model is loading"), headers);
  if (shutting_down_) return ReplyError(*session, Unavailable("The server is shutting down"), headers);
  // Parsing includes tokenization and chat templating, which take a while for long prompts: off the io thread.
  asio::post(workers_, [this, session, body = request.body(), api, headers]() mutable {
    openai::ParsedRequest parsed = api == Api::kChat ? openai::ParseChatRequest(body, parse_context_)
                                                     : openai::ParseCompletionRequest(body, parse_context_);
    // A `model` naming a LoRA adapter: its weights, loaded again here if they were evicted (off the io thread).
    std::shared_ptr<const LoraAdapter> adapter;
    if (auto* r = std::get_if<openai::ApiRequest>(&parsed);
        r != nullptr && loras_ != nullptr && !r->model.empty() && r->model != config_.served_model_name) {
      auto acquired = loras_->Acquire(r->model);
      if (acquired.ok()) {
        adapter = std::move(*acquired);
      } else if (!loras_->Has(r->model)) {  // unloaded since the request was parsed
        parsed = ApiError{404, acquired.status().message(), "NotFoundError", "model"};
      } else {
        parsed = ApiError{500, acquired.status().message(), "internal_error", "model"};
      }
    }
    asio::post(io_, [this, session, parsed = std::move(parsed), adapter = std::move(adapter), headers]() mutable {
      if (session->closed()) return;
      if (auto* error = std::get_if<ApiError>(&parsed)) return ReplyError(*session, *error, headers);
      if (shutting_down_) return ReplyError(*session, Unavailable("The server is shutting down"), headers);
      auto call = std::make_shared<GenerationCall>(*this, session, std::move(std::get<openai::ApiRequest>(parsed)),
                                                   headers, std::move(adapter));
      call->Start();
    });
  });
}

template <typename Answer>
void ApiServer::AnswerTokenizerRequest(const std::shared_ptr<HttpSession>& session, const HttpRequest& request,
                                       const Headers& headers, Answer answer) {
  if (!ready_) return ReplyError(*session, Unavailable("The model is loading"), headers);
  asio::post(workers_, [this, session, body = request.body(), headers, answer = std::move(answer)] {
    auto work = [&]() -> JsonReply {
      auto json = openai::ParseJsonObject(body);
      if (auto* e = std::get_if<ApiError>(&json)) return ErrorReply(*e);
      const boost::json::object& o = std::get<boost::json::object>(json);
      if (const auto* m = o.if_contains("model"); m && m->is_string() && m->as_string() != config_.served_model_name)
        return ErrorReply({404, fmt::format("The model '{}' does not exist.", std::string(m->as_string())),
                           "NotFoundError", "model"});
      if (!text_->has_tokenizer()) return ErrorReply({400, "this model has no tokenizer", "invalid_request_error", ""});
      return answer(o);
    };
    JsonReply reply = work();
    asio::post(io_, [session, reply = std::move(reply), headers] {
      session->Reply(reply.status, "application/json", reply.body, headers);
    });
  });
}

void ApiServer::HandleTokenize(const std::shared_ptr<HttpSession>& session, const HttpRequest& request,
                               const Headers& headers) {
  AnswerTokenizerRequest(session, request, headers, [this](const boost::json::object& o) -> JsonReply {
    bool add_special = true;
    if (const auto* a = o.if_contains("add_special_tokens"); a && a->is_bool()) add_special = a->as_bool();
    std::vector<int32_t> ids;
    if (const auto* messages = o.if_contains("messages"); messages && !messages->is_null()) {
      if (!messages->is_array() || messages->as_array().empty())
        return ErrorReply({400, "'messages' must be a non-empty list", "invalid_request_error", "messages"});
      // As chat requests render them (vLLM's /tokenize takes `tools` too): tool calls' arguments as objects.
      boost::json::array normalized = messages->as_array();
      for (size_t i = 0; i < normalized.size(); ++i) {
        boost::json::object* m = normalized[i].if_object();
        if (m == nullptr || !m->contains("role") || !m->at("role").is_string())
          return ErrorReply({400, fmt::format("messages[{}] must be an object with a string 'role'", i),
                             "invalid_request_error", "messages"});
        if (auto e = openai::NormalizeToolMessage(*m, i))
          return ErrorReply({400, *e, "invalid_request_error", "messages"});
      }
      boost::json::object extra;
      if (const auto* tools = o.if_contains("tools"); tools && tools->is_array()) extra["tools"] = *tools;
      auto r = text_->EncodeChat(normalized, extra);
      if (!r.ok()) return ErrorReply({400, r.status().message(), "invalid_request_error", "messages"});
      ids = std::move(*r);
    } else if (const auto* prompt = o.if_contains("prompt"); prompt && prompt->is_string()) {
      const std::string text(prompt->as_string());
      if (add_special) {
        auto r = text_->EncodePrompt(text);
        if (!r.ok()) return ErrorReply({400, r.status().message(), "invalid_request_error", "prompt"});
        ids = std::move(*r);
      } else {
        ids = text_->tokenizer()->Encode(text, /*add_special=*/false, /*parse_special=*/true);
      }
    } else {
      return ErrorReply({400, "give 'prompt' (a string) or 'messages'", "invalid_request_error", "prompt"});
    }
    boost::json::array tokens;
    for (int32_t t : ids) tokens.push_back(t);
    boost::json::object out{{"count", static_cast<int64_t>(ids.size())},
                            {"max_model_len", parse_context_.max_model_len},
                            {"tokens", tokens}};
    if (const auto* s = o.if_contains("return_token_strs"); s && s->is_bool() && s->as_bool()) {
      boost::json::array strs;
      for (int32_t t : ids) strs.emplace_back(text_->tokenizer()->TokenText(t));
      out["token_strs"] = strs;
    }
    return {200, boost::json::serialize(out)};
  });
}

void ApiServer::HandleDetokenize(const std::shared_ptr<HttpSession>& session, const HttpRequest& request,
                                 const Headers& headers) {
  AnswerTokenizerRequest(session, request, headers, [this](const boost::json::object& o) -> JsonReply {
    const auto* tokens = o.if_contains("tokens");
    if (tokens == nullptr || !tokens->is_array())
      return ErrorReply({400, "'tokens' must be a list of token ids", "invalid_request_error", "tokens"});
    std::vector<int32_t> ids;
    for (const auto& t : tokens->as_array()) {
      if (!t.is_int64() || t.as_int64() < 0 || t.as_int64() >= parse_context_.vocab_size)
        return ErrorReply({400, fmt::format("token {} is not in this model's vocabulary", boost::json::serialize(t)),
                           "invalid_request_error", "tokens"});
      ids.push_back(static_cast<int32_t>(t.as_int64()));
    }
    return {200, boost::json::serialize(boost::json::object{{"prompt", text_->tokenizer()->Decode(ids, /*skip_special=*/false)}})};
  });
}

}  // namespace parallm::server
