// ModelWeights: every weight of a decoder, bound by name from whatever file held it. Matrices stay in
// their stored (possibly quantized) form inside the mmap; small vectors (norms, biases) are copied to f32.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

#include "tensor/matrix.h"
#include "tensor/tensor.h"

namespace parallm {

// The sparse MLP of a mixture-of-experts layer. Expert e's matrices are views into the stored weights (a slice of
// GGUF's merged 3-D ffn_*_exps or MLX's stacked switch_mlp tensor, or a Hugging Face per-expert tensor).
struct MoeWeights {
  MatrixView router;                    // [n_experts, hidden], f32 (dequantized at load when stored otherwise)
  std::vector<MatrixView> gate, up;     // n_experts x [expert_ffn, hidden]
  std::vector<MatrixView> down;         // n_experts x [hidden, expert_ffn]
  MatrixView shared_gate, shared_up;    // [shared_ffn, hidden] (Qwen2-MoE's shared expert; empty otherwise)
  MatrixView shared_down;               // [hidden, shared_ffn]
  std::vector<float> shared_expert_gate;  // [hidden]: the shared expert's output is scaled by sigmoid(x . this)
  // Nemotron-H: ungated experts (gate and shared_gate empty: down(relu(up x)^2)) and the router's per-expert bias
  // added to the sigmoid scores for the choice only (e_score_correction_bias).
  std::vector<float> score_bias;        // [n_experts]
  int n_experts() const { return static_cast<int>(up.size()); }
};

// The Mamba-2 mixer of a hybrid layer (ModelConfig's ssm_* fields give the shapes).
struct MambaWeights {
  MatrixView in_proj;                   // [ssm_in_proj, hidden]: rows z, then xBC, then dt
  std::vector<float> conv;              // [conv_dim, conv_kernel]: each channel's causal filter, oldest tap first
  std::vector<float> conv_bias;         // [conv_dim] (zeros when the model has none)
  std::vector<float> dt_bias;           // [ssm_heads]
  std::vector<float> a;                 // [ssm_heads]: A = -exp(A_log)
  std::vector<float> d;                 // [ssm_heads]: the skip x * D
  std::vector<float> norm;              // [ssm_inner]: the gated RMSNorm's weight (per group of ssm_inner / groups)
  MatrixView out_proj;                  // [hidden, ssm_inner]
};

struct LayerWeights {
  std::vector<float> attn_norm;             // [hidden]
  MatrixView wq;                            // [q_dim, hidden]
  MatrixView wk;                            // [kv_dim, hidden]
  MatrixView wv;                            // [kv_dim, hidden]
  MatrixView wo;                            // [hidden, q_dim]
  std::vector<float> q_bias, k_bias, v_bias;  // [q_dim], [kv_dim], [kv_dim] (qkv_bias only)
  std::vector<float> q_norm, k_norm;        // [head_dim] (qk_norm only)
  std::vector<float> ffn_norm;              // [hidden]
  MatrixView w_gate;                        // [ffn, hidden]
  MatrixView w_up;                          // [ffn, hidden]
  MatrixView w_down;                        // [hidden, ffn]
  std::vector<float> post_attn_norm, post_ffn_norm;  // [hidden] (post_norms only: Gemma 2, 3)
  // Fused projections as stored (Phi-3): wq/wk/wv are row slices of wqkv, w_gate/w_up of w_gate_up. Kept for
  // writing the model back out; the forward pass reads the slices.
  MatrixView wqkv;                          // [q_dim + 2 kv_dim, hidden]
  MatrixView w_gate_up;                     // [2 ffn, hidden]
  MoeWeights moe;                           // sparse layers of the MoE families (n_experts() == 0 otherwise)
  MambaWeights mamba;                       // Nemotron-H's Mamba-2 layers (in_proj.rows == 0 otherwise)
};

struct ModelWeights {
  MatrixView token_embd;            // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;   // [hidden]
  MatrixView output;                // [vocab, hidden]; the token embedding itself when tied
  TensorSet storage;                // owns the bytes the views point into
  // Copies of the matrices repacked at load into the kernels' layout (MatrixView::packed points into them).
  std::vector<std::shared_ptr<uint8_t[]>> packed;
  size_t packed_bytes = 0;
  // Weights converted at load (routers stored quantized or in 16 bits, held in f32); the views point into them.
  std::vector<std::shared_ptr<std::vector<float>>> converted;
};

// Receives tensors one at a time as f32: canonical name, shape (outermost first), row-major values.
using TensorSink = std::function<Status(const std::string& name, std::vector<int64_t> shape, std::vector<float> values)>;

}  // namespace parallm
