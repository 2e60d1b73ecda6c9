// The Qwen3 family: no q/k/v biases, but an RMSNorm over each query and key head (weights of head_dim)
// before RoPE; head_dim is set explicitly and need not equal hidden / n_heads.
#include "model/arch/arch.h"

namespace parallm {

const ArchSpec& Qwen3Spec() {
  static const ArchSpec spec{Arch::kQwen3, "qwen3", "qwen3", "qwen3", "Qwen3ForCausalLM",
                             /*qkv_bias=*/false, /*qk_norm=*/true, /*default_tied_embeddings=*/true,
                             RopeStyle::kHalf};
  return spec;
}

}  // namespace parallm
