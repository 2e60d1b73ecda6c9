// The Qwen2 / Qwen2.5 family: Llama blocks plus biases on the q/k/v projections, RoPE on halves ("neox"),
// tied embeddings in the small models.
#include "model/arch/arch.h"

namespace parallm {

const ArchSpec& Qwen2Spec() {
  static const ArchSpec spec{Arch::kQwen2, "qwen2", "qwen2", "qwen2", "Qwen2ForCausalLM",
                             /*qkv_bias=*/true, /*qk_norm=*/false, /*default_tied_embeddings=*/true,
                             RopeStyle::kHalf};
  return spec;
}

}  // namespace parallm
