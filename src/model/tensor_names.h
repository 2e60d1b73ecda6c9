// Tensor names: parallm uses GGUF's names ("blk.3.attn_q.weight") as its canonical vocabulary and maps
// Hugging Face / MLX names ("model.layers.3.self_attn.q_proj.weight") to and from them.
#pragma once

#include <optional>
#include <string>

namespace parallm {

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"; nullopt for names with no HF twin
// (e.g. rope_freqs.weight).
std::optional<std::string> HfNameFor(const std::string& canonical);
// The inverse of HfNameFor.
std::optional<std::string> CanonicalNameForHf(const std::string& hf);

// "blk.3.attn_q.weight"
std::string LayerTensor(int layer, const char* kind, const char* suffix = "weight");

}  // namespace parallm
