// The Llama family (Llama 1, 2, 3 with Llama-3 RoPE scaling) and Mistral, which shares its blocks: no biases,
// no q/k norm; GGUF stores Q/K permuted for interleaved RoPE pairs. Mistral's sliding window is not applied
// (its 7B v0.1 window of 4096 only matters beyond 4096 tokens of context).
#include "model/arch/arch.h"

namespace parallm {

const ArchSpec& LlamaSpec() {
  static const ArchSpec spec{Arch::kLlama, "llama", "llama", "llama", "LlamaForCausalLM",
                             /*qkv_bias=*/false, /*qk_norm=*/false, /*default_tied_embeddings=*/false,
                             RopeStyle::kInterleaved};
  return spec;
}

const ArchSpec& MistralSpec() {
  // llama.cpp writes Mistral as general.architecture "llama"; a GGUF file therefore loads as LlamaSpec.
  static const ArchSpec spec{Arch::kMistral, "mistral", "llama", "mistral", "MistralForCausalLM",
                             /*qkv_bias=*/false, /*qk_norm=*/false, /*default_tied_embeddings=*/false,
                             RopeStyle::kInterleaved};
  return spec;
}

}  // namespace parallm
