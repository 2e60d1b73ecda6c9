// RunServer: `parallm serve` as a function: listens at once (GET /health is 503 while the model loads), builds the
// engine with the caller's loader on a background thread, serves the OpenAI API on one io thread with the engine
// on its own, and on SIGINT/SIGTERM stops accepting, lets running requests finish for a grace period and returns 0
// (a second signal exits at once, with status 1). The server never loads a model itself: whoever starts it (the
// `serve` command, a test) decides what the engine is.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "chat/model_text.h"
#include "engine/async_engine.h"
#include "engine/lora_registry.h"
#include "openai/tool_parser.h"
#include "server/http_session.h"

namespace parallm::server {

// What the server serves: the engine and the text side its requests are tokenized and rendered with.
struct ServedModel {
  std::shared_ptr<AsyncEngine> engine;
  std::shared_ptr<const ModelText> text;
  openai::ToolParser tool_parser = openai::ToolParser::kNone;  // finds tool calls in answers (none: not offered)
  bool auto_tool_choice = false;                               // tool_choice "auto" is parsed (vLLM's flag)
  std::shared_ptr<LoraRegistry> loras;  // LoRA adapters requests may name (nullptr: none)
};

// Builds the ServedModel; called once, on the server's loader thread, so the port answers while it runs. An error
// is printed and ends the server with status 1.
using ModelLoader = std::function<Result<ServedModel>()>;

struct ServerOptions {
  std::string model_root;         // /v1/models root and the "loading ..." line: where the model comes from
  std::string served_model_name;  // default: model_root
  std::string host = "127.0.0.1";
  int port = 8000;                // 0: any free port (printed)
  std::string api_key;            // empty: none
  HttpLimits limits;
  double shutdown_grace_seconds = 30;
  int parse_threads = 2;          // request parsing / tokenization workers
};

// Blocks until shut down; returns the process exit code (0 after a signal, 1 when `load` fails or the address
// cannot be bound). Prints "parallm: listening on http://HOST:PORT" and "parallm: model ready".
int RunServer(const ServerOptions& options, ModelLoader load);

}  // namespace parallm::server
