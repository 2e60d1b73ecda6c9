// The Mamba-2 mixer as transformers' NemotronHMamba2Mixer computes it (torch_forward): in_proj splits into
// z [inner], xBC [conv_dim] and dt [heads]; xBC goes through the causal conv1d and SiLU and splits into x, B, C; the
// scan gives y = SSM(x) + D x; then y * silu(z) is RMS-normed in groups of inner / n_groups (norm_before_gate=False)
// and projected out.
#include "model/mamba_mixer.h"

#include <algorithm>
#include <cmath>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/ssm.h"
#include "kernels/ssm_chunked.h"
#include "util/check.h"

namespace parallm {

int SsdChunk(const ModelConfig& c) { return std::min(c.ssm_chunk, 32); }

SsdRuns SsdChunks(const SequenceSlice& seq, int chunk) {
  const int32_t first = seq.context_len - seq.num_tokens, end = seq.context_len;
  const int32_t prompt_end = seq.num_prompt_tokens > 0 ? std::min(seq.num_prompt_tokens, end) : end;
  const int32_t begin = std::min((first + chunk - 1) / chunk * chunk, end);
  return {begin, std::max(begin, prompt_end / chunk * chunk)};
}

void MambaMixer(const ModelConfig& c, const MambaWeights& w, int layer, const ForwardBatch& batch, const float* in,
                float* out, SsmStateStorage& state, MambaScratch& s, ThreadPool* pool,
                std::span<const RowRange> bf16_rows) {
  const int64_t T = batch.num_tokens(), P = c.ssm_in_proj(), I = c.ssm_inner(), CD = c.ssm_conv_dim();
  const int64_t N = c.ssm_state, G = c.ssm_groups;
  if (static_cast<int64_t>(s.proj.size()) < T * P) s.proj.resize(static_cast<size_t>(T * P));
  if (static_cast<int64_t>(s.xbc.size()) < T * CD) s.xbc.resize(static_cast<size_t>(T * CD));
  if (static_cast<int64_t>(s.y.size()) < T * I) s.y.resize(static_cast<size_t>(T * I));
  MatMul(w.in_proj, in, T, s.proj.data(), P, pool, bf16_rows);

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
  // The scan. A sequence's tokens split into three runs: the scan up to the first SSD-chunk boundary, the chunked
  // form over the whole chunks inside both this step and the prompt (SsdChunks), the scan after them. A sequence
  // with chunks runs one task per B/C group (its heads share each chunk's C·Bᵀ), the others one per head; heads own
  // disjoint rows of the state.
  const int chunk = SsdChunk(c);
  PARALLM_CHECK(chunk > 0);
  const SsmScanShape shape{c.ssm_heads, c.ssm_head_dim, c.ssm_state, c.ssm_groups, c.ssm_dt_min};
  std::vector<MambaScratch::ScanTask>& tasks = s.tasks;
  tasks.clear();
  const int per_group = c.ssm_heads / c.ssm_groups;
  for (int32_t i = 0; i < static_cast<int32_t>(n_seq); ++i) {
    const SequenceSlice& seq = batch.sequences[static_cast<size_t>(i)];
    if (seq.num_tokens == 0) continue;
    const SsdRuns runs = SsdChunks(seq, chunk);
    const int width = runs.chunked_end > runs.chunked_begin ? per_group : 1;
    for (int h = 0; h < c.ssm_heads; h += width) tasks.push_back({i, h, h + width, runs});
  }
  for_each(static_cast<int64_t>(tasks.size()), [&](int64_t k) {
    const MambaScratch::ScanTask& task = tasks[static_cast<size_t>(k)];
    const SequenceSlice& seq = batch.sequences[static_cast<size_t>(task.seq)];
    const SsdRuns& runs = task.runs;
    const int32_t first = seq.context_len - seq.num_tokens;  // the position of the slice's first token
    float* ssm = state.Ssm(layer, seq.state_slot);
    // Tokens [from, to) of the slice, by absolute position.
    auto run = [&](int32_t from, int32_t to, bool chunked) {
      if (to <= from) return;
      const int64_t t0 = seq.token_begin + (from - first);
      const float* xbc = s.xbc.data() + t0 * CD;
      const float* dt = s.proj.data() + t0 * P + I + CD;
      if (chunked) {
        SsmChunkedScan(shape, task.head_begin, task.head_end, chunk, xbc, xbc + I, xbc + I + G * N, CD, dt, P,
                       to - from, w.dt_bias.data(), w.a.data(), w.d.data(), ssm, s.y.data() + t0 * I, I);
      } else {
        SsmScan(shape, task.head_begin, task.head_end, xbc, xbc + I, xbc + I + G * N, CD, dt, P, to - from,
                w.dt_bias.data(), w.a.data(), w.d.data(), ssm, s.y.data() + t0 * I, I);
      }
    };
    run(first, runs.chunked_begin, false);
    run(runs.chunked_begin, runs.chunked_end, true);
    run(runs.chunked_end, seq.context_len, false);
  });
  // Gate with silu(z), then RMSNorm each group of inner / groups channels with its slice of the weight.
  const int64_t gs = I / G;
  for (int64_t t = 0; t < T; ++t) {
    float* y = s.y.data() + t * I;
    const float* z = s.proj.data() + t * P;
    for (int64_t i = 0; i < I; ++i) y[i] *= z[i] / (1.0f + std::exp(-z[i]));
    for (int64_t g = 0; g < G; ++g) RmsNorm(y + g * gs, w.norm.data() + g * gs, c.rms_eps, 1, gs, y + g * gs);
  }
  MatMul(w.out_proj, s.y.data(), T, out, c.hidden, pool, bf16_rows);
}

}  // namespace parallm
