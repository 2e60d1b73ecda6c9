// Nemotron-H (NemotronHForCausalLM: Nemotron-H 8B/47B, Nemotron-Nano-9B-v2, Nemotron-3-Nano-30B-A3B): a hybrid whose
// layers each hold one mixer behind one RMSNorm, as hybrid_override_pattern spells them: Mamba-2 ('M'), attention
// without RoPE ('*'), an ungated squared-ReLU MLP ('-') or sigmoid-routed ungated experts with a shared expert ('E').
// Every layer is x += mixer(norm(x)); the Mamba layers keep a per-request recurrent state (cache/ssm_state.h)
// instead of KV blocks.
#include "model/arch/arch.h"

namespace parallm {

void NemotronHBlock(LayerOps& ops, const LayerWeights& lw, int layer) {
  float* h = ops.scratch();
  ops.Norm(lw.attn_norm, ops.residual(), h);
  switch (ops.config().KindOf(layer)) {
    case LayerKind::kMamba: ops.Mamba(layer, h, h); break;
    case LayerKind::kAttention: ops.Attention(layer, h, h); break;
    case LayerKind::kMlp: ops.Mlp(layer, h, h); break;
    case LayerKind::kMoe: ops.Moe(layer, h, h); break;
  }
  ops.AddToResidual(h);
}

const ArchSpec& NemotronHSpec() {
  // llama.cpp's converter writes general.architecture "nemotron_h" (MLP layers) or "nemotron_h_moe" (experts).
  static const ArchSpec spec{.arch = Arch::kNemotronH, .name = "nemotronh", .gguf_architecture = "nemotron_h",
                             .gguf_moe_architecture = "nemotron_h_moe",
                             .hf_model_type = "nemotron_h", .hf_architecture = "NemotronHForCausalLM",
                             .block = NemotronHBlock, .activation = Activation::kRelu2, .moe = true,
                             .default_norm_topk_prob = true};
  return spec;
}

}  // namespace parallm
