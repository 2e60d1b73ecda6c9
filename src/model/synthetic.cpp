// Synthetic models: preset shapes and seeded random weights.
#include "model/synthetic.h"

#include <cmath>

#include "model/arch/arch.h"
#include "model/tensor_names.h"

namespace parallm {
namespace {

// SplitMix64: a tiny, fast, well-mixed generator; one stream per tensor, seeded from (seed, name).
struct SplitMix64 {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float Uniform() { return static_cast<float>(static_cast<double>(Next() >> 11) * 0x1.0p-52 - 1.0); }
};

uint64_t HashName(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h;
}

std::vector<float> Random(uint64_t seed, const std::string& name, int64_t n, float center, float half_width) {
  SplitMix64 rng{seed ^ HashName(name)};
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = center + half_width * rng.Uniform();
  return v;
}

}  // namespace

std::vector<std::string> PresetNames() { return {"tiny", "qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b"}; }

Result<ModelConfig> PresetConfig(const std::string& preset, const Arch* arch) {
  ModelConfig c;
  Arch own;
  if (preset == "tiny") {
    own = arch ? *arch : Arch::kLlama;
    c.hidden = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 512, c.vocab = 512;
    c.context_length = 2048;
  } else if (preset == "qwen2.5-0.5b") {
    own = Arch::kQwen2;
    c.hidden = 896, c.n_layers = 24, c.n_heads = 14, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 4864;
    c.vocab = 151936, c.context_length = 32768, c.rope_theta = 1e6f, c.rms_eps = 1e-6f;
  } else if (preset == "qwen3-0.6b") {
    own = Arch::kQwen3;
    c.hidden = 1024, c.n_layers = 28, c.n_heads = 16, c.n_kv_heads = 8, c.head_dim = 128, c.ffn = 3072;
    c.vocab = 151936, c.context_length = 40960, c.rope_theta = 1e6f, c.rms_eps = 1e-6f;
  } else if (preset == "llama-3.2-1b") {
    own = Arch::kLlama;
    c.hidden = 2048, c.n_layers = 16, c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 64, c.ffn = 8192;
    c.vocab = 128256, c.context_length = 131072, c.rope_theta = 500000.0f, c.rms_eps = 1e-5f;
    c.rope_llama3 = ModelConfig::Llama3Rope{32, 1, 4, 8192};
  } else {
    return Err("unknown preset '{}' (presets: tiny, qwen2.5-0.5b, qwen3-0.6b, llama-3.2-1b)", preset);
  }
  if (arch != nullptr && *arch != own)
    return Err("preset '{}' is a {} model; --arch {} does not apply (only 'tiny' takes any --arch)", preset,
               ArchName(own), ArchName(*arch));
  const ArchSpec& spec = SpecFor(own);
  c.arch = own;
  c.qkv_bias = spec.qkv_bias;
  c.qk_norm = spec.qk_norm;
  c.tied_embeddings = preset == "llama-3.2-1b" ? true : spec.default_tied_embeddings;
  c.rope_style = RopeStyle::kHalf;
  if (c.rope_llama3) {
    const auto& r = *c.rope_llama3;
    c.rope_freq_factors = Llama3RopeFactors(c.head_dim, c.rope_theta, r.factor, r.low_freq_factor,
                                            r.high_freq_factor, r.original_max_position);
  }
  return c;
}

Status GenerateRandomWeights(const ModelConfig& c, uint64_t seed, const TensorSink& sink) {
  const int64_t H = c.hidden, Q = c.q_dim(), KV = c.kv_dim(), F = c.ffn, V = c.vocab;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    // Uniform on [-a, a] has standard deviation a / sqrt(3).
    float a = std::sqrt(3.0f / static_cast<float>(cols));
    return sink(name, {rows, cols}, Random(seed, name, rows * cols, 0.0f, a));
  };
  auto vector = [&](const std::string& name, int64_t n, float center, float half_width) {
    return sink(name, {n}, Random(seed, name, n, center, half_width));
  };
  // Embedding rows of unit-ish scale, so the first RMSNorm sees O(1) inputs.
  PARALLM_RETURN_IF_ERROR(sink("token_embd.weight", {V, H}, Random(seed, "token_embd.weight", V * H, 0.0f, 1.7f)));
  for (int l = 0; l < c.n_layers; ++l) {
    PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_norm"), H, 1.0f, 0.2f));
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_q"), Q, H));
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_k"), KV, H));
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_v"), KV, H));
    if (c.qkv_bias) {
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_q", "bias"), Q, 0.0f, 0.2f));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_k", "bias"), KV, 0.0f, 0.2f));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_v", "bias"), KV, 0.0f, 0.2f));
    }
    if (c.qk_norm) {
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_q_norm"), c.head_dim, 1.0f, 0.2f));
      PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "attn_k_norm"), c.head_dim, 1.0f, 0.2f));
    }
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "attn_output"), H, Q));
    PARALLM_RETURN_IF_ERROR(vector(LayerTensor(l, "ffn_norm"), H, 1.0f, 0.2f));
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_gate"), F, H));
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_up"), F, H));
    PARALLM_RETURN_IF_ERROR(matrix(LayerTensor(l, "ffn_down"), H, F));
  }
  PARALLM_RETURN_IF_ERROR(vector("output_norm.weight", H, 1.0f, 0.2f));
  if (!c.tied_embeddings) PARALLM_RETURN_IF_ERROR(matrix("output.weight", V, H));
  if (!c.rope_freq_factors.empty())
    PARALLM_RETURN_IF_ERROR(sink("rope_freqs.weight", {static_cast<int64_t>(c.rope_freq_factors.size())},
                                 c.rope_freq_factors));
  return Status::Ok();
}

}  // namespace parallm
