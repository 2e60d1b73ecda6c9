// MatrixView: a weight matrix as the kernels consume it, in its stored (possibly quantized) form.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/mlx_affine.h"

namespace parallm {

// Y = X W^T: `rows` outputs, `cols` inputs. Row r's stored bytes start at data + r * row_bytes.
struct MatrixView {
  enum class Kind : uint8_t {
    kDense,      // dtype is F32, F16, BF16 or a GGML block type (Q8_0, Q4_0, Q4_K, Q6_K)
    kMlxAffine,  // packed U32 codes in data; scales/biases beside
  };
  Kind kind = Kind::kDense;
  DType dtype = DType::kF32;  // kDense: element/block type. kMlxAffine: type of scales and biases.
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;

  // kMlxAffine only: row r's scales/biases start at scales + r * (cols / group_size) elements.
  MlxAffineParams mlx;
  const uint8_t* scales = nullptr;
  const uint8_t* biases = nullptr;

  // Optional copy of the weights repacked at load into one kernel path's layout (kernels/matmul.h
  // RepackForKernels); the path tagged `packed_isa` (an IsaPath value) reads it instead of data, every other
  // path ignores it. Owned elsewhere (ModelWeights::packed).
  const uint8_t* packed = nullptr;
  int8_t packed_isa = -1;

  const uint8_t* Row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

// Rows [first, first + n) of `m` as a matrix of their own, over the same storage (MLX scales and biases follow);
// for fused projections (Phi-3's qkv_proj). Not for repacked views (`packed` is dropped).
MatrixView SliceRows(const MatrixView& m, int64_t first, int64_t n);

// kMlxAffine: the bytes of the scales of `rows` rows (the biases take as many): the offset of row `rows`'s scales,
// and the size of a matrix's.
size_t MlxParamBytes(const MatrixView& m, int64_t rows);

// Dequantizes row r of any MatrixView to f32 (reference path, used by tests, embedding lookup and loaders).
void DequantizeMatrixRow(const MatrixView& m, int64_t r, float* dst);

}  // namespace parallm
