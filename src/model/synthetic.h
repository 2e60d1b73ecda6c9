// Synthetic models: preset shapes of real models (tiny, qwen2.5-0.5b, llama-3.2-1b and -3b, Gemma, Phi-3, MoE and
// hybrid shapes) filled with seeded random weights, so tests and benchmarks run on a fresh machine with no download.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/model_writer.h"
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

// The random tensors of GenerateRandomWeights (not the RoPE tensors), each described by its distribution, uniform on
// [center - half_width, center + half_width], in the same order.
using RandomTensorSink =
    std::function<Status(const std::string& name, std::vector<int64_t> shape, float center, float half_width)>;
Status DescribeRandomWeights(const ModelConfig& c, const RandomTensorSink& sink);
// A random GGUF model of shape `c` streamed to `path` (make-model --fast): matrices as random blocks of their target
// type, generated while the file is written (ModelWriter::AddRandom), vectors and RoPE tensors as GenerateRandomWeights
// gives them (hybrid models: the Mamba-2 vectors, norms and conv filters too). Memory stays at a few chunks of 64 MiB
// whatever the model's size.
Status WriteFastRandomModel(const ModelConfig& c, const WriteOptions& options, const Vocab& vocab, uint64_t seed,
                            const std::string& path);
// The values GenerateRandomWeights gives tensor `name` of that distribution.
std::vector<float> RandomValues(uint64_t seed, const std::string& name, int64_t n, float center, float half_width);

}  // namespace parallm
