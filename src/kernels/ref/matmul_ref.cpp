// ref::MatMul: the scalar twin of MatMul. Float weights: a plain f32 dot per output in column order.
// Quantized weights: the int8 formula of kernels/matmul_internal.h written out one output at a time,
// which the SIMD paths reproduce bit for bit. ref::MatMulBf16: the bf16 formula, likewise.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "util/check.h"

namespace parallm::ref {
namespace {

void FloatRows(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride, int64_t r0,
               int64_t r1) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = r0; r < r1; ++r) {
    DequantizeMatrixRow(w, r, row.data());
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * w.cols;
      float acc = 0;
      for (int64_t c = 0; c < w.cols; ++c) acc += row[c] * xt[c];
      y[t * y_stride + r] = acc;
    }
  }
}

void QuantRows(const MatrixView& w, mm::QFormat fmt, const mm::QuantizedActs& a, float* y, int64_t y_stride,
               int64_t r0, int64_t r1) {
  const int64_t nb = a.nb;
  std::vector<int16_t> codes(static_cast<size_t>(w.cols));
  std::vector<float> scale0(nb), scale1(nb), bias(nb);
  const bool q6 = fmt == mm::QFormat::kQ6_K, has_bias = mm::HasBias(fmt);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t b = 0; b < nb; ++b) mm::BlockCodes(w, fmt, r, b, codes.data() + b * 32);
    mm::BlockParamsRow(w, fmt, r, 0, nb, scale0.data(), scale1.data(), bias.data(), 1);
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const int8_t* qt = a.q + t * a.cols;
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const int16_t* c = codes.data() + b * 32;
        const int8_t* q = qt + b * 32;
        const float dx = a.d[t * nb + b];
        if (q6) {
          for (int half = 0; half < 2; ++half) {
            int32_t dot = 0;
            for (int i = half * 16; i < half * 16 + 16; ++i) dot += c[i] * q[i];
            float s = (half ? scale1[b] : scale0[b]) * dx;
            acc = std::fma(static_cast<float>(dot), s, acc);
          }
        } else {
          int32_t dot = 0;
          for (int i = 0; i < 32; ++i) dot += c[i] * q[i];
          float s = scale0[b] * dx;
          acc = std::fma(static_cast<float>(dot), s, acc);
          if (has_bias) acc = std::fma(bias[b], a.ds[t * nb + b], acc);
        }
      }
      y[t * y_stride + r] = acc;
    }
  }
}

}  // namespace

void MatMulBf16(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride) {
  mm::QFormat fmt;
  PARALLM_CHECK(mm::QuantFormatOf(w, &fmt) && mm::Bf16FormulaCovers(fmt) && y_stride >= w.rows);
  const int64_t nb = w.cols / 32;
  std::vector<float> xb(static_cast<size_t>(n_tokens * w.cols)), wb(static_cast<size_t>(w.cols));
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = mm::FromBf16(mm::ToBf16(x[i]));
  std::vector<int16_t> codes(static_cast<size_t>(w.cols));
  std::vector<float> scale0(nb), scale1(nb), bias(nb);
  const bool scale1_too = mm::SubBlocks(fmt) == 2;
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) mm::BlockCodes(w, fmt, r, b, codes.data() + b * 32);
    mm::BlockParamsRow(w, fmt, r, 0, nb, scale0.data(), scale1.data(), bias.data(), 1);
    for (int64_t c = 0; c < w.cols; ++c) {
      // Q6_K: the second 16-column half of a block has its own scale.
      const float code = codes[static_cast<size_t>(c)];
      const float s = c % 32 >= 16 && scale1_too ? scale1[c / 32] : scale0[c / 32];
      wb[static_cast<size_t>(c)] =
          mm::FromBf16(mm::ToBf16(mm::HasBias(fmt) ? std::fma(code, s, bias[c / 32]) : code * s));
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = xb.data() + t * w.cols;
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) acc = mm::Bf16TileStep(acc, xt + b * 32, wb.data() + b * 32);
      y[t * y_stride + r] = acc;
    }
  }
}

void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool) {
  PARALLM_CHECK(y_stride >= w.rows);
  if (n_tokens <= 0 || w.rows <= 0) return;
  mm::QFormat fmt;
  const bool quantized = mm::QuantFormatOf(w, &fmt);
  std::vector<uint8_t> buf;
  mm::QuantizedActs acts;
  if (quantized) {
    buf.resize(mm::ActsBytes(n_tokens, w.cols, 1));
    acts = mm::CarveActs(buf.data(), n_tokens, w.cols, 1);
    mm::QuantizeActs(x, 0, n_tokens, 0, &acts);
  }
  const int64_t tasks = pool ? std::min<int64_t>(w.rows, pool->num_threads() * 4) : 1;
  auto run = [&](int64_t task, int) {
    auto [r0, r1] = SplitRange(w.rows, tasks, task);
    if (quantized) {
      QuantRows(w, fmt, acts, y, y_stride, r0, r1);
    } else {
      FloatRows(w, x, n_tokens, y, y_stride, r0, r1);
    }
  };
  if (pool) {
    pool->ParallelFor(tasks, run);
  } else {
    run(0, 0);
  }
}

}  // namespace parallm::ref
