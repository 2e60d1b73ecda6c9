// KvDtype: element conversions for the KV cache (the kernels' fast paths decode the same bits with vector loads).
#include "kernels/kv_dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu_features.h"
#include "tensor/fp16.h"

namespace parallm {
namespace {

constexpr float kF16Max = 65504.0f;  // the largest finite f16

// x as f16, saturated at +-kF16Max; NaN stays NaN (both comparisons are false).
uint16_t SaturatedF16(float x) { return F32ToF16(x > kF16Max ? kF16Max : x < -kF16Max ? -kF16Max : x); }

void EncodeF16(const float* x, int n, uint16_t* out) {
  for (int i = 0; i < n; ++i) out[i] = SaturatedF16(x[i]);
}

void EncodeBf16(const float* x, int n, uint16_t* out) {
  for (int i = 0; i < n; ++i) out[i] = FloatToBf16(x[i]);
}

// The largest of amax and the n magnitudes |x[i]| (a NaN is ignored, as std::max ignores it).
float MaxMagnitude(const float* x, int n, float amax) {
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}
// An int8 row's scale from its largest magnitude, and the factor its codes are x times.
float Int8Scale(float amax) { return amax / 127.0f; }
float InverseScale(float s) { return s > 0 ? 1.0f / s : 0.0f; }
// Codes x * inv rounded to nearest even and clamped to +-127 (a NaN's code is unspecified).
void Int8Codes(const float* x, int n, float inv, int8_t* out) {
  for (int i = 0; i < n; ++i) out[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -127.0f, 127.0f));
}

// int8 codes of n floats with the row's scale amax / 127; returns the scale.
float EncodeInt8(const float* x, int n, int8_t* out) {
  const float s = Int8Scale(MaxMagnitude(x, n, 0.0f));
  Int8Codes(x, n, InverseScale(s), out);
  return s;
}

// A decode step writes a row per token, layer and KV head: converted one value at a time, f16 rows took ~3% of a
// 64-sequence step on the 3B shape. With AVX2 and F16C the rows are converted 8 values at a time by the same operations
// (f16: the same rounding to nearest even, subnormals included; bf16: the same integer rounding and NaN; int8: the
// same max, multiply and rounding), so the bits are those of the scalar versions above (a test compares them); an f16
// NaN's payload may differ, not its NaN-ness.
#if defined(__x86_64__)
#define PARALLM_ROW_TARGET __attribute__((target("avx2,f16c")))

PARALLM_ROW_TARGET void EncodeF16Row(const float* x, int n, uint16_t* out) {
  const __m256 lo = _mm256_set1_ps(-kF16Max), hi = _mm256_set1_ps(kF16Max);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    // max and min return their second operand when either is NaN: a NaN lane passes through both.
    const __m256 v = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_loadu_ps(x + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  EncodeF16(x + i, n - i, out + i);
}

PARALLM_ROW_TARGET void EncodeBf16Row(const float* x, int n, uint16_t* out) {
  const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7FFF), quiet = _mm256_set1_epi32(0x40);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i top = _mm256_srli_epi32(u, 16);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(half, _mm256_and_si256(top, one))), 16);
    const __m256 f = _mm256_castsi256_ps(u);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    const __m256i h = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, quiet), nan);
    // 8 values of at most 0xFFFF: packed to 16 bits in each 128-bit half, the halves' low quarters brought together.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  EncodeBf16(x + i, n - i, out + i);
}

PARALLM_ROW_TARGET float EncodeInt8Row(const float* x, int n, int8_t* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);  // NaN: keeps m
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  const int whole = i;
  const float s = Int8Scale(MaxMagnitude(x + whole, n - whole, MaxMagnitude(lanes, 8, 0.0f)));
  const float inv = InverseScale(s);
  const __m256 vinv = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (i = 0; i < whole; i += 8) {
    const __m256 q = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i v = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(q, lo), hi));  // whole numbers: exact
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packs_epi16(w, w));
  }
  Int8Codes(x + whole, n - whole, inv, out + whole);
  return s;
}
#undef PARALLM_ROW_TARGET
#endif

// The row converters this CPU runs, chosen at first use (the vector ones where MatMul's AVX2 path runs: AVX2 and F16C
// are what they use).
struct RowEncoders {
  void (*f16)(const float* x, int n, uint16_t* out);
  void (*bf16)(const float* x, int n, uint16_t* out);
  float (*int8)(const float* x, int n, int8_t* out);  // returns the row's scale
};

const RowEncoders& Encoders() {
  static const RowEncoders encoders = [] {
#if defined(__x86_64__)
    if (IsIsaSupported(IsaPath::kAvx2)) return RowEncoders{&EncodeF16Row, &EncodeBf16Row, &EncodeInt8Row};
#endif
    return RowEncoders{&EncodeF16, &EncodeBf16, &EncodeInt8};
  }();
  return encoders;
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
  if (name == "float32" || name == "f32") return KvDtype::kF32;
  if (name == "bfloat16" || name == "bf16") return KvDtype::kBf16;
  if (name == "float16" || name == "f16" || name == "half") return KvDtype::kF16;
  if (name == "int8") return KvDtype::kInt8;
  return std::nullopt;
}

bool ParseKvCacheDtype(std::string_view name, std::optional<KvDtype>* dtype) {
  if (name == "auto") {
    *dtype = std::nullopt;
    return true;
  }
  const std::optional<KvDtype> parsed = ParseKvDtype(name);
  if (parsed) *dtype = parsed;
  return parsed.has_value();
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
    case KvDtype::kBf16:
      Encoders().bf16(x, n, static_cast<uint16_t*>(dst));
      return;
    case KvDtype::kF16:
      Encoders().f16(x, n, static_cast<uint16_t*>(dst));
      return;
    case KvDtype::kInt8:
      *scale = Encoders().int8(x, n, static_cast<int8_t*>(dst));
      return;
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
