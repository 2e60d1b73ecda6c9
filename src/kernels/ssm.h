// The Mamba-2 kernels of hybrid models (Nemotron-H): the causal depthwise conv1d over a sequence's new tokens,
// continuing from its rolling window, and the selective scan (SSD recurrence) per head, continuing from its state.
// Both run one sequence at a time, token after token, so a sequence's results do not depend on the batch it is in,
// nor on how its prompt was split into chunks (prefill and decode are the same loop). Each has a scalar twin in
// ref:: with the same signature, which the tests compare it with. Prefill's chunked form of the scan is in
// kernels/ssm_chunked.h.
#pragma once

#include <cmath>
#include <cstdint>

namespace parallm {

// Causal depthwise conv1d with SiLU, for `n` tokens of one sequence:
//   out[t][c] = silu(bias[c] + sum_j w[c * kernel + j] * window_t[j][c]),
// where window_t is the last `kernel` inputs up to token t (oldest first): the kernel - 1 held in `state`
// ([kernel - 1, channels], oldest first: the inputs before this call, zeros for a new sequence) followed by the new
// x rows. x: [n, channels] rows x_stride apart; out: [n, channels] rows out_stride apart (out must not alias x).
// `state` is left holding the last kernel - 1 inputs. bias may be null (no bias).
void SsmConv1d(const float* x, int64_t x_stride, int64_t n, int channels, int kernel, const float* w,
               const float* bias, float* state, float* out, int64_t out_stride);

struct SsmScanShape {
  int heads = 0;     // SSM heads
  int head_dim = 0;  // channels per head (P)
  int state = 0;     // state size per channel (N)
  int groups = 1;    // B/C groups: head h reads group h / (heads / groups)
  float dt_min = 0;  // softplus(dt + dt_bias) is clamped below at dt_min
};

// A token's step size for one head: max(softplus(dt_raw + dt_bias), dt_min), softplus as torch's (beta 1, threshold
// 20: the input itself above it). Shared by the scan and its chunked form so both see the same dt.
inline float SsmStepSize(float dt_raw, float dt_bias, float dt_min) {
  const float v = dt_raw + dt_bias;
  const float sp = v > 20.0f ? v : std::log1p(std::exp(v));
  return sp < dt_min ? dt_min : sp;
}

// The selective scan of heads [head_begin, head_end) over `n` tokens of one sequence. Per token t and head h:
//   dt = max(softplus(dt_raw[t][h] + dt_bias[h]), dt_min);  dA = exp(dt * A[h])
//   S[h][p][:] = S[h][p][:] * dA + (dt * x[t][h][p]) * B[t][g][:]
//   y[t][h][p] = S[h][p][:] . C[t][g][:] + D[h] * x[t][h][p]
// x: [n, heads * head_dim], B and C: [n, groups * state], all rows xbc_stride apart (slices of the conv output);
// dt_raw: [n, heads] rows dt_stride apart; ssm: [heads, head_dim, state], updated; y: rows y_stride apart.
void SsmScan(const SsmScanShape& shape, int head_begin, int head_end, const float* x, const float* B, const float* C,
             int64_t xbc_stride, const float* dt_raw, int64_t dt_stride, int64_t n, const float* dt_bias,
             const float* A, const float* D, float* ssm, float* y, int64_t y_stride);

namespace ref {
// One value at a time, in the order the formulas read.
void SsmConv1d(const float* x, int64_t x_stride, int64_t n, int channels, int kernel, const float* w,
               const float* bias, float* state, float* out, int64_t out_stride);
void SsmScan(const SsmScanShape& shape, int head_begin, int head_end, const float* x, const float* B, const float* C,
             int64_t xbc_stride, const float* dt_raw, int64_t dt_stride, int64_t n, const float* dt_bias,
             const float* A, const float* D, float* ssm, float* y, int64_t y_stride);
}  // namespace ref

}  // namespace parallm
