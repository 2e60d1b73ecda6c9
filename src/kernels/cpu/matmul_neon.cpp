// The ARM64 MatMul path: NEON with the dot-product extension (sdot), one weight row per 32-bit lane, 4 rows
// per group. Weights are repacked at load into per-group panels; unpacked matrices get the same panel built
// per call, so one kernel serves both.
//
// Same design and formula as the x86 paths (matmul_internal.h): per 32-column block, 8 code registers (lane
// i = 4 codes of row i at columns 4j..4j+3), `sdot` by lane against the token's 32 activation bytes (two
// registers, no broadcast needed), the exact int32 block dot per lane, then the f32 tail lane-wise with the
// scalar twin's operations (a fused multiply-add is vfmaq_f32), so the results equal it bit for bit.
//
// sdot multiplies signed by signed bytes, so codes are stored signed: Q8_0 q, Q6_K q - 32, 5-7 bit MLX q,
// 8-bit MLX q - 128 (code offset -128). 4-bit codes (Q4_0, Q4_K, MLX up to 4 bits) are stored as 0..15, two
// per byte (low nibble: register j, high nibble: register j + 4); Q4_0's are q, code offset 8.
//
// The copy made at load keeps each format's own parameter fields, so it is about the file's size: Q8_0's and Q4_0's
// f16 scales as those values (exact both ways); MLX's 16-bit scales and biases likewise, once per group of columns, in
// a header; Q4_K's 6-bit sub-block scales and mins as bytes in the block and each super-block's f16 d and dmin once,
// in a header; Q6_K's codes + 32 as a 4-bit and a 2-bit plane, its int8 half-block scales in the block and f16 d in a
// header. The kernel forms d * scale (and -(dmin * min)) with BlockParamsRow's f32 operations. Panels built per call
// (matrices not repacked), and Q6_K's groups unpacked for a batch of several token tiles, hold byte codes and f32
// parameters.
#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/matmul_internal.h"
#include "tensor/fp16.h"
#include "tensor/matrix.h"
#include "tensor/quant.h"
#include "util/check.h"

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")

namespace parallm::mm {
namespace {

constexpr int kRows = 4;          // rows per group: one per 32-bit lane
constexpr int kTokTile = 8;       // tokens per register tile (8 int + 8 f32 accumulators, 8 code registers)
constexpr int kTokBlock = 64;     // tokens per pass over a group (their activations stay in L2)

#define PARALLM_INLINE inline __attribute__((always_inline))

// How a block's parameters are stored: as f32, as the f16 values they were converted from (kF16; the per-group kinds:
// MLX's f16 or bf16 scale and bias, 4 rows' each, in the header of their group of columns), or as a K-quant's fields
// (kQ4K: 4 scale bytes then 4 min bytes a block, f16 d then f16 dmin in the header; kQ6K: two vectors of 4 int8
// scales a block, f16 d in the header).
enum class Param : int { kF32, kF16, kQ4K, kQ6K, kF16PerGroup, kBF16PerGroup };

constexpr bool PerGroup(Param p) { return p == Param::kF16PerGroup || p == Param::kBF16PerGroup; }

// How a format's blocks are stored in a panel: a group's headers (one per 2^header_shift blocks: a K-quant's
// super-block, an MLX group of columns), then its blocks.
struct Layout {
  bool nibbles = false;  // 4-bit codes, two per byte
  int offset = 0;        // stored code = the format's code + offset (corr undoes it)
  int params = 1;        // vectors after the codes: scale, then bias (Q4_K, MLX) or the second scale (Q6_K)
  Param param = Param::kF32;
  bool six = false;      // Q6_K's codes + 32 as a 4-bit plane (as nibbles) and a 2-bit plane
  int header_shift = 3;  // log2 of the blocks a header serves (3: a K-quant's super-block)
  constexpr int CodeBytes() const { return six ? 96 : nibbles ? 64 : 128; }
  constexpr int ParamBytes() const {  // a vector: 4 rows' values
    return param == Param::kF32 ? 16 : param == Param::kQ4K || param == Param::kQ6K ? 4 : PerGroup(param) ? 0 : 8;
  }
  constexpr int64_t Stride() const { return CodeBytes() + ParamBytes() * params; }
  constexpr int HeaderBytes() const {
    return param == Param::kQ4K || PerGroup(param) ? 16 : param == Param::kQ6K ? 8 : 0;
  }
  int64_t HeadersBytes(const MatrixView& w) const { return (w.cols / 32 >> header_shift) * HeaderBytes(); }
  // A group's panel: its headers, then all of a row's 32-column blocks.
  int64_t GroupBytes(const MatrixView& w) const { return HeadersBytes(w) + w.cols / 32 * Stride(); }
};
constexpr int64_t kMaxStride = Layout{false, 0, 2}.Stride();  // byte codes and two f32 parameter vectors

// The layout of w's panels: `compact`, the copy made at load; otherwise byte codes and f32 parameters (the panels
// built per call).
Layout LayoutOf(const MatrixView& w, QFormat fmt, bool compact) {
  Layout l;
  l.params = fmt == QFormat::kQ6_K || HasBias(fmt) ? 2 : 1;
  switch (fmt) {
    case QFormat::kQ8_0:
      l.param = Param::kF16;
      break;
    case QFormat::kQ4_0:
      l.nibbles = true;
      l.offset = 8;
      l.param = Param::kF16;
      break;
    case QFormat::kQ4_K:
      l.nibbles = true;
      l.param = Param::kQ4K;
      break;
    case QFormat::kQ6_K:
      l.six = true;
      l.param = Param::kQ6K;
      break;
    case QFormat::kMlx:
      l.nibbles = w.mlx.bits <= 4;
      l.offset = w.mlx.bits == 8 ? -128 : 0;
      l.param = w.dtype == DType::kF16    ? Param::kF16PerGroup
                : w.dtype == DType::kBF16 ? Param::kBF16PerGroup
                                          : Param::kF32;
      l.header_shift = w.mlx.group_size == 32 ? 0 : w.mlx.group_size == 64 ? 1 : 2;
      break;
  }
  if (!compact) {
    l.param = Param::kF32;
    l.six = false;
  }
  return l;
}

// A parameter stored as the 16-bit value it came from (F16ToF32 and BF16ToF32 of it give the f32 back).
uint16_t ParamBits(Param p, float f) {
  return p == Param::kF16 || p == Param::kF16PerGroup ? F32ToF16(f) : static_cast<uint16_t>(BitsFromF32(f) >> 16);
}

// A K-quant's parameter fields for block b of the 4 rows (rows[i]: row index) at p (the block's parameters) and
// `header` (its super-block's), as Layout's kQ4K and kQ6K describe them.
void PackKQuantParams(const MatrixView& w, Param param, const int64_t* rows, int64_t b, uint8_t* p, uint8_t* header) {
  for (int i = 0; i < kRows; ++i) {
    const int j = static_cast<int>(b % 8);
    auto* h = reinterpret_cast<uint16_t*>(header);
    if (param == Param::kQ4K) {
      const auto* blk = reinterpret_cast<const BlockQ4_K*>(w.Row(rows[i])) + b / 8;
      int sc, m;
      ScaleMinK4(j, blk->scales, &sc, &m);
      p[i] = static_cast<uint8_t>(sc);
      p[kRows + i] = static_cast<uint8_t>(m);
      h[i] = blk->d;
      h[kRows + i] = blk->dmin;
    } else {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(w.Row(rows[i])) + b / 8;
      p[i] = static_cast<uint8_t>(blk->scales[2 * j]);
      p[kRows + i] = static_cast<uint8_t>(blk->scales[2 * j + 1]);
      h[i] = blk->d;
    }
  }
}

// The panel of the group of rows [r0, r0 + 4) (a ragged last group repeats its last row): its headers, then nb blocks
// of Stride() bytes. Scalar: it runs once per matrix at load (or per call for a matrix that was not repacked).
void PackGroup(const MatrixView& w, QFormat fmt, const Layout& l, int64_t r0, uint8_t* out) {
  const int64_t nb = w.cols / 32, stride = l.Stride();
  uint8_t* headers = out;
  out += l.HeadersBytes(w);
  const bool fields = l.param == Param::kQ4K || l.param == Param::kQ6K;  // the K-quants' own, not f32 values
  thread_local std::vector<float> params;
  params.assign(static_cast<size_t>(nb * kRows * 2), 0.0f);
  int16_t codes[kRows][32];
  int64_t rows[kRows];
  for (int i = 0; i < kRows; ++i) {
    rows[i] = std::min(r0 + i, w.rows - 1);
    float* p = params.data() + i * 2 * nb;
    if (!fields) {
      BlockParamsRow(w, fmt, rows[i], 0, nb, p, fmt == QFormat::kQ6_K ? p + nb : nullptr,
                     HasBias(fmt) ? p + nb : nullptr, 1);
    }
  }
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* pb = out + b * stride;
    for (int i = 0; i < kRows; ++i) {
      BlockCodes(w, fmt, rows[i], b, codes[i]);
      for (int c = 0; c < 32; ++c) codes[i][c] = static_cast<int16_t>(codes[i][c] + (l.six ? 32 : l.offset));
    }
    std::memset(pb, 0, static_cast<size_t>(l.CodeBytes()));
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < kRows; ++i)
        for (int k = 0; k < 4; ++k) {
          const int c = codes[i][4 * j + k];
          if (!l.nibbles && !l.six) {
            pb[16 * j + 4 * i + k] = static_cast<uint8_t>(static_cast<int8_t>(c));
            continue;
          }
          pb[16 * (j % 4) + 4 * i + k] |= static_cast<uint8_t>(j < 4 ? c & 15 : (c & 15) << 4);
          // Q6_K: register j's high 2 bits at bits 2 (j / 2) of the 2-bit plane's vector j % 2.
          if (l.six) pb[64 + 16 * (j % 2) + 4 * i + k] |= static_cast<uint8_t>((c >> 4) << (2 * (j / 2)));
        }
    if (fields) {
      PackKQuantParams(w, l.param, rows, b, pb + l.CodeBytes(), headers + (b >> l.header_shift) * l.HeaderBytes());
      continue;
    }
    // The per-group kinds: each block of a group has the same values; the header holds them once.
    uint8_t* to = PerGroup(l.param) ? headers + (b >> l.header_shift) * l.HeaderBytes() : pb + l.CodeBytes();
    for (int v = 0; v < l.params; ++v)
      for (int i = 0; i < kRows; ++i) {
        const float f = params[static_cast<size_t>(i * 2 * nb + v * nb + b)];
        uint8_t* p = to + v * (PerGroup(l.param) ? 8 : l.ParamBytes());
        if (l.param == Param::kF32) {
          std::memcpy(p + 4 * i, &f, 4);
        } else {
          const uint16_t h = ParamBits(l.param, f);
          std::memcpy(p + 2 * i, &h, 2);
        }
      }
  }
}

// 4 bytes at p, widened to 32-bit lanes (signed: as int8).
template <bool kSigned>
PARALLM_INLINE float32x4_t BytesToF32(const uint8_t* p) {
  uint32_t u;
  std::memcpy(&u, p, 4);
  const uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(u));
  if constexpr (kSigned) return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(b)))));
  return vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(b))));
}

// Vector v of a block's parameters at p (4 rows' values, stored as kParam), as f32; `header`: the block's super-block
// header (the K-quants), from which kQ4K's scale = d * float(sc) and bias = -(dmin * float(m)), kQ6K's scale v =
// d * float(sc_v), as BlockParamsRow computes them.
template <Param kParam>
PARALLM_INLINE float32x4_t LoadParams(const uint8_t* p, int v, const uint8_t* header = nullptr) {
  if constexpr (kParam == Param::kF32) {
    return vld1q_f32(reinterpret_cast<const float*>(p) + 4 * v);
  } else if constexpr (PerGroup(kParam)) {
    const uint16x4_t h = vld1_u16(reinterpret_cast<const uint16_t*>(header) + 4 * v);
    if constexpr (kParam == Param::kF16PerGroup) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
  } else if constexpr (kParam == Param::kQ4K || kParam == Param::kQ6K) {
    const uint16x4_t h = vld1_u16(reinterpret_cast<const uint16_t*>(header) + (kParam == Param::kQ4K ? 4 * v : 0));
    const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(h));
    const float32x4_t f = vmulq_f32(d, BytesToF32<kParam == Param::kQ6K>(p + 4 * v));
    return kParam == Param::kQ4K && v == 1 ? vnegq_f32(f) : f;
  } else {  // kF16
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + 4 * v)));
  }
}

// Q6_K's 8 code registers from its planes: register j's low 4 bits in vector j % 4 of the 4-bit plane (its low
// nibbles for j < 4, high ones after), its high 2 at bits 2 (j / 2) of vector j % 2 of the 2-bit plane; then - 32.
PARALLM_INLINE void LoadSixBitCodes(const uint8_t* pb, int8x16_t* w) {
  const uint8x16_t v0 = vld1q_u8(pb), v1 = vld1q_u8(pb + 16), v2 = vld1q_u8(pb + 32), v3 = vld1q_u8(pb + 48);
  const uint8x16_t h0 = vld1q_u8(pb + 64), h1 = vld1q_u8(pb + 80), m3 = vdupq_n_u8(3);
  const uint8x16_t lo[8] = {v0, v1, v2, v3, vshrq_n_u8(v0, 4), vshrq_n_u8(v1, 4), vshrq_n_u8(v2, 4), vshrq_n_u8(v3, 4)};
  const uint8x16_t hi[8] = {vandq_u8(h0, m3),
                            vandq_u8(h1, m3),
                            vandq_u8(vshrq_n_u8(h0, 2), m3),
                            vandq_u8(vshrq_n_u8(h1, 2), m3),
                            vandq_u8(vshrq_n_u8(h0, 4), m3),
                            vandq_u8(vshrq_n_u8(h1, 4), m3),
                            vshrq_n_u8(h0, 6),
                            vshrq_n_u8(h1, 6)};
  // vsli keeps lo's low 4 bits under hi << 4.
  for (int j = 0; j < 8; ++j) w[j] = vsubq_s8(vreinterpretq_s8_u8(vsliq_n_u8(lo[j], hi[j], 4)), vdupq_n_s8(32));
}

template <bool kNibbles, bool kSix = false>
PARALLM_INLINE void LoadCodes(const uint8_t* pb, int8x16_t* w) {
  if constexpr (kSix) {
    LoadSixBitCodes(pb, w);
  } else if constexpr (kNibbles) {
    const uint8x16_t m = vdupq_n_u8(0x0F);
    for (int j = 0; j < 4; ++j) {
      const uint8x16_t v = vld1q_u8(pb + 16 * j);
      w[j] = vreinterpretq_s8_u8(vandq_u8(v, m));
      w[j + 4] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    }
  } else {
    for (int j = 0; j < 8; ++j) w[j] = vld1q_s8(reinterpret_cast<const int8_t*>(pb) + 16 * j);
  }
}

// acc + the dots of code register J with activation bytes 4J..4J+3 (lane J % 4 of x[J / 4]).
template <int J>
PARALLM_INLINE int32x4_t DotJ(int32x4_t acc, int8x16_t w, int8x16_t x0, int8x16_t x1) {
  if constexpr (J < 4) {
    return vdotq_laneq_s32(acc, w, x0, J);
  } else {
    return vdotq_laneq_s32(acc, w, x1, J - 4);
  }
}

// The block dot of registers J... into acc (one dependent chain).
template <int... J>
PARALLM_INLINE int32x4_t DotChain(int32x4_t acc, const int8x16_t* w, int8x16_t x0, int8x16_t x1,
                                  std::integer_sequence<int, J...>) {
  ((acc = DotJ<J>(acc, w[J], x0, x1)), ...);
  return acc;
}

// Tokens [t0, t0 + T) against all nb blocks of one group's panel (its blocks; `headers`: its headers, the K-quants);
// out[t * 4 + lane].
template <int T, int kSubs, bool kBias, bool kNibbles, Param kParam>
void Tile(const uint8_t* panel, const uint8_t* headers, int header_shift, int64_t stride, int64_t nb,
          const QuantizedActs& a, int64_t t0, float* out) {
  constexpr bool kSix = kParam == Param::kQ6K;
  constexpr int kCodeBytes = Layout{kNibbles, 0, 1, kParam, kSix}.CodeBytes();
  constexpr int kHeaderBytes = Layout{kNibbles, 0, 1, kParam, kSix}.HeaderBytes();
  float32x4_t f[T];
  const int8_t* xq[T];
  const float* dx[T];
  const float* ds[T];
  const int32_t* corr[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    f[t] = vdupq_n_f32(0.0f);
    xq[t] = a.q + (t0 + t) * a.cols;
    dx[t] = a.d + (t0 + t) * a.nb;
    ds[t] = a.ds + (t0 + t) * a.nb;
    corr[t] = a.corr + (t0 + t) * a.nb * kSubs;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = panel + b * stride;
    const uint8_t* params = pb + kCodeBytes;
    const uint8_t* header = headers + (b >> header_shift) * kHeaderBytes;
    int8x16_t w[8];
    LoadCodes<kNibbles, kSix>(pb, w);
    float32x4_t scale[kSubs], bias = vdupq_n_f32(0.0f);
#pragma GCC unroll 2
    for (int s = 0; s < kSubs; ++s) scale[s] = LoadParams<kParam>(params, s, header);
    if constexpr (kBias) bias = LoadParams<kParam>(params, 1, header);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int8x16_t x0 = vld1q_s8(xq[t] + b * 32), x1 = vld1q_s8(xq[t] + b * 32 + 16);
      int32x4_t ia[kSubs];
      if constexpr (kSubs == 2) {
        // Q6_K: columns 0-15 (registers 0-3) and 16-31 (4-7) have their own scales.
        ia[0] = DotChain(vdupq_n_s32(corr[t][2 * b]), w, x0, x1, std::integer_sequence<int, 0, 1, 2, 3>{});
        ia[1] = DotChain(vdupq_n_s32(corr[t][2 * b + 1]), w, x0, x1, std::integer_sequence<int, 4, 5, 6, 7>{});
      } else if constexpr (T <= 2) {
        // Few tokens: two chains (even and odd registers) halve the sdot latency chain; int sums are exact.
        const int32x4_t even = DotChain(vdupq_n_s32(corr[t][b]), w, x0, x1, std::integer_sequence<int, 0, 2, 4, 6>{});
        const int32x4_t odd = DotChain(vdupq_n_s32(0), w, x0, x1, std::integer_sequence<int, 1, 3, 5, 7>{});
        ia[0] = vaddq_s32(even, odd);
      } else {
        ia[0] = DotChain(vdupq_n_s32(corr[t][b]), w, x0, x1, std::make_integer_sequence<int, 8>{});
      }
#pragma GCC unroll 2
      for (int s = 0; s < kSubs; ++s)
        f[t] = vfmaq_f32(f[t], vcvtq_f32_s32(ia[s]), vmulq_n_f32(scale[s], dx[t][b]));
      if constexpr (kBias) f[t] = vfmaq_f32(f[t], bias, vdupq_n_f32(ds[t][b]));
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) vst1q_f32(out + 4 * t, f[t]);
}

template <int kSubs, bool kBias, bool kNibbles, Param kParam, int... Ts>
void RunTileImpl(int tt, std::integer_sequence<int, Ts...>, const uint8_t* panel, const uint8_t* headers, int shift,
                 int64_t stride, int64_t nb, const QuantizedActs& a, int64_t t0, float* out) {
  using Fn = void (*)(const uint8_t*, const uint8_t*, int, int64_t, int64_t, const QuantizedActs&, int64_t, float*);
  static constexpr Fn kTiles[] = {&Tile<Ts + 1, kSubs, kBias, kNibbles, kParam>...};
  kTiles[tt - 1](panel, headers, shift, stride, nb, a, t0, out);
}

template <int kSubs, bool kBias, bool kNibbles, Param kParam = Param::kF32>
void RunTile(int tt, const uint8_t* panel, const uint8_t* headers, int shift, int64_t stride, int64_t nb,
             const QuantizedActs& a, int64_t t0, float* out) {
  RunTileImpl<kSubs, kBias, kNibbles, kParam>(tt, std::make_integer_sequence<int, kTokTile>{}, panel, headers, shift,
                                              stride, nb, a, t0, out);
}

// RunTile for a format with one scale a block, by how its parameters are stored.
template <bool kBias, bool kNibbles>
void RunTileP(Param param, int tt, const uint8_t* panel, const uint8_t* headers, int shift, int64_t stride,
              int64_t nb, const QuantizedActs& a, int64_t t0, float* out) {
  switch (param) {
    case Param::kF16:
      return RunTile<1, kBias, kNibbles, Param::kF16>(tt, panel, headers, shift, stride, nb, a, t0, out);
    case Param::kF32:
      return RunTile<1, kBias, kNibbles, Param::kF32>(tt, panel, headers, shift, stride, nb, a, t0, out);
    case Param::kQ4K:  // Q4_K only: a bias, nibble codes
      if constexpr (kBias && kNibbles) {
        return RunTile<1, true, true, Param::kQ4K>(tt, panel, headers, shift, stride, nb, a, t0, out);
      }
      break;
    case Param::kF16PerGroup:  // MLX only: a bias
      if constexpr (kBias) {
        return RunTile<1, true, kNibbles, Param::kF16PerGroup>(tt, panel, headers, shift, stride, nb, a, t0, out);
      }
      break;
    case Param::kBF16PerGroup:
      if constexpr (kBias) {
        return RunTile<1, true, kNibbles, Param::kBF16PerGroup>(tt, panel, headers, shift, stride, nb, a, t0, out);
      }
      break;
    case Param::kQ6K:
      break;
  }
  PARALLM_CHECK_MSG(false, "no NEON tile for these parameters");
}

// Q6_K's planes take ~5 operations a register to unpack, once per block and token tile: with several tiles, a group
// is unpacked once, into byte codes and f32 parameters (`unpacked`, the layout of the panels built per call), and the
// tiles read that.
void UnpackSixBitGroup(const Layout& l, const uint8_t* headers, const uint8_t* blocks, int64_t nb,
                       const Layout& unpacked, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* pb = blocks + b * l.Stride();
    uint8_t* ob = out + b * unpacked.Stride();
    int8x16_t w[8];
    LoadSixBitCodes(pb, w);
    for (int j = 0; j < 8; ++j) vst1q_s8(reinterpret_cast<int8_t*>(ob) + 16 * j, w[j]);
    for (int v = 0; v < 2; ++v)
      vst1q_f32(reinterpret_cast<float*>(ob + unpacked.CodeBytes()) + 4 * v,
                LoadParams<Param::kQ6K>(pb + l.CodeBytes(), v, headers + (b >> 3) * l.HeaderBytes()));
  }
}

// Tokens [tb0, tb0 + nt) of the group at r0 (nrows valid rows) against its panel (laid out as l), written into
// args.y. `scratch`: room for one group's panel with byte codes and f32 parameters.
void GroupTokens(const QuantArgs& args, const Layout& l, const uint8_t* panel, int64_t r0, int nrows, int64_t tb0,
                 int64_t nt, uint8_t* scratch) {
  const QuantizedActs& a = *args.acts;
  Layout use = l;
  const uint8_t* headers = panel;
  const uint8_t* blocks = panel + l.HeadersBytes(*args.w);
  if (l.six && nt > kTokTile) {
    use = LayoutOf(*args.w, args.fmt, false);
    UnpackSixBitGroup(l, headers, blocks, a.nb, use, scratch);
    headers = blocks = scratch;
  }
  const int64_t stride = use.Stride();
  alignas(16) float out[kTokTile * kRows];
  for (int64_t t0 = tb0; t0 < tb0 + nt; t0 += kTokTile) {
    const int tt = static_cast<int>(std::min<int64_t>(kTokTile, tb0 + nt - t0));
    if (args.fmt == QFormat::kQ6_K) {
      if (use.six) {
        RunTile<2, false, false, Param::kQ6K>(tt, blocks, headers, use.header_shift, stride, a.nb, a, t0, out);
      } else {
        RunTile<2, false, false>(tt, blocks, headers, use.header_shift, stride, a.nb, a, t0, out);
      }
    } else if (HasBias(args.fmt)) {
      if (use.nibbles) {
        RunTileP<true, true>(use.param, tt, blocks, headers, use.header_shift, stride, a.nb, a, t0, out);
      } else {
        RunTileP<true, false>(use.param, tt, blocks, headers, use.header_shift, stride, a.nb, a, t0, out);
      }
    } else if (use.nibbles) {
      RunTileP<false, true>(use.param, tt, blocks, headers, use.header_shift, stride, a.nb, a, t0, out);
    } else {
      RunTileP<false, false>(use.param, tt, blocks, headers, use.header_shift, stride, a.nb, a, t0, out);
    }
    for (int t = 0; t < tt; ++t)
      std::memcpy(args.y + (t0 + t) * args.y_stride + r0, out + 4 * t, static_cast<size_t>(nrows) * sizeof(float));
  }
}

// Loop nest: token block (kTokBlock) > row group (its panel in L1) > token tile (registers) > blocks.
template <typename PanelOf>
void RowsOverPanels(const QuantArgs& args, const Layout& l, int64_t row_begin, int64_t row_end, uint8_t* scratch,
                    PanelOf panel_of) {
  const int64_t n_tokens = args.acts->n_tokens;
  for (int64_t tb0 = 0; tb0 < n_tokens; tb0 += kTokBlock) {
    const int64_t nt = std::min<int64_t>(kTokBlock, n_tokens - tb0);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
      const int nrows = static_cast<int>(std::min<int64_t>(kRows, row_end - r0));
      GroupTokens(args, l, panel_of(r0), r0, nrows, tb0, nt, scratch);
    }
  }
}

void QuantRowsPacked(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const Layout l = LayoutOf(*args.w, args.fmt, true);
  RowsOverPanels(args, l, row_begin, row_end, scratch,
                 [&](int64_t r0) { return args.w->packed + (r0 / kRows) * l.GroupBytes(*args.w); });
}

// Not repacked: each group's panel is built in the scratch, once per token block.
void QuantRows(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const Layout l = LayoutOf(*args.w, args.fmt, false);
  RowsOverPanels(args, l, row_begin, row_end, scratch, [&](int64_t r0) {
    PackGroup(*args.w, args.fmt, l, r0, scratch);
    return static_cast<const uint8_t*>(scratch);
  });
}

size_t ScratchBytes(int64_t /*n_tokens*/, int64_t cols) { return static_cast<size_t>(cols / 32 * kMaxStride + 64); }
int CodeOffset(const MatrixView& w, QFormat fmt) { return LayoutOf(w, fmt, true).offset; }

size_t PackedBytes(const MatrixView& w, QFormat fmt) {
  const int64_t groups = (w.rows + kRows - 1) / kRows;
  return static_cast<size_t>(groups * LayoutOf(w, fmt, true).GroupBytes(w));
}

void Pack(const MatrixView& w, QFormat fmt, uint8_t* out) {
  const Layout l = LayoutOf(w, fmt, true);
  for (int64_t r0 = 0; r0 < w.rows; r0 += kRows) PackGroup(w, fmt, l, r0, out + r0 / kRows * l.GroupBytes(w));
}

// ---- f32 FMA path ---------------------------------------------------------------------------------------
// One output = one 4-lane accumulator over columns in steps of 4, the tail zero-padded through a small
// buffer, then a fixed horizontal sum.
template <DType kType>
PARALLM_INLINE float32x4_t LoadW4(const uint8_t* row, int64_t c) {
  if constexpr (kType == DType::kF32) {
    return vld1q_f32(reinterpret_cast<const float*>(row) + c);
  } else {
    const uint16x4_t h = vld1_u16(reinterpret_cast<const uint16_t*>(row) + c);
    if constexpr (kType == DType::kF16) {
      return vcvt_f32_f16(vreinterpret_f16_u16(h));
    } else {
      return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
    }
  }
}

template <DType kType, int R, int T>
void FloatTile(const FloatArgs& a, int64_t r0, int64_t t0) {
  const MatrixView& w = *a.w;
  const int64_t cols = w.cols, full = cols / 4 * 4;
  const size_t esize = Info(kType).block_bytes;
  float32x4_t acc[R][T];
  const uint8_t* rows[R];
  const float* xs[T];
  for (int r = 0; r < R; ++r) rows[r] = w.Row(r0 + r);
  for (int t = 0; t < T; ++t) xs[t] = a.x + (t0 + t) * cols;
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = vdupq_n_f32(0.0f);
  for (int64_t c = 0; c < full; c += 4) {
    float32x4_t xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xv[t] = vld1q_f32(xs[t] + c);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float32x4_t wv = LoadW4<kType>(rows[r], c);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = vfmaq_f32(acc[r][t], wv, xv[t]);
    }
  }
  if (full < cols) {
    const int64_t n = cols - full;
    alignas(16) uint8_t wtail[R][16] = {};
    alignas(16) float xtail[T][4] = {};
    for (int r = 0; r < R; ++r) std::memcpy(wtail[r], rows[r] + full * esize, static_cast<size_t>(n) * esize);
    for (int t = 0; t < T; ++t) std::memcpy(xtail[t], xs[t] + full, static_cast<size_t>(n) * 4);
    for (int r = 0; r < R; ++r) {
      const float32x4_t wv = LoadW4<kType>(wtail[r], 0);
      for (int t = 0; t < T; ++t) acc[r][t] = vfmaq_f32(acc[r][t], wv, vld1q_f32(xtail[t]));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.y_stride + r0 + r] = vaddvq_f32(acc[r][t]);
}

struct FloatTiles {
  template <DType kType, int R, int T>
  static void Run(const FloatArgs& a, int64_t r0, int64_t t0) { FloatTile<kType, R, T>(a, r0, t0); }
};

// Tiles of 4 rows x 4 tokens: 16 accumulators + 4 activation registers + 1 weight register.
void FloatRows(const FloatArgs& a, int64_t row_begin, int64_t row_end) {
  FloatRowsByTiles<FloatTiles, 4>(a, row_begin, row_end);
}

// Activations: the shared QuantizeActs (about 1% of a call's work).
const IsaKernels kKernels{kRows,        &CodeOffset, &ScratchBytes, &QuantizeActs,   &QuantRows,
                          &FloatRows,   &PackedBytes, &Pack,        &QuantRowsPacked};

}  // namespace

const IsaKernels* NeonKernels() { return &kKernels; }

}  // namespace parallm::mm

#pragma GCC pop_options
