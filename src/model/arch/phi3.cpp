// The Phi-3 family (Phi-3-mini/medium, Phi-3.5-mini, Phi-4-mini): Llama blocks whose Q/K/V projections are one
// matrix (qkv_proj) and whose gate/up projections are one (gate_up_proj), bound as row slices of them; LongRoPE
// scaling with short and long factors; partial rotary embeddings (Phi-4-mini rotates 3/4 of each head); a
// sliding window on every layer in Phi-3-mini-4k. RoPE rotates halves.
#include "model/arch/arch.h"

namespace parallm {

const ArchSpec& Phi3Spec() {
  static const ArchSpec spec{.arch = Arch::kPhi3, .name = "phi3", .gguf_architecture = "phi3",
                             .hf_model_type = "phi3", .hf_architecture = "Phi3ForCausalLM",
                             .fused_projections = true};
  return spec;
}

}  // namespace parallm
