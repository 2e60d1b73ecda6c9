// --speculative-config, vLLM's flag for speculative decoding: its JSON parsed into the engine's SpeculativeConfig.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "engine/speculation.h"

namespace parallm::cli {

// Parses {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": N, "prompt_lookup_min": M,
// "disable_by_batch_size": B}. Errors name the field; unknown fields and other methods are refused.
Result<SpeculativeConfig> ParseSpeculativeConfig(const std::string& json);

// Adds --speculative-config to `cmd`, parsed into `*config` (a parse error is a usage error naming the field).
void AddSpeculativeOption(CLI::App* cmd, SpeculativeConfig* config);

}  // namespace parallm::cli
