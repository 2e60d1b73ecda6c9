// ModelConfig helpers: names, summaries, Llama-3 RoPE scaling factors.
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "cache/kv_storage.h"

namespace parallm {

std::string ArchName(Arch a) {
  switch (a) {
    case Arch::kLlama: return "llama";
    case Arch::kMistral: return "mistral";
    case Arch::kQwen2: return "qwen2";
    case Arch::kQwen3: return "qwen3";
    case Arch::kGemma: return "gemma";
    case Arch::kGemma2: return "gemma2";
    case Arch::kGemma3: return "gemma3";
    case Arch::kPhi3: return "phi3";
    case Arch::kQwen2Moe: return "qwen2moe";
    case Arch::kQwen3Moe: return "qwen3moe";
    case Arch::kMixtral: return "mixtral";
    case Arch::kNemotronH: return "nemotronh";
  }
  return "?";
}

namespace {

// `experts`: how many routed experts of each sparse layer to count (all of them, or the ones a token uses).
// Nemotron-H: one norm and one mixer a layer; its MLP and experts are ungated (up and down only).
int64_t CountHybridParameters(const ModelConfig& c, int64_t experts) {
  const int64_t H = c.hidden, Q = c.q_dim(), KV = c.kv_dim(), F = c.ffn, V = c.vocab;
  const int64_t I = c.ssm_inner(), CD = c.ssm_conv_dim(), NH = c.ssm_heads;
  int64_t total = V * H * (c.tied_embeddings ? 1 : 2) + H;
  for (int l = 0; l < c.n_layers; ++l) {
    total += H;
    switch (c.KindOf(l)) {
      case LayerKind::kMamba: total += H * c.ssm_in_proj() + CD * (c.ssm_conv_kernel + 1) + 3 * NH + I + I * H; break;
      case LayerKind::kAttention: total += H * Q + 2 * H * KV + Q * H; break;
      case LayerKind::kMlp: total += 2 * H * F; break;
      case LayerKind::kMoe:
        total += static_cast<int64_t>(c.n_experts) * (H + 1) +
                 experts * 2 * H * c.expert_ffn + 2 * H * c.shared_expert_ffn;
        break;
    }
  }
  return total;
}

int64_t CountParameters(const ModelConfig& c, int64_t experts) {
  if (c.hybrid()) return CountHybridParameters(c, experts);
  const int64_t H = c.hidden, Q = c.q_dim(), KV = c.kv_dim(), F = c.ffn, V = c.vocab;
  int64_t attn = 2 * H + H * Q + 2 * H * KV + Q * H;
  if (c.qkv_bias) attn += Q + 2 * KV;
  if (c.qk_norm) attn += 2 * c.head_dim;
  if (c.post_norms) attn += 2 * H;
  int64_t total = V * H * (c.tied_embeddings ? 1 : 2) + H;
  for (int l = 0; l < c.n_layers; ++l) {
    total += attn;
    if (!c.LayerIsMoe(l)) {
      total += 3 * H * F;
      continue;
    }
    total += static_cast<int64_t>(c.n_experts) * H + experts * 3 * H * c.expert_ffn;  // router + experts
    if (c.shared_expert_ffn > 0) total += 3 * H * c.shared_expert_ffn + H;           // shared expert + its gate
  }
  return total;
}

}  // namespace

int64_t KvBytesPerToken(const ModelConfig& c, KvDtype dtype) {
  int64_t layers = c.n_layers;
  if (c.hybrid()) layers = std::count(c.layer_pattern.begin(), c.layer_pattern.end(), '*');
  // One slot of a one-block storage of those layers: the storage's own sizing.
  return static_cast<int64_t>(PagedKvStorage::BytesPerBlock(
      KvStorageShape{static_cast<int>(layers), c.n_kv_heads, c.head_dim, /*block_size=*/1, /*num_blocks=*/1, dtype}));
}

int64_t StateBytesPerSequence(const ModelConfig& c) {
  if (!c.hybrid()) return 0;
  const int64_t mamba = std::count(c.layer_pattern.begin(), c.layer_pattern.end(), 'M');
  return static_cast<int64_t>(sizeof(float)) * mamba *
         (static_cast<int64_t>(c.ssm_conv_kernel - 1) * c.ssm_conv_dim() + static_cast<int64_t>(c.ssm_inner()) * c.ssm_state);
}

int64_t ParameterCount(const ModelConfig& c) { return CountParameters(c, c.n_experts); }
int64_t ActiveParameterCount(const ModelConfig& c) { return CountParameters(c, c.n_experts_used); }

float ModelConfig::AttentionScale() const {
  return 1.0f / std::sqrt(query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<float>(head_dim));
}

std::string Describe(const ModelConfig& c) {
  std::string s = fmt::format("{}: {} layers, hidden {}, heads {}/{} x {}, ffn {}, vocab {}", ArchName(c.arch),
                              c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn, c.vocab);
  if (c.hybrid()) {
    int mamba = 0;
    for (char k : c.layer_pattern) mamba += k == 'M' ? 1 : 0;
    s += fmt::format(", pattern {} ({} Mamba-2 layers: {} heads x {}, state {}, {} groups, conv {})", c.layer_pattern,
                     mamba, c.ssm_heads, c.ssm_head_dim, c.ssm_state, c.ssm_groups, c.ssm_conv_kernel);
  }
  if (c.tied_embeddings) s += ", tied embeddings";
  if (c.qkv_bias) s += ", qkv bias";
  if (c.qk_norm) s += ", q/k norm";
  if (c.activation == Activation::kGeluTanh) s += ", GeGLU";
  if (c.activation == Activation::kRelu2) s += ", relu2 MLP";
  if (c.post_norms) s += ", post-norms";
  if (c.attn_softcap > 0 || c.final_softcap > 0) s += fmt::format(", soft-cap {}/{}", c.attn_softcap, c.final_softcap);
  if (c.sliding_window > 0) {
    int windowed = 0;
    for (int l = 0; l < c.n_layers; ++l) windowed += c.LayerIsSliding(l) ? 1 : 0;
    s += fmt::format(", sliding window {} on {}/{} layers", c.sliding_window, windowed, c.n_layers);
  }
  if (c.rotary_dim > 0 && c.rotary_dim != c.head_dim) s += fmt::format(", rotary {}/{}", c.rotary_dim, c.head_dim);
  if (c.rope_longrope) s += fmt::format(", LongRoPE (original context {})", c.rope_longrope->original_max_position);
  if (c.n_experts > 0) {
    int sparse = 0;
    for (int l = 0; l < c.n_layers; ++l) sparse += c.LayerIsMoe(l) ? 1 : 0;
    s += fmt::format(", {} experts top-{} x {} on {}/{} layers{}", c.n_experts, c.n_experts_used, c.expert_ffn, sparse,
                     c.n_layers, c.norm_topk_prob ? " (renormalised)" : "");
    if (c.shared_expert_ffn > 0) s += fmt::format(", shared expert {}", c.shared_expert_ffn);
    if (c.hybrid())
      s += fmt::format(", sigmoid router (top-{} of {} groups, scale {})", c.moe_topk_groups, c.moe_groups, c.routed_scaling);
  }
  return s;
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
