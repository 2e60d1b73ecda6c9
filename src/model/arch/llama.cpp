// The Llama family (Llama 1, 2, 3 with Llama-3 RoPE scaling) and Mistral, which shares its blocks: no biases,
// no q/k norm; GGUF stores Q/K permuted for interleaved RoPE pairs. Mistral's sliding window (7B v0.1: 4096, on
// every layer) comes from config.json's sliding_window and is applied exactly.
#include "model/arch/arch.h"

namespace parallm {

// The pre-norm block every Llama-shaped family runs: x += attention(norm(x)); x += mlp(norm(x)), the MLP being the
// experts in the sparse layers of the MoE families.
void PreNormBlock(LayerOps& ops, const LayerWeights& lw, int layer) {
  float* h = ops.scratch();
  ops.Norm(lw.attn_norm, ops.residual(), h);
  ops.Attention(layer, h, h);
  ops.AddToResidual(h);
  ops.Norm(lw.ffn_norm, ops.residual(), h);
  FeedForward(ops, lw, layer, h, h);
  ops.AddToResidual(h);
}

const ArchSpec& LlamaSpec() {
  static const ArchSpec spec{.arch = Arch::kLlama, .name = "llama", .gguf_architecture = "llama",
                             .hf_model_type = "llama", .hf_architecture = "LlamaForCausalLM",
                             .gguf_rope_style = RopeStyle::kInterleaved};
  return spec;
}

const ArchSpec& MistralSpec() {
  // llama.cpp writes Mistral as general.architecture "llama"; a GGUF file therefore loads as LlamaSpec.
  static const ArchSpec spec{.arch = Arch::kMistral, .name = "mistral", .gguf_architecture = "llama",
                             .hf_model_type = "mistral", .hf_architecture = "MistralForCausalLM",
                             .gguf_rope_style = RopeStyle::kInterleaved};
  return spec;
}

}  // namespace parallm
