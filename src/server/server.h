// RunServer: `parallm serve` as a function: listens at once (GET /health is 503 while the model loads), loads the
// model and its text side on a background thread, serves the OpenAI API on one io thread with the engine on its
// own, and on SIGINT/SIGTERM stops accepting, lets running requests finish for a grace period and returns 0 (a
// second signal exits at once, with status 1).
#pragma once

#include <string>

#include "engine/async_engine.h"
#include "server/http_session.h"

namespace parallm::server {

struct ServerOptions {
  std::string model;              // path or synthetic:... spec
  std::string tokenizer;          // overrides the model's tokenizer (optional)
  std::string served_model_name;  // default: the model path
  std::string host = "127.0.0.1";
  int port = 8000;                // 0: any free port (printed)
  std::string api_key;            // empty: none
  EngineConfig engine;
  AsyncEngineConfig async;
  HttpLimits limits;
  double shutdown_grace_seconds = 30;
  int parse_threads = 2;          // request parsing / tokenization workers
};

// Blocks until shut down; returns the process exit code (0 after a signal, 1 when the model cannot be loaded or
// the address cannot be bound). Prints "parallm: listening on http://HOST:PORT" and "parallm: model ready".
int RunServer(const ServerOptions& options);

}  // namespace parallm::server
