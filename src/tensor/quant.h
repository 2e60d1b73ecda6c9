// GGML block-quantized formats (Q8_0, Q4_0, Q4_K, Q6_K): block layouts exactly as ggml stores them,
// and the reference conversions to and from f32. The fast kernels in kernels/ consume these blocks
// directly; these scalar functions are the definition they are tested against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace parallm {

inline constexpr int kQK8_0 = 32;
inline constexpr int kQK4_0 = 32;
inline constexpr int kQK_K = 256;

#pragma pack(push, 1)
struct BlockQ8_0 {
  uint16_t d;          // f16 scale
  int8_t qs[kQK8_0];   // value i = qs[i] * d
};
struct BlockQ4_0 {
  uint16_t d;               // f16 scale
  uint8_t qs[kQK4_0 / 2];   // value j = ((qs[j] & 15) - 8) * d, value j+16 = ((qs[j] >> 4) - 8) * d
};
struct BlockQ4_K {
  uint16_t d;              // f16 super-block scale for the 6-bit sub-block scales
  uint16_t dmin;           // f16 super-block scale for the 6-bit sub-block mins
  uint8_t scales[12];      // 8 sub-blocks of 32: 6-bit scale and 6-bit min each, packed (ggml get_scale_min_k4)
  uint8_t qs[kQK_K / 2];   // 4-bit codes; per 64 values: low nibbles are the first 32, high nibbles the next 32
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];   // low 4 bits of the 6-bit codes
  uint8_t qh[kQK_K / 4];   // high 2 bits
  int8_t scales[kQK_K / 16];  // 16 sub-blocks of 16, int8 scales
  uint16_t d;              // f16 super-block scale
};
#pragma pack(pop)
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);

// Converts `n` elements of any float or GGML block type to f32 (n a multiple of the block size).
// Reference implementation: simple, exact, used by tests and by loaders that need f32 (norm weights).
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);

// Quantizes `n` f32 values into `dst` (RowBytes(type, n) bytes). Supported: F32, F16, BF16, Q8_0, Q4_0,
// Q4_K, Q6_K. Round-to-nearest as ggml's reference quantizers do, so other engines read the same values.
void QuantizeRow(DType type, const float* src, void* dst, int64_t n);

// True when QuantizeRow supports `type`.
bool IsWritableType(DType type);

}  // namespace parallm
