// ModelConfig: the shape and options of a decoder-only transformer, whatever file it came from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace parallm {

enum class Arch { kLlama, kMistral, kQwen2, kQwen3 };

struct ModelConfig {
  Arch arch = Arch::kLlama;
  int hidden = 0;      // model width (embedding length)
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (grouped-query attention when < n_heads)
  int head_dim = 0;    // per head; may differ from hidden / n_heads (Qwen3)
  int ffn = 0;         // SwiGLU inner width
  int vocab = 0;
  int context_length = 4096;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  // How the stored Q/K weights pair dimensions for RoPE: GGUF "llama" files are permuted for interleaved pairs,
  // Hugging Face / MLX folders and GGUF qwen2/qwen3 rotate halves.
  RopeStyle rope_style = RopeStyle::kHalf;
  // Llama-3 scaling as per-pair frequency divisors (GGUF rope_freqs.weight); empty when not scaled.
  std::vector<float> rope_freq_factors;
  // The Llama-3 scaling parameters they came from, when known (config.json rope_scaling); a GGUF file only
  // has the divisors.
  struct Llama3Rope {
    float factor = 8, low_freq_factor = 1, high_freq_factor = 4;
    int original_max_position = 8192;
  };
  std::optional<Llama3Rope> rope_llama3;
  bool tied_embeddings = false;  // LM head reuses the token embedding
  bool qkv_bias = false;         // Qwen2
  bool qk_norm = false;          // Qwen3: RMSNorm over each q and k head before RoPE

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

std::string ArchName(Arch a);
// Number of weights (matrices, norms, biases): what a model of this shape stores.
int64_t ParameterCount(const ModelConfig& c);  // "llama", "mistral", "qwen2", "qwen3"
// One-line summary: "qwen2: 24 layers, hidden 896, heads 14/2 x 64, ffn 4864, vocab 151936"
std::string Describe(const ModelConfig& c);

// Llama-3 ("llama3" rope_type) scaling as per-pair divisors of the base frequencies, as llama.cpp stores them
// in rope_freqs.weight: 1 for short wavelengths, `factor` for long ones, interpolated between.
std::vector<float> Llama3RopeFactors(int head_dim, float theta, float factor, float low_freq_factor,
                                     float high_freq_factor, int original_max_position);

}  // namespace parallm
