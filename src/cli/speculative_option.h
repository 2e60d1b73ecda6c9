// --speculative-config, vLLM's flag for speculative decoding: its JSON parsed into the engine's SpeculativeConfig.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "engine/speculation.h"

namespace parallm::cli {

// Adds --speculative-config to `cmd`, parsed into `*config` (a parse error is a usage error naming the field).
void AddSpeculativeOption(CLI::App* cmd, SpeculativeConfig* config);

}  // namespace parallm::cli
