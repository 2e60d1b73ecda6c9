// KvDtype: element conversions for the KV cache (the kernels' fast paths decode the same bits with vector loads).
#include "kernels/kv_dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tensor/fp16.h"

namespace parallm {
namespace {

constexpr float kF16Max = 65504.0f;  // the largest finite f16

// x as f16, saturated at +-kF16Max; NaN stays NaN (both comparisons are false).
uint16_t SaturatedF16(float x) { return F32ToF16(x > kF16Max ? kF16Max : x < -kF16Max ? -kF16Max : x); }

// SaturatedF16 of n floats. A decode step writes a row per token, layer and KV head: converted one by one, they took
// ~3% of a 64-sequence step on the 3B shape. F16C converts 8 at a time with the same rounding (to nearest even,
// subnormals included), so the bits are the same (a test compares them); NaN's payload may differ, not its NaN-ness.
#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void EncodeF16Row(const float* x, int n, uint16_t* out) {
  const __m256 lo = _mm256_set1_ps(-kF16Max), hi = _mm256_set1_ps(kF16Max);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    // max and min return their second operand when either is NaN: a NaN lane passes through both.
    const __m256 v = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_loadu_ps(x + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = SaturatedF16(x[i]);
}
#endif

void EncodeF16(const float* x, int n, uint16_t* out) {
#if defined(__x86_64__)
  static const bool f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  if (f16c) return EncodeF16Row(x, n, out);
#endif
  for (int i = 0; i < n; ++i) out[i] = SaturatedF16(x[i]);
}

}  // namespace

size_t KvElementBytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return sizeof(float);
    case KvDtype::kBf16:
    case KvDtype::kF16: return sizeof(uint16_t);
    case KvDtype::kInt8: return sizeof(int8_t);
  }
  return sizeof(float);
}

std::string_view KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return "f32";
    case KvDtype::kBf16: return "bf16";
    case KvDtype::kF16: return "f16";
    case KvDtype::kInt8: return "int8";
  }
  return "f32";
}

std::optional<KvDtype> ParseKvDtype(std::string_view name) {
  if (name == "auto" || name == "float32" || name == "f32") return KvDtype::kF32;
  if (name == "bfloat16" || name == "bf16") return KvDtype::kBf16;
  if (name == "float16" || name == "f16" || name == "half") return KvDtype::kF16;
  if (name == "int8") return KvDtype::kInt8;
  return std::nullopt;
}

uint16_t FloatToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet, whatever the low bits held
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

void EncodeKvRow(KvDtype dtype, const float* x, int n, void* dst, float* scale) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvDtype::kBf16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int i = 0; i < n; ++i) out[i] = FloatToBf16(x[i]);
      return;
    }
    case KvDtype::kF16:
      EncodeF16(x, n, static_cast<uint16_t*>(dst));
      return;
    case KvDtype::kInt8: {
      float amax = 0;
      for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float s = amax / 127.0f;
      const float inv = s > 0 ? 1.0f / s : 0.0f;
      auto* out = static_cast<int8_t*>(dst);
      for (int i = 0; i < n; ++i)
        out[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
      *scale = s;
      return;
    }
  }
}

float DecodeKvElement(KvDtype dtype, const void* row, int i, float scale) {
  switch (dtype) {
    case KvDtype::kF32: return static_cast<const float*>(row)[i];
    case KvDtype::kBf16: return Bf16ToFloat(static_cast<const uint16_t*>(row)[i]);
    case KvDtype::kF16: return F16ToF32(static_cast<const uint16_t*>(row)[i]);
    case KvDtype::kInt8: return static_cast<float>(static_cast<const int8_t*>(row)[i]) * scale;
  }
  return 0;
}

}  // namespace parallm
