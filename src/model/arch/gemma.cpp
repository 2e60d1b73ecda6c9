// The Gemma families (Google): Gemma 1 (GeGLU with tanh GELU, embeddings scaled by sqrt(hidden), RMSNorm with
// (1 + w), head_dim set explicitly, tied embeddings), Gemma 2 (plus norms after attention and after the MLP,
// soft-capped attention scores and logits, a sliding window on even layers) and Gemma 3 text (plus q/k norms, a
// window on five of every six layers with its own RoPE base, no soft-capping). All rotate halves in RoPE.
#include "model/arch/arch.h"

namespace parallm {

// x += post_attn_norm(attention(norm(x))); x += post_ffn_norm(mlp(ffn_norm(x))); the post-norms only in Gemma 2
// and 3 (Gemma 1 is pre-norm like Llama, with GeGLU and the scaled embedding).
void GemmaBlock(LayerOps& ops, const LayerWeights& lw, int layer) {
  float* h = ops.scratch();
  ops.Norm(lw.attn_norm, ops.residual(), h);
  ops.Attention(layer, h, h);
  if (!lw.post_attn_norm.empty()) ops.Norm(lw.post_attn_norm, h, h);
  ops.AddToResidual(h);
  ops.Norm(lw.ffn_norm, ops.residual(), h);
  ops.Mlp(layer, h, h);
  if (!lw.post_ffn_norm.empty()) ops.Norm(lw.post_ffn_norm, h, h);
  ops.AddToResidual(h);
}

const ArchSpec& GemmaSpec() {
  static const ArchSpec spec{.arch = Arch::kGemma, .name = "gemma", .gguf_architecture = "gemma",
                             .hf_model_type = "gemma", .hf_architecture = "GemmaForCausalLM",
                             .default_tied_embeddings = true, .block = GemmaBlock,
                             .activation = Activation::kGeluTanh, .embed_scaled = true, .hf_norm_offset = 1.0f};
  return spec;
}

const ArchSpec& Gemma2Spec() {
  static const ArchSpec spec{.arch = Arch::kGemma2, .name = "gemma2", .gguf_architecture = "gemma2",
                             .hf_model_type = "gemma2", .hf_architecture = "Gemma2ForCausalLM",
                             .default_tied_embeddings = true, .block = GemmaBlock,
                             .activation = Activation::kGeluTanh, .embed_scaled = true, .post_norms = true,
                             .hf_norm_offset = 1.0f, .sliding_pattern = 2};
  return spec;
}

const ArchSpec& Gemma3Spec() {
  // Text-only Gemma 3 (the 1B model and mlx-community's text conversions): config.json model_type "gemma3_text".
  static const ArchSpec spec{.arch = Arch::kGemma3, .name = "gemma3", .gguf_architecture = "gemma3",
                             .hf_model_type = "gemma3_text", .hf_architecture = "Gemma3ForCausalLM",
                             .qk_norm = true, .default_tied_embeddings = true, .block = GemmaBlock,
                             .activation = Activation::kGeluTanh, .embed_scaled = true, .post_norms = true,
                             .hf_norm_offset = 1.0f, .sliding_pattern = 6};
  return spec;
}

}  // namespace parallm
