// The Qwen3 family: no q/k/v biases, but an RMSNorm over each query and key head (weights of head_dim)
// before RoPE; head_dim is set explicitly and need not equal hidden / n_heads.
#include "model/arch/arch.h"

namespace parallm {

const ArchSpec& Qwen3Spec() {
  static const ArchSpec spec{.arch = Arch::kQwen3, .name = "qwen3", .gguf_architecture = "qwen3",
                             .hf_model_type = "qwen3", .hf_architecture = "Qwen3ForCausalLM", .qk_norm = true,
                             .default_tied_embeddings = true};
  return spec;
}

}  // namespace parallm
