// --kv-cache-dtype, vLLM's flag for how the paged KV cache stores keys and values (auto, f32, f16, bf16 or int8).
#pragma once

#include <optional>

#include <CLI/CLI.hpp>

#include "kernels/kv_dtype.h"

namespace parallm::cli {

// Adds --kv-cache-dtype to `cmd`, parsed into `*dtype` (auto: nullopt, resolved by the engine against the model;
// an unknown name is a usage error listing the choices).
void AddKvCacheDtypeOption(CLI::App* cmd, std::optional<KvDtype>* dtype);

}  // namespace parallm::cli
