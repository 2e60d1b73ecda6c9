// Tensor names: parallm uses GGUF's names ("blk.3.attn_q.weight") as its canonical vocabulary and maps
// Hugging Face / MLX names ("model.layers.3.self_attn.q_proj.weight") to and from them.
#pragma once

#include <optional>
#include <string>

#include "model/config.h"

namespace parallm {

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"; nullopt for names with no HF twin
// (e.g. rope_freqs.weight). Some names depend on the family: GGUF's ffn_norm is Llama's
// post_attention_layernorm but Gemma 2's pre_feedforward_layernorm; Phi-3's fused ffn_up is gate_up_proj.
std::optional<std::string> HfNameFor(const std::string& canonical, Arch arch);
// The inverse of HfNameFor.
std::optional<std::string> CanonicalNameForHf(const std::string& hf, Arch arch);

// "blk.3.attn_q.weight"
std::string LayerTensor(int layer, const char* kind, const char* suffix = "weight");

}  // namespace parallm
