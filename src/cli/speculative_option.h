// --speculative-config, vLLM's flag for speculative decoding: its JSON parsed into the engine's SpeculativeConfig; and
// vLLM's older --speculative-model and --num-speculative-tokens for a draft model.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "engine/speculation.h"

namespace parallm::cli {

// Adds --speculative-config, --speculative-model and --num-speculative-tokens to `cmd`, parsed into `*config` (a parse
// error is a usage error naming the field). The draft model is loaded with the target (LoadDraftModelFor).
void AddSpeculativeOption(CLI::App* cmd, SpeculativeConfig* config);

}  // namespace parallm::cli
