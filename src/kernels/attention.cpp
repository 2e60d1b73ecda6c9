// Paged attention, vectorized: dot products and the weighted value sum run over 16 independent lanes
// (one AVX-512 register, two AVX2 registers) with a fixed lane-merge order, so every machine path gives
// a result that depends only on the token's own data. Compiled for AVX-512, AVX2 and baseline x86-64 with
// GCC target_clones; the CPU picks one at load time.
#include "kernels/attention.h"

#include <cmath>
#include <algorithm>

#include "kernels/fast_exp.h"
#include "kernels/ops.h"

namespace parallm {
namespace {

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define PARALLM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PARALLM_CLONES
#endif

constexpr int kLanes = 16;

// Sum of a[i] * b[i] over n values (n a multiple of 16 takes the fast loop; the tail is scalar), lanes merged
// pairwise in a fixed order.
PARALLM_CLONES float Dot(const float* a, const float* b, int n) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  float sum = acc[0];
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// x[i] = exp(x[i] - mx) for i < n; returns the sum, accumulated in 16 lanes merged in a fixed order.
PARALLM_CLONES float ExpShiftSum(float* x, int64_t n, float mx) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      x[i + l] = ExpClamped(x[i + l] - mx);
      acc[l] += x[i + l];
    }
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  float sum = acc[0];
  for (; i < n; ++i) {
    x[i] = ExpClamped(x[i] - mx);
    sum += x[i];
  }
  return sum;
}

// out[i] += p * v[i]
PARALLM_CLONES void Axpy(float p, const float* __restrict v, float* __restrict out, int n) {
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)  // a fixed inner trip count lets -O2 vectorize it
    for (int l = 0; l < kLanes; ++l) out[i + l] += p * v[i + l];
  for (; i < n; ++i) out[i] += p * v[i];
}

}  // namespace

void PagedAttention(const float* q, const AttentionShape& s, const PagedKvView& kv,
                    std::span<const int32_t> block_table, int64_t n_ctx, int kv_head_begin, int kv_head_end,
                    float* scratch, float* out) {
  const int group = s.n_heads / s.n_kv_heads;
  const int bs = kv.block_size;
  for (int kvh = kv_head_begin; kvh < kv_head_end; ++kvh) {
    for (int g = 0; g < group; ++g) {
      const int h = kvh * group + g;
      const float* qh = q + static_cast<int64_t>(h) * s.head_dim;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n_ctx; ++j) {
        const int64_t slot = static_cast<int64_t>(block_table[static_cast<size_t>(j / bs)]) * bs + j % bs;
        const float* k = kv.keys + slot * kv.slot_stride + static_cast<int64_t>(kvh) * s.head_dim;
        scratch[j] = Dot(qh, k, s.head_dim) * s.scale;
        mx = std::max(mx, scratch[j]);
      }
      const float inv = 1.0f / ExpShiftSum(scratch, n_ctx, mx);
      float* oh = out + static_cast<int64_t>(h) * s.head_dim;
      std::fill_n(oh, s.head_dim, 0.0f);
      for (int64_t j = 0; j < n_ctx; ++j) {
        const int64_t slot = static_cast<int64_t>(block_table[static_cast<size_t>(j / bs)]) * bs + j % bs;
        const float* v = kv.values + slot * kv.slot_stride + static_cast<int64_t>(kvh) * s.head_dim;
        Axpy(scratch[j] * inv, v, oh, s.head_dim);
      }
    }
  }
}

namespace ref {

void PagedAttention(const float* q, const AttentionShape& s, const PagedKvView& kv,
                    std::span<const int32_t> block_table, int64_t n_ctx, int kv_head_begin, int kv_head_end,
                    float* scratch, float* out) {
  const int group = s.n_heads / s.n_kv_heads;
  for (int h = kv_head_begin * group; h < kv_head_end * group; ++h) {
    const int kvh = h / group;
    for (int64_t j = 0; j < n_ctx; ++j) {
      const int64_t slot =
          static_cast<int64_t>(block_table[static_cast<size_t>(j / kv.block_size)]) * kv.block_size + j % kv.block_size;
      const float* k = kv.keys + slot * kv.slot_stride + static_cast<int64_t>(kvh) * s.head_dim;
      double dot = 0;
      for (int d = 0; d < s.head_dim; ++d) dot += static_cast<double>(q[h * s.head_dim + d]) * k[d];
      scratch[j] = static_cast<float>(dot) * s.scale;
    }
    Softmax(scratch, n_ctx);
    for (int d = 0; d < s.head_dim; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < n_ctx; ++j) {
        const int64_t slot =
            static_cast<int64_t>(block_table[static_cast<size_t>(j / kv.block_size)]) * kv.block_size + j % kv.block_size;
        acc += static_cast<double>(scratch[j]) * kv.values[slot * kv.slot_stride + kvh * s.head_dim + d];
      }
      out[h * s.head_dim + d] = static_cast<float>(acc);
    }
  }
}

}  // namespace ref
}  // namespace parallm
