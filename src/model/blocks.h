// LayerOps: the shared sublayers a family's layer block composes (norms, attention, the gated MLP, the residual
// stream), so each family file states its block in a few lines (arch/llama.cpp: pre-norm; arch/gemma.cpp:
// Gemma's optional post-norms; arch/nemotron_h.cpp: one mixer a layer) instead of one decoder growing a flag per family.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace parallm {

class LayerOps {
 public:
  virtual ~LayerOps() = default;
  // The residual stream x and a scratch buffer, each [num_tokens, hidden].
  virtual float* residual() = 0;
  virtual float* scratch() = 0;
  virtual const ModelConfig& config() const = 0;
  // out = RMSNorm(in) * w, row by row (w holds the multiplier: Gemma's 1 + w is added at load). out may be in.
  virtual void Norm(const std::vector<float>& w, const float* in, float* out) = 0;
  // out = Wo · attention(q, k, v of in) for `layer`, writing the tokens' K/V to the cache. out may be in.
  virtual void Attention(int layer, const float* in, float* out) = 0;
  // out = Wdown · (act(Wgate in) * Wup in). out may be in.
  virtual void Mlp(int layer, const float* in, float* out) = 0;
  // The sparse MLP of a mixture-of-experts layer (model/moe.h): each token through its top-k experts, weighted,
  // plus the gated shared expert where there is one. out may be in.
  virtual void Moe(int layer, const float* in, float* out) = 0;
  // The Mamba-2 mixer of a hybrid layer (Nemotron-H): reads and advances each sequence's recurrent state (conv window
  // and SSM state) in its state slot. out may be in.
  virtual void Mamba(int layer, const float* in, float* out) = 0;
  // residual += y.
  virtual void AddToResidual(const float* y) = 0;
};

// A family's layer: reads and updates ops.residual().
using LayerBlock = void (*)(LayerOps& ops, const LayerWeights& lw, int layer);

// The feed-forward sublayer of `lw`: the experts when the layer has a router, else the dense MLP.
inline void FeedForward(LayerOps& ops, const LayerWeights& lw, int layer, const float* in, float* out) {
  if (lw.moe.n_experts() > 0) {
    ops.Moe(layer, in, out);
  } else {
    ops.Mlp(layer, in, out);
  }
}

// The blocks of the families (defined in their arch/ files).
void PreNormBlock(LayerOps& ops, const LayerWeights& lw, int layer);  // Llama, Mistral, Qwen, Phi-3, the MoE families
void GemmaBlock(LayerOps& ops, const LayerWeights& lw, int layer);    // Gemma 1, 2, 3
void NemotronHBlock(LayerOps& ops, const LayerWeights& lw, int layer);  // Nemotron-H (hybrid Mamba-2)

}  // namespace parallm
