// Random weight rows written straight in a storage type (GGML blocks, f16, ...), without an f32 copy or a quantizer's
// search: what `make-model --fast` streams to disk to write a 30B-parameter model in about a minute.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace parallm {

// Fills rows [row_begin, row_end) of a [rows, cols] matrix of `type` (out points at row row_begin, RowBytes(type,
// cols) bytes a row) with values spread about uniformly over [-half_width, half_width] (Q4_K/Q4_0/Q8_0: random codes
// under one fixed scale per block; float types: uniform values; other types: uniform values through QuantizeRow).
// Row r's bytes depend only on (seed, r), so any split of the rows over threads writes the same tensor.
void RandomRows(DType type, int64_t cols, float half_width, uint64_t seed, int64_t row_begin, int64_t row_end,
                uint8_t* out);

}  // namespace parallm
