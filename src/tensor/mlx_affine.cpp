// MLX affine quantization: reference unpacking and packing of rows, matching mlx.core.quantize.
//
// Packing, checked against MLX's sources (backend/cuda/quantized/affine_quantize.cu and the Metal/CPU
// dequantizers): for 2, 4 and 8 bits, 32/bits codes fill each uint32, code i in bits [i*bits, (i+1)*bits)
// of the word; for 3 and 5 bits MLX packs 8 codes into 3 or 5 bytes, for 6 bits 4 codes into 3 bytes,
// little-endian within the group (code 0 in the low bits of byte 0) and groups back to back. Both are the
// same thing as one little-endian bit stream over the row's bytes, read as little-endian uint32 words,
// which is what MlxCode in the header decodes; no change to the header was needed.
//
// Quantize rule (same files, and mlx/ops.cpp): per group, scale = max((max - min) / (2^bits - 1), 1e-7);
// the edge of larger magnitude (min if |min| > |max|, else max, with the scale negated) is made exact:
// q0 = round(edge / scale), and when q0 != 0, scale = edge / q0 and bias = edge (else bias = 0).
// Codes are round((w - bias) / scale) clipped to [0, 2^bits - 1], computed with the f32 scale and bias
// before they are stored in the scale type. MLX's round is ties-to-even (as numpy); so is this.
#include "tensor/mlx_affine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "util/check.h"

namespace parallm {
namespace {

float LoadScale(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(p)[i];
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(p)[i]);
    case DType::kBF16:
      return BF16ToF32(static_cast<const uint16_t*>(p)[i]);
    default:
      PARALLM_CHECK_MSG(false, "MLX scales must be f32, f16 or bf16");
  }
  return 0;
}

void StoreScale(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32:
      static_cast<float*>(p)[i] = v;
      return;
    case DType::kF16:
      static_cast<uint16_t*>(p)[i] = F32ToF16(v);
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(p)[i] = F32ToBF16(v);
      return;
    default:
      PARALLM_CHECK_MSG(false, "MLX scales must be f32, f16 or bf16");
  }
}

}  // namespace

bool IsSupportedMlxAffine(const MlxAffineParams& p) {
  bool bits_ok = p.bits == 2 || p.bits == 3 || p.bits == 4 || p.bits == 5 || p.bits == 6 || p.bits == 8;
  bool group_ok = p.group_size == 32 || p.group_size == 64 || p.group_size == 128;
  return bits_ok && group_ok;
}

void MlxDequantizeRow(const MlxAffineParams& p, const uint32_t* codes, const void* scales, const void* biases,
                      DType scale_type, float* dst, int64_t cols) {
  PARALLM_CHECK(IsSupportedMlxAffine(p));
  PARALLM_CHECK(cols % p.group_size == 0);
  for (int64_t g = 0; g < cols / p.group_size; ++g) {
    float s = LoadScale(scales, scale_type, g), b = LoadScale(biases, scale_type, g);
    for (int64_t i = g * p.group_size; i < (g + 1) * p.group_size; ++i)
      dst[i] = s * static_cast<float>(MlxCode(codes, p.bits, i)) + b;
  }
}

void MlxQuantizeRow(const MlxAffineParams& p, const float* src, int64_t cols, DType scale_type, uint32_t* codes,
                    void* scales, void* biases) {
  PARALLM_CHECK(IsSupportedMlxAffine(p));
  PARALLM_CHECK(cols % p.group_size == 0);
  const float n_bins = static_cast<float>((1 << p.bits) - 1);
  std::memset(codes, 0, static_cast<size_t>(cols * p.bits / 32) * 4);
  for (int64_t g = 0; g < cols / p.group_size; ++g) {
    const float* w = src + g * p.group_size;
    float lo = w[0], hi = w[0];
    for (int i = 1; i < p.group_size; ++i) {
      lo = std::min(lo, w[i]);
      hi = std::max(hi, w[i]);
    }
    float scale = std::max((hi - lo) / n_bins, 1e-7f);
    bool side = std::fabs(lo) > std::fabs(hi);
    scale = side ? scale : -scale;
    float edge = side ? lo : hi;
    float q0 = std::nearbyint(edge / scale);
    bool at_zero = q0 == 0.0f;
    scale = at_zero ? scale : edge / q0;
    float bias = at_zero ? 0.0f : edge;
    StoreScale(scales, scale_type, g, scale);
    StoreScale(biases, scale_type, g, bias);
    for (int i = 0; i < p.group_size; ++i) {
      float q = std::clamp(std::nearbyint((w[i] - bias) / scale), 0.0f, n_bins);
      uint64_t code = static_cast<uint64_t>(q);
      int64_t bit = (g * p.group_size + i) * p.bits;
      int64_t word = bit >> 5;
      int shift = static_cast<int>(bit & 31);
      codes[word] |= static_cast<uint32_t>(code << shift);
      if (shift + p.bits > 32) codes[word + 1] |= static_cast<uint32_t>(code >> (32 - shift));
    }
  }
}

}  // namespace parallm
