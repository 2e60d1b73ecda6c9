// The Mamba-2 mixer as transformers' NemotronHMamba2Mixer computes it (torch_forward): in_proj splits into
// z [inner], xBC [conv_dim] and dt [heads]; xBC goes through the causal conv1d and SiLU and splits into x, B, C; the
// scan gives y = SSM(x) + D x; then y * silu(z) is RMS-normed in groups of inner / n_groups (norm_before_gate=False)
// and projected out.
#include "model/mamba_mixer.h"

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/ssm.h"
#include "util/check.h"

namespace parallm {

void MambaMixer(const ModelConfig& c, const MambaWeights& w, int layer, const ForwardBatch& batch, const float* in,
                float* out, SsmStateStorage& state, MambaScratch& s, ThreadPool* pool) {
  const int64_t T = batch.num_tokens(), P = c.ssm_in_proj(), I = c.ssm_inner(), CD = c.ssm_conv_dim();
  const int64_t N = c.ssm_state, G = c.ssm_groups;
  if (static_cast<int64_t>(s.proj.size()) < T * P) s.proj.resize(static_cast<size_t>(T * P));
  if (static_cast<int64_t>(s.xbc.size()) < T * CD) s.xbc.resize(static_cast<size_t>(T * CD));
  if (static_cast<int64_t>(s.y.size()) < T * I) s.y.resize(static_cast<size_t>(T * I));
  MatMul(w.in_proj, in, T, s.proj.data(), P, pool);

  const int64_t n_seq = static_cast<int64_t>(batch.sequences.size());
  auto for_each = [&](int64_t n, auto&& fn) {
    if (pool != nullptr) {
      pool->ParallelFor(n, [&](int64_t i, int) { fn(i); });
    } else {
      for (int64_t i = 0; i < n; ++i) fn(i);
    }
  };
  // The conv, one sequence per task (its window is sequential in time).
  for_each(n_seq, [&](int64_t i) {
    const SequenceSlice& seq = batch.sequences[static_cast<size_t>(i)];
    PARALLM_CHECK_MSG(seq.state_slot >= 0, "a hybrid model's sequence without a state slot");
    if (seq.num_tokens == 0) return;
    const int64_t t0 = seq.token_begin;
    SsmConv1d(s.proj.data() + t0 * P + I, P, seq.num_tokens, static_cast<int>(CD), c.ssm_conv_kernel, w.conv.data(),
              w.conv_bias.empty() ? nullptr : w.conv_bias.data(), state.Conv(layer, seq.state_slot),
              s.xbc.data() + t0 * CD, CD);
  });
  // The scan, one (sequence, head) per task: heads own disjoint rows of the state.
  const SsmScanShape shape{c.ssm_heads, c.ssm_head_dim, c.ssm_state, c.ssm_groups, c.ssm_dt_min};
  for_each(n_seq * c.ssm_heads, [&](int64_t task) {
    const SequenceSlice& seq = batch.sequences[static_cast<size_t>(task / c.ssm_heads)];
    const int h = static_cast<int>(task % c.ssm_heads);
    if (seq.num_tokens == 0) return;
    const int64_t t0 = seq.token_begin;
    const float* xbc = s.xbc.data() + t0 * CD;
    SsmScan(shape, h, h + 1, xbc, xbc + I, xbc + I + G * N, CD, s.proj.data() + t0 * P + I + CD, P, seq.num_tokens,
            w.dt_bias.data(), w.a.data(), w.d.data(), state.Ssm(layer, seq.state_slot), s.y.data() + t0 * I, I);
  });
  // Gate with silu(z), then RMSNorm each group of inner / groups channels with its slice of the weight.
  const int64_t gs = I / G;
  for (int64_t t = 0; t < T; ++t) {
    float* y = s.y.data() + t * I;
    const float* z = s.proj.data() + t * P;
    for (int64_t i = 0; i < I; ++i) y[i] *= z[i] / (1.0f + std::exp(-z[i]));
    for (int64_t g = 0; g < G; ++g) RmsNorm(y + g * gs, w.norm.data() + g * gs, c.rms_eps, 1, gs, y + g * gs);
  }
  MatMul(w.out_proj, s.y.data(), T, out, c.hidden, pool);
}

}  // namespace parallm
