// The LoRA shrink and expand kernels written once for a vector of W floats (GCC vector extensions) and compiled once
// per instruction set: lora_delta.cpp includes this inside a `#pragma GCC target` region and a namespace of its own,
// with PARALLM_SIMD_LANES defined as W. The order of every floating-point operation depends on W alone.

#include "kernels/simd_vec-inl.h"

// Register tiles: AVX-512 has 32 vector registers, AVX2 and SSE 16.
constexpr int kTokTile = 4;                      // tokens per tile (both kernels)
constexpr int kShrinkRows = W == 16 ? 4 : 2;     // rank rows per shrink tile
constexpr int kExpandVecs = W == 16 ? 4 : 2;     // output vectors per expand tile

// The first `count` (< W) floats at p, zeros after.
PARALLM_INLINE V LoadPartial(const float* p, int64_t count) {
  float tmp[W] = {};
  std::memcpy(tmp, p, static_cast<size_t>(count) * sizeof(float));
  return Load(tmp);
}
PARALLM_INLINE void StorePartial(float* p, V v, int64_t count) {
  float tmp[W];
  Store(tmp, v);
  std::memcpy(p, tmp, static_cast<size_t>(count) * sizeof(float));
}

// Lanes folded in a fixed order: halves, then quarters, ...
PARALLM_INLINE float HSum(V v) {
  float s[W];
  Store(s, v);
#pragma GCC unroll 8
  for (int w = W / 2; w >= 1; w /= 2)
#pragma GCC unroll 8
    for (int i = 0; i < w; ++i) s[i] += s[i + w];
  return s[0];
}

template <int T, int R, bool kPartial>
PARALLM_INLINE void ShrinkStep(const float* const (&xs)[T], const float* const (&as)[R], int64_t c, int64_t rest,
                               V (&acc)[T][R]) {
  V xv[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) xv[t] = kPartial ? LoadPartial(xs[t] + c, rest) : Load(xs[t] + c);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const V av = kPartial ? LoadPartial(as[r] + c, rest) : Load(as[r] + c);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t][r] = MulAdd(xv[t], av, acc[t][r]);
  }
}

// u[k0 + t, j0 + r] for t < T, r < R: lane l of acc[t][r] sums columns l, l + W, ... (the tail zero-padded).
template <int T, int R>
void ShrinkTile(const LoraShrinkArgs& s, int64_t k0, int64_t j0) {
  const float* xs[T];
  const float* as[R];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) xs[t] = s.x + static_cast<int64_t>(s.rows[k0 + t]) * s.x_stride;
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) as[r] = s.a + (j0 + r) * s.in_dim;
  V acc[T][R];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[t][r] = V{};
  const int64_t full = s.in_dim / W * W;
  for (int64_t c = 0; c < full; c += W) ShrinkStep<T, R, false>(xs, as, c, 0, acc);
  if (full < s.in_dim) ShrinkStep<T, R, true>(xs, as, full, s.in_dim - full, acc);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) s.u[(k0 + t) * s.u_stride + j0 + r] = HSum(acc[t][r]);
}

void Shrink(const LoraShrinkArgs& s, int64_t j0, int64_t j1) {
  using Fn = void (*)(const LoraShrinkArgs&, int64_t, int64_t);
  static constexpr auto kTable = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<Fn, kTokTile * kShrinkRows>{&ShrinkTile<I / kShrinkRows + 1, I % kShrinkRows + 1>...};
  }(std::make_integer_sequence<int, kTokTile * kShrinkRows>{});
  for (int64_t k0 = 0; k0 < s.n; k0 += kTokTile) {
    const int64_t nt = std::min<int64_t>(kTokTile, s.n - k0);
    for (int64_t j = j0; j < j1; j += kShrinkRows) {
      const int64_t nr = std::min<int64_t>(kShrinkRows, j1 - j);
      kTable[static_cast<size_t>((nt - 1) * kShrinkRows + nr - 1)](s, k0, j);
    }
  }
}

// y[rows[k0 + t], o + c W + lane] for t < T, c < C (the last vector `last` lanes wide, 0 < last <= W).
template <int T, int C>
void ExpandTile(const LoraExpandArgs& e, int64_t k0, int64_t o, int64_t last) {
  V acc[T][C];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[t][c] = V{};
  for (int64_t j = 0; j < e.rank; ++j) {
    const float* b = e.bt + j * e.out_dim + o;
    V bv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) bv[c] = c + 1 < C || last == W ? Load(b + c * W) : LoadPartial(b + c * W, last);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const V uv = Splat(e.u[(k0 + t) * e.u_stride + j]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[t][c] = MulAdd(uv, bv[c], acc[t][c]);
    }
  }
  const V sv = Splat(e.scale);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    float* y = e.y + static_cast<int64_t>(e.rows[k0 + t]) * e.y_stride + o;
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      if (c + 1 < C || last == W) {
        Store(y + c * W, MulAdd(sv, acc[t][c], Load(y + c * W)));
      } else {
        StorePartial(y + c * W, MulAdd(sv, acc[t][c], LoadPartial(y + c * W, last)), last);
      }
    }
  }
}

template <int T>
void ExpandTokens(const LoraExpandArgs& e, int64_t k0, int64_t o0, int64_t o1) {
  int64_t o = o0;
  for (; o + kExpandVecs * W <= o1; o += kExpandVecs * W) ExpandTile<T, kExpandVecs>(e, k0, o, W);
  for (; o + W <= o1; o += W) ExpandTile<T, 1>(e, k0, o, W);
  if (o < o1) ExpandTile<T, 1>(e, k0, o, o1 - o);
}

void Expand(const LoraExpandArgs& e, int64_t o0, int64_t o1) {
  int64_t k0 = 0;
  for (; k0 + kTokTile <= e.n; k0 += kTokTile) ExpandTokens<kTokTile>(e, k0, o0, o1);
  for (; k0 < e.n; ++k0) ExpandTokens<1>(e, k0, o0, o1);
}

#undef PARALLM_INLINE
