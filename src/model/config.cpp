// ModelConfig helpers: names, summaries, Llama-3 RoPE scaling factors.
#include "model/config.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

namespace parallm {

std::string ArchName(Arch a) {
  switch (a) {
    case Arch::kLlama: return "llama";
    case Arch::kMistral: return "mistral";
    case Arch::kQwen2: return "qwen2";
    case Arch::kQwen3: return "qwen3";
  }
  return "?";
}

int64_t ParameterCount(const ModelConfig& c) {
  const int64_t H = c.hidden, Q = c.q_dim(), KV = c.kv_dim(), F = c.ffn, V = c.vocab;
  int64_t layer = 2 * H + H * Q + 2 * H * KV + Q * H + 3 * H * F;
  if (c.qkv_bias) layer += Q + 2 * KV;
  if (c.qk_norm) layer += 2 * c.head_dim;
  return V * H * (c.tied_embeddings ? 1 : 2) + c.n_layers * layer + H;
}

std::string Describe(const ModelConfig& c) {
  return fmt::format("{}: {} layers, hidden {}, heads {}/{} x {}, ffn {}, vocab {}{}{}{}", ArchName(c.arch), c.n_layers,
                     c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, c.vocab,
                     c.tied_embeddings ? ", tied embeddings" : "", c.qkv_bias ? ", qkv bias" : "",
                     c.qk_norm ? ", q/k norm" : "");
}

std::vector<float> Llama3RopeFactors(int head_dim, float theta, float factor, float low_freq_factor,
                                     float high_freq_factor, int original_max_position) {
  std::vector<float> factors(static_cast<size_t>(head_dim / 2));
  const double low_wavelen = original_max_position / static_cast<double>(low_freq_factor);
  const double high_wavelen = original_max_position / static_cast<double>(high_freq_factor);
  for (int i = 0; i < head_dim / 2; ++i) {
    double freq = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
    double wavelen = 2 * std::numbers::pi / freq;
    double f;
    if (wavelen < high_wavelen) {
      f = 1;
    } else if (wavelen > low_wavelen) {
      f = factor;
    } else {
      // Between the bands the new frequency is (1 - smooth) * freq / factor + smooth * freq.
      double smooth = (original_max_position / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      f = 1 / ((1 - smooth) / factor + smooth);
    }
    factors[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return factors;
}

}  // namespace parallm
