// ModelConfig: the shape and options of a decoder-only transformer, whatever file it came from.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/kv_dtype.h"
#include "kernels/ops.h"

namespace parallm {

enum class Arch { kLlama, kMistral, kQwen2, kQwen3, kGemma, kGemma2, kGemma3, kPhi3, kQwen2Moe, kQwen3Moe, kMixtral, kNemotronH };

// The MLP's activation: SwiGLU (Llama, Qwen, Phi-3), GeGLU with tanh-approximated GELU (Gemma), or Nemotron-H's
// squared ReLU on an ungated MLP (down(relu(up x)^2)).
enum class Activation { kSilu, kGeluTanh, kRelu2 };

// What one layer of a hybrid model (Nemotron-H's hybrid_override_pattern) holds besides its norm.
enum class LayerKind : char { kMamba = 'M', kAttention = '*', kMlp = '-', kMoe = 'E' };

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
  bool qk_norm = false;          // Qwen3, Gemma 3: RMSNorm over each q and k head before RoPE

  // Gemma: embeddings multiplied by sqrt(hidden); GeGLU; Gemma 2/3: a second norm after attention and after
  // the MLP (four a layer); attention scale 1/sqrt(query_pre_attn_scalar); tanh soft-capping of the attention
  // scores and the final logits (cap * tanh(x / cap); 0 = none). Norm weights are held as the multiplier the
  // norm applies: Gemma's Hugging Face files store w for (1 + w), GGUF stores 1 + w (the loaders add 1).
  Activation activation = Activation::kSilu;
  bool scale_embeddings = false;
  bool post_norms = false;
  float query_pre_attn_scalar = 0;  // 0: head_dim
  float attn_softcap = 0;
  float final_softcap = 0;

  // Sliding-window attention: a windowed layer's query at position i sees keys i - sliding_window < j <= i.
  // Layer l is windowed when sliding_window > 0 and (sliding_pattern <= 1 or (l + 1) % sliding_pattern != 0):
  // every layer (Mistral, Phi-3), even layers (Gemma 2: pattern 2), five of six (Gemma 3: pattern 6).
  int sliding_window = 0;
  int sliding_pattern = 1;
  // Gemma 3: windowed layers rotate with their own RoPE base (0: rope_theta); global layers divide their
  // frequencies by rope_linear_factor ("linear" scaling; 1: none).
  float rope_local_theta = 0;
  float rope_linear_factor = 1.0f;

  // Partial rotary embeddings (Phi-4-mini): the first rotary_dim dims of each head rotate (0: head_dim).
  int rotary_dim = 0;
  // Phi-3 LongRoPE ("longrope"/"su"): per-pair frequency divisors, short below original_max_position and long
  // beyond it, and the attention factor applied to the rotated dims of q and k.
  struct LongRope {
    std::vector<float> short_factors, long_factors;  // [rotary_dim / 2]
    int original_max_position = 4096;
    float attn_factor = 1.0f;
  };
  std::optional<LongRope> rope_longrope;

  // Mixture of experts (Qwen2-MoE, Qwen3-MoE, Mixtral): a sparse layer routes each token to n_experts_used of
  // n_experts gated MLPs of width expert_ffn (router: softmax over all experts in f32, the top k by probability,
  // ties to the lowest expert id, renormalised to sum 1 when norm_topk_prob) and sums their outputs weighted by
  // those probabilities; Qwen2-MoE adds a shared expert of width shared_expert_ffn scaled by sigmoid(x . gate).
  // Layer l is sparse when n_experts > 0, (l + 1) % decoder_sparse_step == 0 and l is not in mlp_only_layers;
  // the other layers run the dense MLP of width ffn.
  int n_experts = 0;
  int n_experts_used = 0;
  int expert_ffn = 0;
  int shared_expert_ffn = 0;  // 0: none
  bool norm_topk_prob = false;
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;

  // Nemotron-H (hybrid): one mixer a layer, as hybrid_override_pattern spells it ('M' Mamba-2, '*' attention without
  // RoPE, '-' ungated relu2 MLP, 'E' experts); empty for the other families (every layer attention + MLP).
  std::string layer_pattern;
  // The Mamba-2 mixer: in_proj -> z [ssm_inner], xBC [ssm_conv_dim()], dt [ssm_heads]; causal depthwise conv1d of width
  // ssm_conv_kernel + SiLU over xBC; the selective scan per head with a state [ssm_head_dim, ssm_state] (B and C shared
  // by the ssm_heads / ssm_groups heads of a group); y * silu(z), RMSNorm per group; out_proj.
  int ssm_heads = 0;
  int ssm_head_dim = 0;
  int ssm_state = 0;
  int ssm_groups = 1;
  int ssm_conv_kernel = 4;
  float ssm_dt_min = 0.0f;   // softplus(dt + dt_bias) is clamped below at this (transformers' time_step_min)
  int ssm_chunk = 128;       // the published SSD chunk (chunk_size); parallm's is at most 32 of it (SsdChunk)
  // Nemotron-H's experts: sigmoid router scores plus a per-expert correction bias choose the experts (the best
  // moe_topk_groups of moe_groups groups, by the sum of each group's two best), the sigmoid scores weight them
  // (renormalised when norm_topk_prob), times routed_scaling.
  int moe_groups = 1;
  int moe_topk_groups = 1;
  float routed_scaling = 1.0f;

  bool hybrid() const { return !layer_pattern.empty(); }
  LayerKind KindOf(int layer) const { return static_cast<LayerKind>(layer_pattern[static_cast<size_t>(layer)]); }
  int ssm_inner() const { return ssm_heads * ssm_head_dim; }
  int ssm_conv_dim() const { return ssm_inner() + 2 * ssm_groups * ssm_state; }
  int ssm_in_proj() const { return ssm_inner() + ssm_conv_dim() + ssm_heads; }

  int q_dim() const { return n_heads * head_dim; }
  bool LayerIsMoe(int layer) const {
    if (hybrid()) return KindOf(layer) == LayerKind::kMoe;
    if (n_experts <= 0 || decoder_sparse_step <= 0 || (layer + 1) % decoder_sparse_step != 0) return false;
    for (int l : mlp_only_layers)
      if (l == layer) return false;
    return true;
  }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int rotary() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  bool LayerIsSliding(int layer) const {
    if (hybrid()) return false;
    return sliding_window > 0 && (sliding_pattern <= 1 || (layer + 1) % sliding_pattern != 0);
  }
  // The window when every layer is windowed (then KV blocks behind it can be released), else 0.
  int UniformSlidingWindow() const {
    for (int l = 0; l < n_layers; ++l)
      if (!LayerIsSliding(l)) return 0;
    return sliding_window;
  }
  // Gemma multiplies the embedding rows by sqrt(hidden) (in the activations' type: f32 here).
  float EmbedScale() const { return scale_embeddings ? std::sqrt(static_cast<float>(hidden)) : 1.0f; }
  // The softmax scale of attention scores.
  float AttentionScale() const;
};

std::string ArchName(Arch a);  // "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3"
// Number of weights (matrices, norms, biases): what a model of this shape stores.
int64_t ParameterCount(const ModelConfig& c);
// The weights one token reads: ParameterCount less the experts it is not routed to (equal for dense models).
int64_t ActiveParameterCount(const ModelConfig& c);
// Bytes the cache holds per token of context with keys and values stored as `dtype` (K and V of every attention
// layer: for hybrid models only the attention layers keep KV; int8 adds its scales), and per sequence for a hybrid
// model's recurrent state (each Mamba layer's conv window and SSM state, whatever the length; 0 for other models).
int64_t KvBytesPerToken(const ModelConfig& c, KvDtype dtype = KvDtype::kF32);
int64_t StateBytesPerSequence(const ModelConfig& c);
// One-line summary: "qwen2: 24 layers, hidden 896, heads 14/2 x 64, ffn 4864, vocab 151936"
std::string Describe(const ModelConfig& c);

// Llama-3 ("llama3" rope_type) scaling as per-pair divisors of the base frequencies, as llama.cpp stores them
// in rope_freqs.weight: 1 for short wavelengths, `factor` for long ones, interpolated between.
std::vector<float> Llama3RopeFactors(int head_dim, float theta, float factor, float low_freq_factor,
                                     float high_freq_factor, int original_max_position);

}  // namespace parallm
