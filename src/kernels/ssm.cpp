// The Mamba-2 conv1d and selective scan, written so the compiler vectorizes the inner loops: the conv runs over
// channels (contiguous in the window and the rows), the scan's state update over the state size, and its output dot
// product keeps 8 partial sums (a vector register) that are added in a fixed order at the end.
#include "kernels/ssm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/target_clones.h"

namespace parallm {
namespace {

float Silu(float v) { return v / (1.0f + std::exp(-v)); }

}  // namespace

// The taps' sums run 16 channels at a time through a local block (written straight to `out`, the loops needed alias
// checks, and GCC 12 at -O2 left them scalar); each channel's sum keeps its order: bias, the window's taps, the new
// token's. The SiLU stays one std::exp a value.
PARALLM_CLONES
void SsmConv1d(const float* x, int64_t x_stride, int64_t n, int channels, int kernel, const float* w,
               const float* bias, float* state, float* out, int64_t out_stride) {
  const int64_t C = channels, K = kernel;
  constexpr int64_t kBlock = 16;
  // The filter transposed to [kernel, channels] so that each tap is a contiguous row.
  thread_local std::vector<float> wt;
  wt.resize(static_cast<size_t>(K * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) wt[static_cast<size_t>(j * C + c)] = w[c * K + j];
  const float* wl = wt.data() + (K - 1) * C;
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * x_stride;
    float* o = out + t * out_stride;
    int64_t c0 = 0;
    for (; c0 + kBlock <= C; c0 += kBlock) {
      float acc[kBlock];
      for (int64_t l = 0; l < kBlock; ++l) acc[l] = bias != nullptr ? bias[c0 + l] : 0.0f;
      for (int64_t j = 0; j < K - 1; ++j) {
        const float* s = state + j * C + c0;
        const float* wj = wt.data() + j * C + c0;
        for (int64_t l = 0; l < kBlock; ++l) acc[l] += wj[l] * s[l];
      }
      for (int64_t l = 0; l < kBlock; ++l) acc[l] += wl[c0 + l] * xt[c0 + l];
      for (int64_t l = 0; l < kBlock; ++l) o[c0 + l] = acc[l];
    }
    for (int64_t c = c0; c < C; ++c) {
      float v = bias != nullptr ? bias[c] : 0.0f;
      for (int64_t j = 0; j < K - 1; ++j) v += wt[static_cast<size_t>(j * C + c)] * state[j * C + c];
      o[c] = v + wl[c] * xt[c];
    }
    for (int64_t c = 0; c < C; ++c) o[c] = Silu(o[c]);
    // Slide the window by one token.
    if (K > 1) {
      std::copy(state + C, state + (K - 1) * C, state);
      std::copy(xt, xt + C, state + (K - 2) * C);
    }
  }
}

// The state update and the dot product vectorize 8 lanes at a time (acc); the clones keep that order.
PARALLM_CLONES
void SsmScan(const SsmScanShape& sh, int head_begin, int head_end, const float* x, const float* B, const float* C,
             int64_t xbc_stride, const float* dt_raw, int64_t dt_stride, int64_t n, const float* dt_bias,
             const float* A, const float* D, float* ssm, float* y, int64_t y_stride) {
  const int64_t P = sh.head_dim, N = sh.state, heads_per_group = sh.heads / sh.groups;
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * xbc_stride;
    const float* bt = B + t * xbc_stride;
    const float* ct = C + t * xbc_stride;
    float* yt = y + t * y_stride;
    for (int64_t h = head_begin; h < head_end; ++h) {
      const float dt = SsmStepSize(dt_raw[t * dt_stride + h], dt_bias[h], sh.dt_min);
      const float dA = std::exp(dt * A[h]);
      const int64_t g = h / heads_per_group;
      const float* bg = bt + g * N;
      const float* cg = ct + g * N;
      for (int64_t p = 0; p < P; ++p) {
        const float xv = xt[h * P + p];
        const float dtx = dt * xv;
        float* s = ssm + (h * P + p) * N;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t i = 0;
        // The new state through a local block: written straight to s, the loop needed an alias check against B and
        // C, and GCC 12 at -O2 left it scalar on every clone.
        for (; i + 8 <= N; i += 8) {
          float next[8];
          for (int64_t l = 0; l < 8; ++l) next[l] = s[i + l] * dA + dtx * bg[i + l];
          for (int64_t l = 0; l < 8; ++l) acc[l] += next[l] * cg[i + l];
          for (int64_t l = 0; l < 8; ++l) s[i + l] = next[l];
        }
        for (; i < N; ++i) {
          s[i] = s[i] * dA + dtx * bg[i];
          acc[0] += s[i] * cg[i];
        }
        const float dot = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        yt[h * P + p] = dot + D[h] * xv;
      }
    }
  }
}

namespace ref {

void SsmConv1d(const float* x, int64_t x_stride, int64_t n, int channels, int kernel, const float* w,
               const float* bias, float* state, float* out, int64_t out_stride) {
  const int64_t C = channels, K = kernel;
  std::vector<float> window(static_cast<size_t>(K));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t j = 0; j < K - 1; ++j) window[static_cast<size_t>(j)] = state[j * C + c];
      window[static_cast<size_t>(K - 1)] = x[t * x_stride + c];
      float v = bias != nullptr ? bias[c] : 0.0f;
      for (int64_t j = 0; j < K; ++j) v += w[c * K + j] * window[static_cast<size_t>(j)];
      out[t * out_stride + c] = v / (1.0f + std::exp(-v));
      for (int64_t j = 0; j < K - 1; ++j) state[j * C + c] = window[static_cast<size_t>(j + 1)];
    }
  }
}

void SsmScan(const SsmScanShape& sh, int head_begin, int head_end, const float* x, const float* B, const float* C,
             int64_t xbc_stride, const float* dt_raw, int64_t dt_stride, int64_t n, const float* dt_bias,
             const float* A, const float* D, float* ssm, float* y, int64_t y_stride) {
  const int64_t P = sh.head_dim, N = sh.state;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = head_begin; h < head_end; ++h) {
      float v = dt_raw[t * dt_stride + h] + dt_bias[h];
      float dt = v > 20.0f ? v : std::log1p(std::exp(v));
      if (dt < sh.dt_min) dt = sh.dt_min;
      const float dA = std::exp(dt * A[h]);
      const int64_t g = h / (sh.heads / sh.groups);
      for (int64_t p = 0; p < P; ++p) {
        const float xv = x[t * xbc_stride + h * P + p];
        float dot = 0;
        for (int64_t i = 0; i < N; ++i) {
          float& s = ssm[(h * P + p) * N + i];
          s = s * dA + (dt * xv) * B[t * xbc_stride + g * N + i];
          dot += s * C[t * xbc_stride + g * N + i];
        }
        y[t * y_stride + h * P + p] = dot + D[h] * xv;
      }
    }
  }
}

}  // namespace ref
}  // namespace parallm
