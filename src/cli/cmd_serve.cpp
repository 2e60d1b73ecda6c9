// `parallm serve`: the OpenAI-compatible HTTP server (docs/API.md) on the continuous-batching engine.
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/kv_cache_dtype_option.h"
#include "cli/speculative_option.h"
#include "server/server.h"

namespace parallm::cli {

void AddServeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve the model over HTTP with the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models, "
      "/tokenize, /detokenize, /health, /metrics), as vLLM and llama.cpp's server do, and a chat page at /");
  // What the command loads (the server itself only gets the engine it builds).
  struct ModelSide {
    std::string model, tokenizer, chat_template;
    std::string tool_call_parser;
    bool enable_auto_tool_choice = false;
    int max_model_len = 0;
    EngineConfig engine;
    AsyncEngineConfig async;
    std::vector<std::string> lora_modules;  // NAME=PATH
    int max_loras = 8;
    int max_cpu_loras = 0;  // 0: max_loras
  };
  auto m = std::make_shared<ModelSide>();
  m->engine.kv_cache_gb = 2.0;
  m->engine.scheduler.max_num_seqs = 64;
  m->engine.scheduler.max_num_batched_tokens = 512;
  auto o = std::make_shared<server::ServerOptions>();
  auto body_mb = std::make_shared<double>(32);
  auto keep_alive_s = std::make_shared<double>(5);
  auto no_prefix_caching = std::make_shared<bool>(false);
  cmd->add_option("-m,--model", m->model, "Model: .gguf file, llama2.c .bin, Hugging Face / MLX folder, or synthetic:...")
      ->required();
  cmd->add_option("--lora-modules", m->lora_modules,
                  "LoRA adapters as NAME=PATH (vLLM's flag; mlx-lm or PEFT folders, llama.cpp GGUF LoRA files); "
                  "requests choose one by its name in 'model'")
      ->expected(1, -1);
  cmd->add_option("--max-loras", m->max_loras,
                  "Most LoRA adapters in one batch (vLLM's flag): requests for another adapter wait until one of "
                  "these has no running request")
      ->capture_default_str();
  cmd->add_option("--max-cpu-loras", m->max_cpu_loras,
                  "LoRA adapters kept loaded at once (vLLM's flag; default: --max-loras); beyond that the least "
                  "recently used is evicted and loaded again when next asked for");
  cmd->add_option("--tokenizer", m->tokenizer,
                  "Tokenizer instead of the model's (tokenizer.json or folder, .gguf, tokenizer.bin)");
  AddChatTemplateOption(cmd, &m->chat_template);
  AddMaxModelLenOption(cmd, &m->max_model_len);
  cmd->add_option("--tool-call-parser", m->tool_call_parser,
                  "How tool calls are found in answers: hermes (Qwen2.5/Qwen3/Hermes <tool_call>), llama3_json, "
                  "mistral (default: what the chat template's tool format calls for, when it is unambiguous)")
      ->check(CLI::IsMember({"hermes", "llama3_json", "mistral"}));
  cmd->add_flag("--enable-auto-tool-choice", m->enable_auto_tool_choice,
                "Parse tool calls out of answers to requests with tool_choice \"auto\" (the default when tools are "
                "given), as vLLM's flag; without it such requests are refused");
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "Port to listen on (0: any free port; the one chosen is printed)")
      ->capture_default_str();
  cmd->add_option("--served-model-name", o->served_model_name,
                  "The model's name in the API (requests must use it; default: the --model path)");
  cmd->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on /v1/* (401 otherwise)");
  cmd->add_option("-t,--threads", m->engine.threads, "Engine threads (default: all cores)");
  cmd->add_option("--kv-cache-gb", m->engine.kv_cache_gb, "KV cache size in GiB")->capture_default_str();
  cmd->add_option("--num-kv-blocks", m->engine.num_kv_blocks, "KV cache size in blocks (overrides --kv-cache-gb)");
  cmd->add_option("--block-size", m->engine.block_size, "Tokens per KV block")->capture_default_str();
  cmd->add_option("--max-num-seqs", m->engine.scheduler.max_num_seqs, "Requests running at once")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", m->engine.scheduler.max_num_batched_tokens,
                 "Tokens per engine step: decodes first, prompt chunks fill the rest (smaller: shorter steps under "
                 "load, so lower inter-token latency, but a slower first token)")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-caching", *no_prefix_caching,
                "Do not share KV blocks between requests with a common prefix");
  AddSpeculativeOption(cmd, &m->engine.scheduler.speculative);
  AddKvCacheDtypeOption(cmd, &m->engine.kv_cache_dtype);
  cmd->add_option("--max-queued-requests", m->async.max_queued_requests,
                  "Requests waiting beyond those running; more get HTTP 429")
      ->capture_default_str();
  cmd->add_option("--max-body-mb", *body_mb, "Largest request body in MiB (larger: HTTP 413)")->capture_default_str();
  cmd->add_option("--timeout-keep-alive", *keep_alive_s,
                  "Seconds a client has to send a request: idle keep-alive connections close after it, a request "
                  "stalled half-way gets HTTP 408")
      ->capture_default_str();
  cmd->add_option("--shutdown-grace", o->shutdown_grace_seconds,
                  "On SIGINT/SIGTERM: seconds running requests may take to finish before they are cancelled")
      ->capture_default_str();
  cmd->callback([m, o, body_mb, keep_alive_s, no_prefix_caching] {
    if (*body_mb <= 0) throw CLI::ValidationError("--max-body-mb", "must be > 0");
    if (*keep_alive_s <= 0) throw CLI::ValidationError("--timeout-keep-alive", "must be > 0");
    if (o->port < 0 || o->port > 65535) throw CLI::ValidationError("--port", "must be in 0..65535");
    if (m->max_loras < 1) throw CLI::ValidationError("--max-loras", "must be >= 1");
    if (m->max_cpu_loras == 0) m->max_cpu_loras = m->max_loras;
    if (m->max_cpu_loras < m->max_loras)
      throw CLI::ValidationError("--max-cpu-loras", "must be >= --max-loras (the adapters of a batch stay loaded)");
    m->engine.scheduler.max_loras = m->max_loras;
    m->engine.enable_prefix_caching = !*no_prefix_caching;
    o->limits.max_body_bytes = static_cast<size_t>(*body_mb * 1024 * 1024);
    o->limits.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(*keep_alive_s * 1000));
    o->model_root = m->model;
    ExitOnError(server::RunServer(*o, [m]() -> Result<server::ServedModel> {
      PARALLM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelForCommand(m->model, m->max_model_len));
      PARALLM_ASSIGN_OR_RETURN(ModelText text, LoadModelTextForCommand(m->model, m->tokenizer, m->chat_template));
      auto shared_text = std::make_shared<const ModelText>(std::move(text));
      server::ServedModel served;
      served.tool_parser = m->tool_call_parser.empty() ? openai::DetectToolParser(shared_text->chat_template_source())
                                                       : *openai::ToolParserByName(m->tool_call_parser);
      served.auto_tool_choice = m->enable_auto_tool_choice;
      if (served.auto_tool_choice && served.tool_parser == openai::ToolParser::kNone)
        return Err("--enable-auto-tool-choice needs --tool-call-parser: the chat template's tool format was not "
                   "recognized");
      served.loras = std::make_shared<LoraRegistry>(model->config(), m->max_cpu_loras);
      for (const std::string& module : m->lora_modules) {
        const size_t eq = module.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == module.size())
          return Err("--lora-modules {}: expected NAME=PATH", module);
        PARALLM_RETURN_IF_ERROR(served.loras->Add(module.substr(0, eq), module.substr(eq + 1)));
      }
      EngineConfig engine_config = m->engine;
      PARALLM_RETURN_IF_ERROR(LoadDraftModelFor(*model, &engine_config));
      served.engine = std::make_shared<AsyncEngine>(std::move(model), engine_config, shared_text->shared_tokenizer(), m->async);
      served.text = std::move(shared_text);
      return served;
    }));
  });
}

}  // namespace parallm::cli
