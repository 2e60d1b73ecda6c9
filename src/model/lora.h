// LoraAdapter: a low-rank adapter (LoRA) over a base model's projections, loaded from mlx-lm
// (adapters.safetensors + adapter_config.json), Hugging Face PEFT (adapter_model.safetensors +
// adapter_config.json) or llama.cpp's GGUF LoRA files, checked against the base model's shapes. The forward
// pass adds scale * B (A x) to a projection's output for the tokens of sequences that use the adapter.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "util/status.h"

namespace parallm {

// The projections an adapter may target (Llama names; Hugging Face module names in LoraTargetHfName).
enum class LoraTarget : uint8_t { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kNumLoraTargets = 7;
const char* LoraTargetHfName(LoraTarget t);     // "q_proj", ..., "down_proj"
const char* LoraTargetGgufName(LoraTarget t);   // "attn_q", ..., "ffn_down"
const char* LoraTargetHfModule(LoraTarget t);   // "self_attn.q_proj", ..., "mlp.down_proj"
// {input width, output width} of the target's projection in `c`.
std::pair<int64_t, int64_t> LoraTargetShape(const ModelConfig& c, LoraTarget t);

enum class LoraFormat { kMlx, kPeft, kGguf };
const char* LoraFormatName(LoraFormat f);  // "mlx", "peft", "gguf"

// One adapted projection: delta(x) = scale * B (A x).
struct LoraWeights {
  int32_t rank = 0;        // 0: this projection is not adapted
  std::vector<float> a;    // [rank, in] row-major (PEFT's lora_A layout)
  std::vector<float> b;    // [out, rank] row-major (PEFT's lora_B layout)
  std::vector<float> bt;   // [rank, out]: b transposed, the layout the expand kernel reads (PrepareLoraForKernels)
  float scale = 0;         // mlx-lm: `scale`; PEFT: lora_alpha / r (rsLoRA: / sqrt(r)); GGUF: alpha / r (1 if 0)
};

// `m` [rows, cols] row-major, transposed to [cols, rows]: formats store the factors in either orientation (MLX: A as
// [in, rank], B as [rank, out]) and the expand kernel reads B transposed.
std::vector<float> TransposeLoraFactor(const std::vector<float>& m, int64_t rows, int64_t cols);

// A fresh identity for a loaded adapter (never 0, never reused in the process): what the prefix cache hashes.
uint64_t NewLoraId();

struct LoraAdapter {
  uint64_t id = 0;  // NewLoraId() at load
  std::string path;
  std::string name;  // what a server serves it as (LoraRegistry); empty when loaded by path alone
  LoraFormat format = LoraFormat::kPeft;
  int32_t max_rank = 0;
  // [n_layers][target]. The rows of B for q and k are in the base model's RoPE pairing (ModelConfig::rope_style).
  std::vector<std::array<LoraWeights, kNumLoraTargets>> layers;

  const LoraWeights* Find(int layer, LoraTarget t) const {
    const LoraWeights& w = layers[static_cast<size_t>(layer)][static_cast<size_t>(t)];
    return w.rank > 0 ? &w : nullptr;
  }
  // "q_proj,v_proj x 2 layers, rank 8" for logs and `parallm info`.
  std::string Describe() const;
};

// Fills each adapted projection's kernel layouts (bt) from a and b. LoadLoraAdapter does it; an adapter built in
// memory (MakeRandomLora) must pass through it before a forward pass uses it.
void PrepareLoraForKernels(LoraAdapter* adapter);

// Recognizes the format of `path` (a folder with adapter_config.json and adapters.safetensors or
// adapter_model.safetensors, or a .gguf file) and loads it for a base model of shape `base`. Every error names
// the file and the field or tensor: an unsupported variant (DoRA, fan_in_fan_out, biases, per-module rank
// patterns, extra trained modules), a target the base has no projection for, a layer or shape that does not fit.
Result<std::shared_ptr<const LoraAdapter>> LoadLoraAdapter(const std::string& path, const ModelConfig& base);

}  // namespace parallm
