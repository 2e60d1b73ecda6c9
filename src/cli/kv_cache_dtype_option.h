// --kv-cache-dtype, vLLM's flag for how the paged KV cache stores keys and values (f32, bf16 or int8).
#pragma once

#include <CLI/CLI.hpp>

#include "kernels/kv_dtype.h"

namespace parallm::cli {

// Adds --kv-cache-dtype to `cmd`, parsed into `*dtype` (an unknown name is a usage error listing the choices).
void AddKvCacheDtypeOption(CLI::App* cmd, KvDtype* dtype);

}  // namespace parallm::cli
