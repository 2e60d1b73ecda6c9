// ArchSpec: what distinguishes one model family from another, as data the shared decoder and the loaders
// read. Each family lives in its own file under arch/ (llama.cpp, qwen2.cpp, qwen3.cpp).
#pragma once

#include <span>
#include <string_view>

#include "model/config.h"

namespace parallm {

struct ArchSpec {
  Arch arch;
  std::string_view name;                // as users write it: --arch llama
  std::string_view gguf_architecture;   // general.architecture
  std::string_view hf_model_type;       // config.json model_type
  std::string_view hf_architecture;     // config.json architectures[0], written by make-model/convert
  bool qkv_bias;                        // q/k/v projections carry biases
  bool qk_norm;                         // RMSNorm over each q and k head before RoPE
  bool default_tied_embeddings;         // what the family's real models do (make-model presets)
  // GGUF files of this family store Q/K for this RoPE pairing (llama.cpp's LLM_ARCH rope type:
  // "norm" = interleaved for llama, "neox" = halves for qwen).
  RopeStyle gguf_rope_style;
};

const ArchSpec& LlamaSpec();
const ArchSpec& MistralSpec();
const ArchSpec& Qwen2Spec();
const ArchSpec& Qwen3Spec();

const ArchSpec& SpecFor(Arch arch);
// Lookups return nullptr when no supported family matches.
const ArchSpec* SpecByName(std::string_view name);
const ArchSpec* SpecByGgufArchitecture(std::string_view gguf_architecture);
const ArchSpec* SpecByHfModelType(std::string_view model_type);
std::span<const ArchSpec* const> AllSpecs();

}  // namespace parallm
