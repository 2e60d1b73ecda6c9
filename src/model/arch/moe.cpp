// The mixture-of-experts families: Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B: Qwen2's attention with q/k/v
// biases, 60/64 routed experts top-4/8 without renormalisation, plus a shared expert scaled by sigmoid(x . gate)),
// Qwen3-MoE (Qwen3-30B-A3B: Qwen3's q/k norms, 128 experts top-8, renormalised) and Mixtral (Mistral's attention,
// 8 experts top-2; its router's softmax over the top-2 logits equals softmax, top-2, renormalise). Their blocks are
// Llama's pre-norm block whose MLP is the experts (model/moe.h) in the sparse layers.
#include "model/arch/arch.h"

namespace parallm {

const ArchSpec& Qwen2MoeSpec() {
  static const ArchSpec spec{.arch = Arch::kQwen2Moe, .name = "qwen2moe", .gguf_architecture = "qwen2moe",
                             .hf_model_type = "qwen2_moe", .hf_architecture = "Qwen2MoeForCausalLM",
                             .qkv_bias = true, .moe = true, .shared_expert = true, .default_norm_topk_prob = false};
  return spec;
}

const ArchSpec& Qwen3MoeSpec() {
  static const ArchSpec spec{.arch = Arch::kQwen3Moe, .name = "qwen3moe", .gguf_architecture = "qwen3moe",
                             .hf_model_type = "qwen3_moe", .hf_architecture = "Qwen3MoeForCausalLM", .qk_norm = true,
                             .moe = true, .default_norm_topk_prob = true};
  return spec;
}

const ArchSpec& MixtralSpec() {
  // llama.cpp writes Mixtral as general.architecture "llama" with expert_count set.
  static const ArchSpec spec{.arch = Arch::kMixtral, .name = "mixtral", .gguf_architecture = "llama",
                             .hf_model_type = "mixtral", .hf_architecture = "MixtralForCausalLM",
                             .gguf_rope_style = RopeStyle::kInterleaved, .moe = true,
                             .default_norm_topk_prob = true};
  return spec;
}

}  // namespace parallm
