// MatrixView helpers: one row of any MatrixView to f32 through the reference conversions, and row slices.
#include "tensor/matrix.h"

#include "tensor/quant.h"
#include "util/check.h"

namespace parallm {

void DequantizeMatrixRow(const MatrixView& m, int64_t r, float* dst) {
  PARALLM_CHECK(r >= 0 && r < m.rows);
  if (m.kind == MatrixView::Kind::kDense) {
    DequantizeRow(m.dtype, m.Row(r), dst, m.cols);
    return;
  }
  PARALLM_CHECK(IsSupportedMlxAffine(m.mlx) && m.cols % m.mlx.group_size == 0);
  int64_t groups = m.cols / m.mlx.group_size;
  size_t scale_bytes = Info(m.dtype).block_bytes;
  size_t offset = static_cast<size_t>(r * groups) * scale_bytes;
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
    const size_t offset = static_cast<size_t>(first * (m.cols / m.mlx.group_size)) * Info(m.dtype).block_bytes;
    s.scales = m.scales + offset;
    s.biases = m.biases + offset;
  }
  return s;
}

}  // namespace parallm
