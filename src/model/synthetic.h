// Synthetic models: preset shapes of real models (tiny, qwen2.5-0.5b, qwen3-0.6b, llama-3.2-1b) filled with
// seeded random weights, so tests and benchmarks run on a fresh machine with no download.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/weights.h"
#include "util/status.h"

namespace parallm {

// Names of the presets, for --help.
std::vector<std::string> PresetNames();
// The config of `preset`. "tiny" takes the family from `arch`; the others are one family each and reject
// a different `arch` (nullptr: the preset's own).
Result<ModelConfig> PresetConfig(const std::string& preset, const Arch* arch);

// Fixed LongRoPE factors for synthetic Phi-3 models (short 1 + 0.1 i, long 1 + 2 i: far apart, so which set a
// token rotates with shows in its logits), switching past `original_max_position`.
ModelConfig::LongRope SyntheticLongRope(const ModelConfig& c, int original_max_position);

// Calls `sink` with every tensor of a random model of shape `c` (canonical names, Hugging Face RoPE pairing,
// i.e. RopeStyle::kHalf). Values depend only on (seed, tensor name): matrices are uniform with standard
// deviation 1/sqrt(fan_in), norm weights near 1, biases small. Also emits rope_freqs.weight when the
// config has Llama-3 RoPE factors.
Status GenerateRandomWeights(const ModelConfig& c, uint64_t seed, const TensorSink& sink);

}  // namespace parallm
