// Reference conversions between f32 and the float / GGML block formats, following ggml-quants.c's
// reference (non-SIMD) functions: the same block layouts and the same decode formulas, so a block written
// here decodes to the same values in llama.cpp and vice versa.
#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "util/check.h"

namespace parallm {
namespace {

// ggml's nearest_int: round half away from zero (as roundf), for |x| well inside int range.
inline int NearestInt(float x) { return static_cast<int>(std::lround(x)); }

// ---- Q8_0: value = qs[i] * d -------------------------------------------------------------------------
void DequantizeQ8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// ggml quantize_row_q8_0_ref: d = amax / 127, q = round(x / d).
void QuantizeQ8_0(const float* x, BlockQ8_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK8_0;
    float amax = 0;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(xb[j]));
    float d = amax / 127.0f;
    float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = F32ToF16(d);
    for (int j = 0; j < kQK8_0; ++j) b[i].qs[j] = static_cast<int8_t>(NearestInt(xb[j] * id));
  }
}

// ---- Q4_0: value j = ((qs[j] & 15) - 8) * d, value j + 16 = ((qs[j] >> 4) - 8) * d ----------------------
void DequantizeQ4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = F16ToF32(b[i].d);
    float* yb = y + i * kQK4_0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      yb[j] = static_cast<float>((b[i].qs[j] & 15) - 8) * d;
      yb[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

// ggml quantize_row_q4_0_ref: the value of largest magnitude (with its sign) maps to code 0 (= -8),
// d = max / -8; codes are min(15, trunc(x / d + 8.5)).
void QuantizeQ4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK4_0;
    float amax = 0, max = 0;
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    float d = max / -8.0f;
    float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = F32ToF16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      int q0 = std::min(15, static_cast<int>(xb[j] * id + 8.5f));
      int q1 = std::min(15, static_cast<int>(xb[j + 16] * id + 8.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// ---- Q4_K -----------------------------------------------------------------------------------------------
// ggml get_scale_min_k4: sub-blocks 0-3 keep their 6-bit scale/min in the low 6 bits of bytes j / j+4;
// sub-blocks 4-7 keep the low 4 bits in byte j+4 (scale low nibble, min high nibble) and the top 2 bits
// in the top 2 bits of bytes j-4 (scale) and j (min).
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void DequantizeQ4_K(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = F16ToF32(b[i].d), dmin = F16ToF32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0; j < kQK_K / 64; ++j) {  // 64 values per step: low nibbles then high nibbles
      uint8_t sc, m;
      ScaleMinK4(2 * j, b[i].scales, &sc, &m);
      float d1 = d * sc, m1 = dmin * m;
      ScaleMinK4(2 * j + 1, b[i].scales, &sc, &m);
      float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
      q += 32;
    }
  }
}

// Simpler than ggml's quantize_row_q4_K (no iterative search): each sub-block of 32 covers
// [min(0, lo), hi] with 15 steps; the 8 sub-block steps and mins are quantized to 6 bits against the
// super-block d / dmin (steps rounded up so the range is still covered), then codes round to nearest
// against the decoded sub-block scale and min, exactly as a decoder will see them.
void QuantizeQ4_K(const float* x, BlockQ4_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK_K;
    float step[8], mins[8];  // mins are stored positive: value = d * sc * q - dmin * m
    float max_step = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float lo = 0, hi = xb[j * 32];
      for (int l = 0; l < 32; ++l) {
        lo = std::min(lo, xb[j * 32 + l]);
        hi = std::max(hi, xb[j * 32 + l]);
      }
      step[j] = (hi - lo) / 15.0f;
      mins[j] = -lo;
      max_step = std::max(max_step, step[j]);
      max_min = std::max(max_min, mins[j]);
    }
    uint16_t dh = F32ToF16(max_step / 63.0f), dminh = F32ToF16(max_min / 63.0f);
    float d = F16ToF32(dh), dmin = F16ToF32(dminh);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
      ls[j] = static_cast<uint8_t>(d > 0 ? std::clamp(static_cast<int>(std::ceil(step[j] / d)), 0, 63) : 0);
      lm[j] = static_cast<uint8_t>(dmin > 0 ? std::clamp(NearestInt(mins[j] / dmin), 0, 63) : 0);
    }
    BlockQ4_K& out = b[i];
    out.d = dh;
    out.dmin = dminh;
    std::memset(out.scales, 0, sizeof(out.scales));
    for (int j = 0; j < 8; ++j) {
      if (j < 4) {
        out.scales[j] = ls[j];
        out.scales[j + 4] = lm[j];
      } else {
        out.scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
        out.scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
        out.scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
      }
    }
    uint8_t codes[kQK_K];
    for (int j = 0; j < 8; ++j) {
      float d1 = d * ls[j], m1 = dmin * lm[j];
      for (int l = 0; l < 32; ++l) {
        int q = d1 > 0 ? NearestInt((xb[j * 32 + l] + m1) / d1) : 0;
        codes[j * 32 + l] = static_cast<uint8_t>(std::clamp(q, 0, 15));
      }
    }
    for (int j = 0; j < kQK_K / 64; ++j)
      for (int l = 0; l < 32; ++l)
        out.qs[j * 32 + l] = static_cast<uint8_t>(codes[j * 64 + l] | (codes[j * 64 + 32 + l] << 4));
  }
}

// ---- Q6_K -----------------------------------------------------------------------------------------------
// Per 128 values: code l (0..31) = ql[l] low nibble + qh[l] bits 0-1, l+32 = ql[l+32] low + qh bits 2-3,
// l+64 = ql[l] high + qh bits 4-5, l+96 = ql[l+32] high + qh bits 6-7; value = d * scales[v / 16] * (code - 32).
inline int Q6Code(const BlockQ6_K& b, int v) {
  int half = v / 128, w = v % 128, quarter = w / 32, l = w % 32;
  const uint8_t* ql = b.ql + half * 64;
  const uint8_t* qh = b.qh + half * 32;
  int low = (quarter & 1) ? ql[l + 32] : ql[l];
  low = (quarter & 2) ? (low >> 4) : (low & 0xF);
  int high = (qh[l] >> (2 * quarter)) & 3;
  return low | (high << 4);
}

void DequantizeQ6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = F16ToF32(b[i].d);
    for (int v = 0; v < kQK_K; ++v)
      y[i * kQK_K + v] = d * static_cast<float>(b[i].scales[v / 16]) * static_cast<float>(Q6Code(b[i], v) - 32);
  }
}

// Simpler than ggml's quantize_row_q6_K: each sub-block of 16 maps its value of largest magnitude to
// code -32 (scale = that value / -32); the 16 scales are quantized to int8 against d = max|scale| / 127,
// then codes round to nearest against the decoded d * scale.
void QuantizeQ6_K(const float* x, BlockQ6_K* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK_K;
    float scale[16];
    float max_abs_scale = 0;
    for (int j = 0; j < 16; ++j) {
      float amax = 0, max = 0;
      for (int l = 0; l < 16; ++l) {
        if (std::fabs(xb[j * 16 + l]) > amax) {
          amax = std::fabs(xb[j * 16 + l]);
          max = xb[j * 16 + l];
        }
      }
      scale[j] = max / -32.0f;
      max_abs_scale = std::max(max_abs_scale, std::fabs(scale[j]));
    }
    BlockQ6_K& out = b[i];
    out.d = F32ToF16(max_abs_scale / 127.0f);
    float d = F16ToF32(out.d);
    uint8_t codes[kQK_K];
    for (int j = 0; j < 16; ++j) {
      int sc = d > 0 ? std::clamp(NearestInt(scale[j] / d), -127, 127) : 0;
      out.scales[j] = static_cast<int8_t>(sc);
      float ds = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) {
        int q = ds != 0 ? NearestInt(xb[j * 16 + l] / ds) : 0;
        codes[j * 16 + l] = static_cast<uint8_t>(std::clamp(q, -32, 31) + 32);
      }
    }
    for (int half = 0; half < 2; ++half) {
      const uint8_t* c = codes + half * 128;
      uint8_t* ql = out.ql + half * 64;
      uint8_t* qh = out.qh + half * 32;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((c[l] & 0xF) | ((c[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((c[l + 32] & 0xF) | ((c[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((c[l] >> 4) | ((c[l + 32] >> 4) << 2) | ((c[l + 64] >> 4) << 4) |
                                     ((c[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  const DTypeInfo& info = Info(type);
  PARALLM_CHECK(n % info.block_elements == 0);
  int64_t nb = n / info.block_elements;
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(s[i]);
      return;
    }
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToF32(s[i]);
      return;
    }
    case DType::kQ8_0:
      return DequantizeQ8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::kQ4_0:
      return DequantizeQ4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::kQ4_K:
      return DequantizeQ4_K(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::kQ6_K:
      return DequantizeQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
    default:
      PARALLM_CHECK_MSG(false, "DequantizeRow: not a float or GGML block type");
  }
}

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  const DTypeInfo& info = Info(type);
  PARALLM_CHECK(n % info.block_elements == 0);
  int64_t nb = n / info.block_elements;
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToF16(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = F32ToBF16(src[i]);
      return;
    }
    case DType::kQ8_0:
      return QuantizeQ8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case DType::kQ4_0:
      return QuantizeQ4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case DType::kQ4_K:
      return QuantizeQ4_K(src, static_cast<BlockQ4_K*>(dst), nb);
    case DType::kQ6_K:
      return QuantizeQ6_K(src, static_cast<BlockQ6_K*>(dst), nb);
    default:
      PARALLM_CHECK_MSG(false, "QuantizeRow: type not writable");
  }
}

bool IsWritableType(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace parallm
