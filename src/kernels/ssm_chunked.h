// The chunked form of the Mamba-2 selective scan (the SSD algorithm, "state-space duality"): over chunks of Q tokens
// the recurrence of SsmScan becomes matrix products (a decay-masked C·Bᵀ applied to x, plus the carried state's
// contribution), and the state passes from one chunk to the next. The same function of its inputs as SsmScan, up to
// rounding: callers that need bit-stable results must give each absolute token position always the same form (see
// model/mamba_mixer.h for the rule the mixer and the scheduler keep).
#pragma once

#include <cstdint>

#include "kernels/ssm.h"

namespace parallm {

// SsmScan's computation for heads [head_begin, head_end) of one sequence over n tokens, n a multiple of `chunk`
// (each chunk of `chunk` tokens computed as one block; the heads of a B/C group share its C·Bᵀ). Per chunk of
// tokens t0..t0+Q-1, with dt and dA as SsmScan, L[t][s] = dA[s+1]···dA[t] (s <= t) and S0 the state before it:
//   y[t][h][p] = sum_{s<=t} (C[t]·B[s]) L[t][s] dt[s] x[s][h][p] + (dA[t0]···dA[t]) (S0[h][p] · C[t]) + D[h] x[t][h][p]
//   S[h][p][:] = (dA[t0]···dA[t0+Q-1]) S0[h][p][:] + sum_s L[t0+Q-1][s] dt[s] x[s][h][p] B[s][:]
// The arguments as SsmScan's. Each chunk's result depends on its tokens and incoming state only (not on n, nor on
// which heads are computed with it).
void SsmChunkedScan(const SsmScanShape& shape, int head_begin, int head_end, int chunk, const float* x,
                    const float* B, const float* C, int64_t xbc_stride, const float* dt_raw, int64_t dt_stride,
                    int64_t n, const float* dt_bias, const float* A, const float* D, float* ssm, float* y,
                    int64_t y_stride);

namespace ref {
// One value at a time, in the order the formulas above read.
void SsmChunkedScan(const SsmScanShape& shape, int head_begin, int head_end, int chunk, const float* x,
                    const float* B, const float* C, int64_t xbc_stride, const float* dt_raw, int64_t dt_stride,
                    int64_t n, const float* dt_bias, const float* A, const float* D, float* ssm, float* y,
                    int64_t y_stride);
}  // namespace ref

}  // namespace parallm
