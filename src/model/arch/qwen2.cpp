// The Qwen2 / Qwen2.5 family: Llama blocks plus biases on the q/k/v projections, RoPE on halves ("neox"),
// tied embeddings in the small models.
#include "model/arch/arch.h"

namespace parallm {

const ArchSpec& Qwen2Spec() {
  static const ArchSpec spec{.arch = Arch::kQwen2, .name = "qwen2", .gguf_architecture = "qwen2",
                             .hf_model_type = "qwen2", .hf_architecture = "Qwen2ForCausalLM", .qkv_bias = true,
                             .default_tied_embeddings = true};
  return spec;
}

}  // namespace parallm
