// Shared pieces of the MatMul paths: activation quantization and per-block weight parameters. Compiled
// for the baseline ISA; every path (scalar twin included) uses these same functions, so the numbers the
// kernels start from are identical.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"
#include "util/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace parallm::mm {
namespace {

// Round to nearest, ties to even: the same rounding as the SIMD float->int conversions (cvtps2dq).
inline int RoundToInt(float v) {
#if defined(__x86_64__) || defined(__i386__)
  return _mm_cvtss_si32(_mm_set_ss(v));
#else
  return static_cast<int>(std::lrintf(v));
#endif
}

inline size_t AlignUp(size_t n) { return (n + 63) & ~size_t{63}; }

float LoadScale(const uint8_t* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, p + i * 4, 4);
      return v;
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return F16ToF32(h);
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return BF16ToF32(h);
    }
    default:
      PARALLM_CHECK_MSG(false, "MLX scales must be f32, f16 or bf16");
  }
  return 0;
}

}  // namespace

uint16_t ToBf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  if ((u & 0x7F800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);        // zero, denormal
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN, quieted
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float FromBf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

namespace {
// Denormal sums are flushed to zero, as the tile unit does.
inline float Flush(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }
}  // namespace

float Bf16TileStep(float acc, const float* a, const float* b) {
  float sum[2] = {0, 0};  // even products, odd products
  for (int i = 0; i < 32; ++i) sum[i & 1] = Flush(sum[i & 1] + a[i] * b[i]);
  return Flush(acc + Flush(sum[0] + sum[1]));
}

bool QuantFormatOf(const MatrixView& w, QFormat* fmt) {
  if (w.kind == MatrixView::Kind::kMlxAffine) {
    PARALLM_CHECK(IsSupportedMlxAffine(w.mlx) && w.cols % w.mlx.group_size == 0);
    *fmt = QFormat::kMlx;
    return true;
  }
  switch (w.dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return false;
    case DType::kQ8_0:
      *fmt = QFormat::kQ8_0;
      return true;
    case DType::kQ4_0:
      *fmt = QFormat::kQ4_0;
      return true;
    case DType::kQ4_K:
      *fmt = QFormat::kQ4_K;
      return true;
    case DType::kQ6_K:
      *fmt = QFormat::kQ6_K;
      return true;
    default:
      PARALLM_CHECK_MSG(false, "MatMul: unsupported weight type");
  }
  return false;
}

size_t ActsBytes(int64_t n_tokens, int64_t cols, int subs) {
  size_t n = static_cast<size_t>(n_tokens), nb = static_cast<size_t>(cols / 32);
  return AlignUp(n * static_cast<size_t>(cols)) + 2 * AlignUp(n * nb * 4) + AlignUp(n * nb * subs * 4) + 64;
}

QuantizedActs CarveActs(void* buf, int64_t n_tokens, int64_t cols, int subs) {
  PARALLM_CHECK(cols % 32 == 0);
  QuantizedActs a;
  a.n_tokens = n_tokens;
  a.cols = cols;
  a.nb = cols / 32;
  a.subs = subs;
  size_t n = static_cast<size_t>(n_tokens), nb = static_cast<size_t>(a.nb);
  auto* p = reinterpret_cast<uint8_t*>(AlignUp(reinterpret_cast<uintptr_t>(buf)));
  a.q = reinterpret_cast<int8_t*>(p);
  p += AlignUp(n * static_cast<size_t>(cols));
  a.d = reinterpret_cast<float*>(p);
  p += AlignUp(n * nb * 4);
  a.ds = reinterpret_cast<float*>(p);
  p += AlignUp(n * nb * 4);
  a.corr = reinterpret_cast<int32_t*>(p);
  return a;
}

void CopyActsRow(const QuantizedActs& from, int64_t src, QuantizedActs* to, int64_t dst) {
  const int64_t cols = to->cols, nb = to->nb, subs = to->subs;
  std::memcpy(to->q + dst * cols, from.q + src * cols, static_cast<size_t>(cols));
  std::memcpy(to->d + dst * nb, from.d + src * nb, static_cast<size_t>(nb) * sizeof(float));
  std::memcpy(to->ds + dst * nb, from.ds + src * nb, static_cast<size_t>(nb) * sizeof(float));
  std::memcpy(to->corr + dst * nb * subs, from.corr + src * nb * subs,
              static_cast<size_t>(nb * subs) * sizeof(int32_t));
}

void QuantizeActs(const float* x, int64_t t0, int64_t t1, int code_offset, QuantizedActs* a) {
  const int64_t cols = a->cols, nb = a->nb;
  for (int64_t t = t0; t < t1; ++t) {
    const float* xt = x + t * cols;
    int8_t* qt = a->q + t * cols;
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = xt + b * 32;
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      float d = amax / 127.0f;
      float id = d != 0 ? 1.0f / d : 0.0f;
      int sum[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        int q = std::clamp(RoundToInt(xb[i] * id), -127, 127);
        qt[b * 32 + i] = static_cast<int8_t>(q);
        sum[i >> 4] += q;
      }
      int s = sum[0] + sum[1];
      a->d[t * nb + b] = d;
      a->ds[t * nb + b] = d * static_cast<float>(s);
      if (a->subs == 1) {
        a->corr[t * nb + b] = -code_offset * s;
      } else {
        a->corr[(t * nb + b) * 2] = -code_offset * sum[0];
        a->corr[(t * nb + b) * 2 + 1] = -code_offset * sum[1];
      }
    }
  }
}

void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void BlockParamsRow(const MatrixView& w, QFormat fmt, int64_t r, int64_t b0, int64_t b1, float* scale0,
                    float* scale1, float* bias, int64_t stride) {
  const uint8_t* row = w.Row(r);
  for (int64_t b = b0; b < b1; ++b) {
    int64_t o = (b - b0) * stride;
    switch (fmt) {
      case QFormat::kQ8_0: {
        const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
        scale0[o] = F16ToF32(blk->d);
        break;
      }
      case QFormat::kQ4_0: {
        const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
        scale0[o] = F16ToF32(blk->d);
        break;
      }
      case QFormat::kQ4_K: {
        const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + b / 8;
        int sc, m;
        ScaleMinK4(static_cast<int>(b % 8), blk->scales, &sc, &m);
        scale0[o] = F16ToF32(blk->d) * static_cast<float>(sc);
        bias[o] = -(F16ToF32(blk->dmin) * static_cast<float>(m));
        break;
      }
      case QFormat::kQ6_K: {
        const auto* blk = reinterpret_cast<const BlockQ6_K*>(row) + b / 8;
        float d = F16ToF32(blk->d);
        int j = static_cast<int>(b % 8) * 2;
        scale0[o] = d * static_cast<float>(blk->scales[j]);
        scale1[o] = d * static_cast<float>(blk->scales[j + 1]);
        break;
      }
      case QFormat::kMlx: {
        const int64_t groups = w.cols / w.mlx.group_size;
        const int shift = w.mlx.group_size == 32 ? 0 : w.mlx.group_size == 64 ? 1 : 2;  // log2(blocks per group)
        const int64_t g = r * groups + (b >> shift);
        scale0[o] = LoadScale(w.scales, w.dtype, g);
        bias[o] = LoadScale(w.biases, w.dtype, g);
        break;
      }
    }
  }
}

void BlockCodes(const MatrixView& w, QFormat fmt, int64_t r, int64_t b, int16_t* codes) {
  const uint8_t* row = w.Row(r);
  switch (fmt) {
    case QFormat::kQ8_0: {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
      for (int i = 0; i < 32; ++i) codes[i] = blk->qs[i];
      return;
    }
    case QFormat::kQ4_0: {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
      for (int i = 0; i < 16; ++i) {
        codes[i] = static_cast<int16_t>((blk->qs[i] & 15) - 8);
        codes[i + 16] = static_cast<int16_t>((blk->qs[i] >> 4) - 8);
      }
      return;
    }
    case QFormat::kQ4_K: {
      const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + b / 8;
      int j = static_cast<int>(b % 8);
      const uint8_t* q = blk->qs + (j / 2) * 32;
      for (int i = 0; i < 32; ++i) codes[i] = static_cast<int16_t>((j & 1) ? (q[i] >> 4) : (q[i] & 15));
      return;
    }
    case QFormat::kQ6_K: {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(row) + b / 8;
      int j = static_cast<int>(b % 8);  // 32-value block within the super-block
      const uint8_t* ql = blk->ql + (j / 4) * 64;
      const uint8_t* qh = blk->qh + (j / 4) * 32;
      int quarter = j % 4;
      for (int l = 0; l < 32; ++l) {
        int low = (quarter & 1) ? ql[l + 32] : ql[l];
        low = (quarter & 2) ? (low >> 4) : (low & 0xF);
        int high = (qh[l] >> (2 * quarter)) & 3;
        codes[l] = static_cast<int16_t>((low | (high << 4)) - 32);
      }
      return;
    }
    case QFormat::kMlx: {
      const auto* words = reinterpret_cast<const uint32_t*>(row);
      for (int i = 0; i < 32; ++i) codes[i] = static_cast<int16_t>(MlxCode(words, w.mlx.bits, b * 32 + i));
      return;
    }
  }
}

}  // namespace parallm::mm
