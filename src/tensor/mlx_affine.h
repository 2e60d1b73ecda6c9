// MLX affine quantization (mlx.core.quantize, mode "affine"): each group of `group_size` consecutive
// values of a row is `scale * q + bias` with q an unsigned `bits`-bit code. The codes of a row are
// packed as a little-endian bit stream into uint32 words: code i occupies bits [i*bits, (i+1)*bits) of
// the row's stream, bit b of the stream is bit (b % 32) of word (b / 32). A [rows, cols] weight is stored
// as `.weight` U32 [rows, cols * bits / 32], `.scales` and `.biases` [rows, cols / group_size] in the
// model's float type (f16, bf16 or f32).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace parallm {

struct MlxAffineParams {
  int bits = 4;         // 2, 3, 4, 5, 6 or 8
  int group_size = 64;  // 32, 64 or 128
};

bool IsSupportedMlxAffine(const MlxAffineParams& p);

// Unpacks code `i` of a packed row.
inline uint32_t MlxCode(const uint32_t* row, int bits, int64_t i) {
  int64_t bit = i * bits;
  int64_t word = bit >> 5;
  int shift = static_cast<int>(bit & 31);
  uint64_t w = row[word];
  if (shift + bits > 32) w |= static_cast<uint64_t>(row[word + 1]) << 32;
  return static_cast<uint32_t>((w >> shift) & ((1u << bits) - 1));
}

// Dequantizes one row of `cols` values. `scales`/`biases` point at the row's cols/group_size entries
// of `scale_type` (kF32, kF16 or kBF16).
void MlxDequantizeRow(const MlxAffineParams& p, const uint32_t* codes, const void* scales, const void* biases,
                      DType scale_type, float* dst, int64_t cols);

// Quantizes one row as mlx.core.quantize does: per group, scale = (max - min) / (2^bits - 1) and
// bias = min, with the edge of larger magnitude represented exactly; codes round to nearest.
// Writes cols*bits/32 words, and cols/group_size scales and biases of `scale_type`.
void MlxQuantizeRow(const MlxAffineParams& p, const float* src, int64_t cols, DType scale_type, uint32_t* codes,
                    void* scales, void* biases);

}  // namespace parallm
