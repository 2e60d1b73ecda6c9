// Elementwise and row-wise kernels: RMSNorm, RoPE, SiluMul, Softmax. Each row is computed the same way
// whatever the batch, so these keep batch invariance.
#include "kernels/ops.h"

#include "kernels/fast_exp.h"
#include "kernels/target_clones.h"
#include "util/check.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace parallm {

// The sum of squares in double (dim up to ~8k: the norm stays exact to f32 rounding), in 8 lanes merged in a fixed
// order so that it vectorizes: one serial chain of double additions made a 512-token prefill wait ~3% of its time.
PARALLM_CLONES void RmsNorm(const float* x, const float* w, float eps, int64_t n_rows, int64_t dim, float* y) {
  constexpr int kLanes = 8;
  constexpr int kBlock = 16;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= dim; i += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] += static_cast<double>(xr[i + l]) * xr[i + l];
    for (int width = kLanes / 2; width > 0; width /= 2)
      for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
    double ss = acc[0];
    for (; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    // Through local blocks (y may be x): the plain loop needed an alias check, so GCC 12 at -O2 left it scalar.
    int64_t j = 0;
    for (; j + kBlock <= dim; j += kBlock) {
      float out[kBlock];
      for (int l = 0; l < kBlock; ++l) out[l] = xr[j + l] * scale * w[j + l];
      for (int l = 0; l < kBlock; ++l) yr[j + l] = out[l];
    }
    for (; j < dim; ++j) yr[j] = xr[j] * scale * w[j];
  }
}

void RopeInvFreqs(int rotary_dim, float theta, const float* freq_factors, float* inv_freq) {
  for (int i = 0; i < rotary_dim / 2; ++i) {
    double f = std::pow(static_cast<double>(theta), -2.0 * i / rotary_dim);
    if (freq_factors != nullptr) f /= freq_factors[i];
    inv_freq[i] = static_cast<float>(f);
  }
}

void RopeCosSin(int rotary_dim, int64_t position, const float* inv_freq, float* cos_sin) {
  const int half = rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * inv_freq[i];
    cos_sin[i] = static_cast<float>(std::cos(angle));
    cos_sin[half + i] = static_cast<float>(std::sin(angle));
  }
}

namespace {

// One head's rotation, 16 pairs at a time through local blocks (GCC 12 at -O2 vectorizes no loop that needs an alias
// check or a remainder, and the plain pair loop ran one value at a time), then the remaining pairs one by one. Each
// value's operations (a product, a product, a difference or a sum; no contraction in this file) are the same in
// every lane, in the tail and on every clone. kHalf's halves are contiguous; interleaved pairs are read 32 values
// at a time and split in the block.
inline __attribute__((always_inline)) void RotateHeads(float* x, int n_heads, int head_dim, int half,
                                                       const float* __restrict cs, const float* __restrict sn,
                                                       RopeStyle style) {
  constexpr int kBlock = 16;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * head_dim;
    int i = 0;
    if (style == RopeStyle::kHalf) {
      for (; i + kBlock <= half; i += kBlock) {
        float a[kBlock], b[kBlock];
        for (int l = 0; l < kBlock; ++l) {
          const float x0 = head[i + l], x1 = head[half + i + l];
          a[l] = x0 * cs[i + l] - x1 * sn[i + l];
          b[l] = x0 * sn[i + l] + x1 * cs[i + l];
        }
        for (int l = 0; l < kBlock; ++l) {
          head[i + l] = a[l];
          head[half + i + l] = b[l];
        }
      }
      for (; i < half; ++i) {
        const float x0 = head[i], x1 = head[half + i];
        head[i] = x0 * cs[i] - x1 * sn[i];
        head[half + i] = x0 * sn[i] + x1 * cs[i];
      }
    } else {
      for (; i + kBlock <= half; i += kBlock) {
        float x0[kBlock], x1[kBlock], out[2 * kBlock];
        for (int l = 0; l < kBlock; ++l) {
          x0[l] = head[2 * (i + l)];
          x1[l] = head[2 * (i + l) + 1];
        }
        for (int l = 0; l < kBlock; ++l) {
          out[2 * l] = x0[l] * cs[i + l] - x1[l] * sn[i + l];
          out[2 * l + 1] = x0[l] * sn[i + l] + x1[l] * cs[i + l];
        }
        for (int l = 0; l < 2 * kBlock; ++l) head[2 * i + l] = out[l];
      }
      for (; i < half; ++i) {
        const float x0 = head[2 * i], x1 = head[2 * i + 1];
        head[2 * i] = x0 * cs[i] - x1 * sn[i];
        head[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

}  // namespace

PARALLM_CLONES void ApplyRope(float* q, int n_q_heads, float* k, int n_k_heads, int head_dim, int rotary_dim,
                              const float* cos_sin, RopeStyle style) {
  const int half = rotary_dim / 2;
  RotateHeads(q, n_q_heads, head_dim, half, cos_sin, cos_sin + half, style);
  if (k != nullptr) RotateHeads(k, n_k_heads, head_dim, half, cos_sin, cos_sin + half, style);
}

// 16 values at a time with the polynomial exp, so the loop vectorizes (std::exp is a call per value: a batched
// decode step spent several percent in it); the same arithmetic on every clone and for the tail.
PARALLM_CLONES void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr int kLanes = 16;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    // Through a local block: all loads before any store, so no alias check is needed when out is gate.
    // The exp in its own loop: inlined into the division, GCC splits the clamp's cases and issues a second
    // (masked) division per vector, and the divider was what the loop waited on.
    float e[kLanes], block[kLanes];
    for (int l = 0; l < kLanes; ++l) e[l] = 1.0f + ExpClamped(-gate[i + l]);
    for (int l = 0; l < kLanes; ++l) block[l] = gate[i + l] / e[l] * up[i + l];
    for (int l = 0; l < kLanes; ++l) out[i + l] = block[l];
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + ExpClamped(-gate[i])) * up[i];
}

// GELU's tanh form as a logistic: 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u)), u = sqrt(2/pi) (g + 0.044715 g^3);
// the same loop shape as SiluMul, one exp and one division per value.
constexpr float kGeluTwoC = 2.0f * 0.7978845608028654f;  // 2 sqrt(2/pi)

PARALLM_CLONES void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr int kLanes = 16;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    float e[kLanes], block[kLanes];
    for (int l = 0; l < kLanes; ++l) {
      const float g = gate[i + l];
      e[l] = 1.0f + ExpClamped(-kGeluTwoC * (g + 0.044715f * g * g * g));
    }
    for (int l = 0; l < kLanes; ++l) block[l] = gate[i + l] / e[l] * up[i + l];
    for (int l = 0; l < kLanes; ++l) out[i + l] = block[l];
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + ExpClamped(-kGeluTwoC * (g + 0.044715f * g * g * g))) * up[i];
  }
}

// 16 values at a time in a local block, so the loop vectorizes at -O2 (the scalar loop did not: a batched decode step
// of a 64-expert mixture combines 8 rows of 1024 per token and layer); mul then add (fp-contract is off here).
PARALLM_CLONES void WeightedRowSum(const float* const* rows, const float* w, int n_rows, int64_t n, float* out) {
  constexpr int kLanes = 16;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    float acc[kLanes];
    for (int l = 0; l < kLanes; ++l) acc[l] = 0.0f;
    for (int j = 0; j < n_rows; ++j) {
      const float wj = w[j];
      const float* r = rows[j] + i;
      for (int l = 0; l < kLanes; ++l) acc[l] = acc[l] + wj * r[l];
    }
    for (int l = 0; l < kLanes; ++l) out[i + l] = acc[l];
  }
  for (; i < n; ++i) {
    float acc = 0.0f;
    for (int j = 0; j < n_rows; ++j) acc = acc + w[j] * rows[j][i];
    out[i] = acc;
  }
}

// Through local blocks, as WeightedRowSum: GCC 12 at -O2 vectorizes only loops that need no alias check or remainder,
// and the plain loop (a decode step's bias and residual adds) ran one value at a time.
PARALLM_CLONES void AddInPlace(float* x, const float* y, int64_t n) {
  constexpr int kLanes = 16;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    float sum[kLanes];
    for (int l = 0; l < kLanes; ++l) sum[l] = x[i + l] + y[i + l];
    for (int l = 0; l < kLanes; ++l) x[i + l] = sum[l];
  }
  for (; i < n; ++i) x[i] += y[i];
}

PARALLM_CLONES void ReluSquared(const float* x, int64_t n, float* out) {
  constexpr int kLanes = 16;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    float block[kLanes];
    for (int l = 0; l < kLanes; ++l) block[l] = x[i + l] > 0.0f ? x[i + l] * x[i + l] : 0.0f;
    for (int l = 0; l < kLanes; ++l) out[i + l] = block[l];
  }
  for (; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] * x[i] : 0.0f;
}

namespace ref {
void WeightedRowSum(const float* const* rows, const float* w, int n_rows, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float acc = 0.0f;
    for (int j = 0; j < n_rows; ++j) acc += w[j] * rows[j][i];
    out[i] = acc;
  }
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

// In double with std::exp. (The textbook 0.5 g (1 + tanh(u)) loses every digit to cancellation for g < -5, where
// tanh(u) rounds to -1; the logistic form is the same function without the cancellation.)
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double gelu = g / (1.0 + std::exp(-2.0 * 0.7978845608028654 * (g + 0.044715 * g * g * g)));
    out[i] = static_cast<float>(gelu * up[i]);
  }
}
}  // namespace ref

// One pass: each lane keeps the largest value it has seen and the index where it first saw it (a strictly greater
// value replaces it, so ties keep the earlier index and NaNs are never taken), in two 16-float GCC vectors a step
// (one AVX-512 register each in the AVX-512 clone, SSE or NEON quarters elsewhere). Every index belongs to one lane,
// so the scan's answer is the smallest index among the lanes holding the largest value, if that beats *best. A
// greedy step at 64 sequences runs this over 64 rows of 151,936 logits (or over their chunks, MatMulArgMax).
PARALLM_CLONES void ScanMax(const float* x, int64_t n, int64_t base, float* best, int64_t* at) {
  typedef float Vec __attribute__((vector_size(64)));
  typedef int32_t IVec __attribute__((vector_size(64)));
  constexpr int kLanes = 16;
  PARALLM_CHECK(n >= 0 && n <= INT32_MAX);
  const float start = *best;
  Vec m[2] = {Vec{} + start, Vec{} + start};  // a lane still at `start` took nothing (only greater values enter)
  IVec lane_at[2] = {IVec{}, IVec{}};
  IVec index = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    for (int h = 0; h < 2; ++h) {
      Vec v;
      std::memcpy(&v, x + i + h * kLanes, sizeof(v));
      const IVec greater = v > m[h];
      m[h] = greater ? v : m[h];
      lane_at[h] = greater ? index : lane_at[h];
      index += kLanes;
    }
  }
  float b = start;
  int64_t b_at = *at;
  bool taken = false;
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < kLanes; ++j)
      if (m[h][j] > b || (taken && m[h][j] == b && base + lane_at[h][j] < b_at)) {
        b = m[h][j];
        b_at = base + lane_at[h][j];
        taken = true;
      }
  for (; i < n; ++i)
    if (x[i] > b) {
      b = x[i];
      b_at = base + i;
    }
  *best = b;
  *at = b_at;
}

int32_t ArgMax(std::span<const float> logits) {
  if (logits.empty()) return 0;
  PARALLM_CHECK(logits.size() <= static_cast<size_t>(INT32_MAX));
  float best = logits[0];
  int64_t at = 0;
  ScanMax(logits.data(), static_cast<int64_t>(logits.size()), 0, &best, &at);
  return static_cast<int32_t>(at);
}

void SoftCap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void Softmax(float* x, int64_t n) {
  float mx = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace parallm
