// `synthetic:PRESET[:TYPE]` model specs: a random-weight model of a preset shape built in memory (as vLLM's
// dummy load format), so benchmarks and tests run on a fresh machine with no download and no file.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"

namespace parallm {

// True when `spec` is "synthetic:...".
bool IsSyntheticSpec(const std::string& spec);

// "synthetic:qwen2.5-0.5b" (Q8_0 weights), "synthetic:qwen3-0.6b:q4_k_m", "synthetic:tiny:f32". The seed is 0.
Result<std::unique_ptr<Model>> BuildSyntheticModel(const std::string& spec);

// A model file or folder, or a synthetic spec.
Result<std::unique_ptr<Model>> LoadModelSpec(const std::string& spec);

}  // namespace parallm
