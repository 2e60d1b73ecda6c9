// ArchSpec: what distinguishes one model family from another, as data the loaders, the writer and the decoder
// read. Each family lives in its own file under arch/ (llama.cpp, qwen2.cpp, qwen3.cpp, gemma.cpp, phi3.cpp, moe.cpp);
// the layer block a family runs is its `block` function.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "model/blocks.h"
#include "model/config.h"

namespace parallm {


struct ArchSpec {
  Arch arch;
  std::string_view name;                // as users write it: --arch llama
  std::string_view gguf_architecture;   // general.architecture
  // general.architecture of the family's files with experts, where llama.cpp names them apart ("nemotron_h_moe").
  std::string_view gguf_moe_architecture = {};
  std::string_view hf_model_type;       // config.json model_type
  std::string_view hf_architecture;     // config.json architectures[0], written by make-model/convert
  bool qkv_bias = false;                // q/k/v projections carry biases
  bool qk_norm = false;                 // RMSNorm over each q and k head before RoPE
  bool default_tied_embeddings = false; // what the family's real models do (make-model presets)
  // GGUF files of this family store Q/K for this RoPE pairing (llama.cpp's LLM_ARCH rope type:
  // "norm" = interleaved for llama, "neox" = halves for qwen, gemma, phi3).
  RopeStyle gguf_rope_style = RopeStyle::kHalf;
  LayerBlock block = PreNormBlock;       // the layer's composition of shared sublayers (model/blocks.h)
  Activation activation = Activation::kSilu;
  bool embed_scaled = false;            // embeddings multiplied by sqrt(hidden) (Gemma)
  bool post_norms = false;              // norms after attention and after the MLP too (Gemma 2, 3)
  // Added to every norm weight of a Hugging Face / MLX file to get the multiplier (Gemma's (1 + w)); GGUF files
  // store the multiplier itself (llama.cpp's converter adds it).
  float hf_norm_offset = 0;
  // Q/K/V and gate/up stored as one matrix each ([q; k; v] rows, [gate; up] rows): Phi-3.
  bool fused_projections = false;
  // Which layers a sliding window applies to (ModelConfig::sliding_pattern).
  int sliding_pattern = 1;
  // Mixture of experts (arch/moe.cpp): the family's sparse layers, whether it has Qwen2-MoE's gated shared expert,
  // and norm_topk_prob where the file does not say (GGUF has no key for it: llama.cpp hard-codes it per family).
  bool moe = false;
  bool shared_expert = false;
  bool default_norm_topk_prob = false;
};

const ArchSpec& LlamaSpec();
const ArchSpec& MistralSpec();
const ArchSpec& Qwen2Spec();
const ArchSpec& Qwen3Spec();
const ArchSpec& GemmaSpec();
const ArchSpec& Gemma2Spec();
const ArchSpec& Gemma3Spec();
const ArchSpec& Phi3Spec();
const ArchSpec& Qwen2MoeSpec();
const ArchSpec& Qwen3MoeSpec();
const ArchSpec& MixtralSpec();
const ArchSpec& NemotronHSpec();

const ArchSpec& SpecFor(Arch arch);
// general.architecture of a GGUF file of this config (gguf_moe_architecture when it has experts and the family has one).
std::string GgufArchitectureFor(const ModelConfig& c);
// Lookups return nullptr when no supported family matches.
const ArchSpec* SpecByName(std::string_view name);
const ArchSpec* SpecByGgufArchitecture(std::string_view gguf_architecture);
const ArchSpec* SpecByHfModelType(std::string_view model_type);
std::span<const ArchSpec* const> AllSpecs();
// "llama, mistral, qwen2, ...", for error messages and --help.
std::string SupportedNames();
std::string SupportedHfModelTypes();

}  // namespace parallm
