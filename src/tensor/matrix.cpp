// MatrixView helpers: one row of any MatrixView to f32 through the reference conversions, and row slices.
#include "tensor/matrix.h"

#include "tensor/quant.h"
#include "util/check.h"

namespace parallm {

size_t MlxParamBytes(const MatrixView& m, int64_t rows) {
  return static_cast<size_t>(rows * (m.cols / m.mlx.group_size)) * Info(m.dtype).block_bytes;
}

void DequantizeMatrixRow(const MatrixView& m, int64_t r, float* dst) {
  PARALLM_CHECK(r >= 0 && r < m.rows);
  if (m.kind == MatrixView::Kind::kDense) {
    DequantizeRow(m.dtype, m.Row(r), dst, m.cols);
    return;
  }
  PARALLM_CHECK(IsSupportedMlxAffine(m.mlx) && m.cols % m.mlx.group_size == 0);
  const size_t offset = MlxParamBytes(m, r);
  MlxDequantizeRow(m.mlx, reinterpret_cast<const uint32_t*>(m.Row(r)), m.scales + offset, m.biases + offset,
                   m.dtype, dst, m.cols);
}

MatrixView SliceRows(const MatrixView& m, int64_t first, int64_t n) {
  PARALLM_CHECK(first >= 0 && n > 0 && first + n <= m.rows);
  MatrixView s = m;
  s.rows = n;
  s.data = m.Row(first);
  s.packed = nullptr;
  s.packed_isa = -1;
  if (m.kind == MatrixView::Kind::kMlxAffine) {
    const size_t offset = MlxParamBytes(m, first);
    s.scales = m.scales + offset;
    s.biases = m.biases + offset;
  }
  return s;
}

}  // namespace parallm
