// A vectorizable exp for kernels: 2^n * P(r), r = x - n ln2 split in two parts, a degree-6 polynomial (Cephes
// expf coefficients); within ~2 ulp of std::exp on [-87, 88]. Plain arithmetic in a fixed order, so every
// instruction-set clone of a loop calling it gives the same bits. Loops calling it vectorize when their file is
// built with -fno-trapping-math (the clamps are then selects, not branches); results do not depend on that flag.
#pragma once

#include <cstdint>

namespace parallm {

// Inputs are clamped to [-87, 88] (below: ~1.6e-38 instead of an underflow to 0; above: ~1.65e38 instead of
// infinity), which the callers (softmax after subtracting the max, SiLU's 1 + exp(-g)) do not notice.
inline float ExpClamped(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, 4);
  return p * scale;
}

// A shorter exp for values rounded to bf16 right after (the prompt formulas' softmax, kernels/prompt_attention.h):
// 2^n * P(r) with n = x log2(e) rounded to nearest even, r = x - n ln2 in two fused steps, and P Taylor's degree 4 by
// fused steps; within ~5e-5 relative of exp on the clamped range [-87, 88], far inside bf16's 2^-9. Its SIMD twins
// use FMA and VSCALEFPS (2^n times P, exact down into the denormals, which the bf16 rounding then flushes).
inline float ExpForBf16(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float n = __builtin_nearbyintf(x * 1.44269504088896341f);
  float r = __builtin_fmaf(n, -0.693359375f, x);
  r = __builtin_fmaf(n, 2.12194440e-4f, r);
  float p = 1.0f / 24;
  p = __builtin_fmaf(p, r, 1.0f / 6);
  p = __builtin_fmaf(p, r, 0.5f);
  p = __builtin_fmaf(p, r, 1.0f);
  p = __builtin_fmaf(p, r, 1.0f);
  return __builtin_ldexpf(p, static_cast<int>(n));
}

}  // namespace parallm
