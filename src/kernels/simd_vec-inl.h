// The float vector the per-instruction-set kernels are written in (GCC vector extensions): W lanes, with the loads,
// stores, broadcast and multiply-add every such kernel needs. A kernel's -inl.h includes this inside the
// `#pragma GCC target` region and namespace its .cpp opened, with PARALLM_SIMD_LANES defined as W (16: AVX-512,
// 8: AVX2 + FMA, 4: baseline SSE2 or any other target).

#ifndef PARALLM_SIMD_LANES
#error "define PARALLM_SIMD_LANES to 16, 8 or 4 before including a kernel's -inl.h"
#endif

constexpr int W = PARALLM_SIMD_LANES;
typedef float V __attribute__((vector_size(W * sizeof(float))));

#define PARALLM_INLINE inline __attribute__((always_inline))

PARALLM_INLINE V Load(const float* p) {  // unaligned
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

PARALLM_INLINE void Store(float* p, V v) { std::memcpy(p, &v, sizeof v); }

// The intrinsics let a splat of a loaded float become a broadcast memory operand; a lane-by-lane loop gets
// vectorized into one load and a shuffle per lane instead.
PARALLM_INLINE V Splat(float x) {
#if PARALLM_SIMD_LANES == 16
  return _mm512_set1_ps(x);
#elif PARALLM_SIMD_LANES == 8
  return _mm256_set1_ps(x);
#elif defined(__x86_64__)
  return _mm_set1_ps(x);
#else
  V v;
  for (int i = 0; i < W; ++i) v[i] = x;
  return v;
#endif
}

// a * b + c, fused (one rounding) where the instruction set has FMA: the kernels' files are built with
// -ffp-contract=off, so this is the only place products and sums fuse.
PARALLM_INLINE V MulAdd(V a, V b, V c) {
#if PARALLM_SIMD_LANES == 16
  return _mm512_fmadd_ps(a, b, c);
#elif PARALLM_SIMD_LANES == 8
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}
