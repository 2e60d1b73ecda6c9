// AVX-512 (F/BW/VL + VNNI) MatMul kernels: the int8 path with vpdpbusd on 512-bit registers, and the f32
// FMA path for float weights.
//
// Int8 path layout: one weight row per 32-bit lane, 16 rows per "row group". For each 32-column block, the
// panel holds 8 zmm registers: register j has, in lane i, codes 4j..4j+3 of row i (unsigned bytes: the
// format's codes, offset where needed, see x86_unpack-inl.h). vpdpbusd(acc, panel_j, broadcast(x[4j..4j+3])) then adds one 4-term dot per row, so after 8
// steps lane i holds the exact int32 block dot of row i, no horizontal reduction needed. The f32 tail of
// the formula in matmul_internal.h (cvt, scale * dx, fma, bias fma) runs lane-wise, so each output sees
// exactly the scalar twin's operations, whatever the tile: tokens only change which register a lane's
// accumulator sits in, never the operations on it. Hence batch invariance and fast == ref bit for bit.
//
// Panels are built on the fly (row blocks transposed in registers) for a chunk of kChunkBlocks blocks of
// one row group, then reused by every token tile: a register tile is 16 rows x up to 8 tokens, so a
// panel load feeds 8 vpdpbusd. Panel chunk (~20 KB) and a token tile's activations stay in L1. Weights repacked
// at load take two row groups a tile (32 rows x up to 6 tokens) once there are 6 tokens: each broadcast of a
// token's activation bytes then feeds two vpdpbusd, and the broadcasts (loads) are what bound the 16-row tile.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "kernels/matmul_internal.h"
#include "tensor/fp16.h"
#include "tensor/quant.h"
#include "util/check.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12's AVX-512 shuffle/extract intrinsics pass _mm512_undefined_*() as the (unused) merge source,
// which -Wuninitialized reports falsely.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace parallm::mm {
namespace {

#include "kernels/cpu/x86_unpack-inl.h"
#include "kernels/cpu/packed_params-inl.h"

constexpr int kRows = 16;          // rows per group: one per 32-bit lane of a zmm
constexpr int kChunkBlocks = 32;   // 32-column blocks per panel chunk (1024 columns)
constexpr int kPrefetchChunks = 1;  // software prefetch distance in panel chunks (2 and 4 measured no better)
constexpr int kTokBlock = 256;   // tokens per panel pass (bounds the accumulators, keeps activations in L2)
constexpr int kCodeBytes = 8 * 64; // a block's codes for 16 rows

// Params after the codes: scale0, then scale1 (Q6_K) or bias (Q4_K, MLX), 16 floats each.
int ParamVectors(QFormat f) { return f == QFormat::kQ6_K || HasBias(f) ? 2 : 1; }
int64_t BlockStride(QFormat f) { return kCodeBytes + 64 * ParamVectors(f); }

// Transposes 16 rows x 8 dwords (the code bytes of one block per row) into 8 zmm of 16 lanes:
// out[j] lane i = row i dword j. z[i] holds rows (i, i+4) and z[4+i] rows (8+i, 12+i) in its 256-bit halves;
// two unpack stages transpose 4x4 dwords inside each 128-bit lane, and pairing the rows that way makes the
// final 128-bit lane shuffle land them in natural order. 24 shuffles, all in registers.
#define PARALLM_INLINE inline __attribute__((always_inline))
PARALLM_INLINE void Transpose4(__m512i a, __m512i b, __m512i c, __m512i d, __m512i* o0, __m512i* o1,
                               __m512i* o2, __m512i* o3) {
  const __m512i t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
  const __m512i t2 = _mm512_unpacklo_epi32(c, d), t3 = _mm512_unpackhi_epi32(c, d);
  *o0 = _mm512_unpacklo_epi64(t0, t2);
  *o1 = _mm512_unpackhi_epi64(t0, t2);
  *o2 = _mm512_unpacklo_epi64(t1, t3);
  *o3 = _mm512_unpackhi_epi64(t1, t3);
}

template <typename U>
PARALLM_INLINE __m512i Pair(const uint8_t* lo, const uint8_t* hi, int64_t b) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(U::Codes(lo, b)), U::Codes(hi, b), 1);
}

template <typename U>
PARALLM_INLINE void PanelBlock(const uint8_t* const* rows, int64_t b, uint8_t* pb) {
  __m512i u0, u1, u2, u3, u4, u5, u6, u7;
  Transpose4(Pair<U>(rows[0], rows[4], b), Pair<U>(rows[1], rows[5], b), Pair<U>(rows[2], rows[6], b),
             Pair<U>(rows[3], rows[7], b), &u0, &u1, &u2, &u3);
  Transpose4(Pair<U>(rows[8], rows[12], b), Pair<U>(rows[9], rows[13], b), Pair<U>(rows[10], rows[14], b),
             Pair<U>(rows[11], rows[15], b), &u4, &u5, &u6, &u7);
  _mm512_store_si512(pb + 0 * 64, _mm512_shuffle_i32x4(u0, u4, 0x88));  // lanes 0, 2 of each: dword m
  _mm512_store_si512(pb + 1 * 64, _mm512_shuffle_i32x4(u1, u5, 0x88));
  _mm512_store_si512(pb + 2 * 64, _mm512_shuffle_i32x4(u2, u6, 0x88));
  _mm512_store_si512(pb + 3 * 64, _mm512_shuffle_i32x4(u3, u7, 0x88));
  _mm512_store_si512(pb + 4 * 64, _mm512_shuffle_i32x4(u0, u4, 0xDD));  // lanes 1, 3 of each: dword 4 + m
  _mm512_store_si512(pb + 5 * 64, _mm512_shuffle_i32x4(u1, u5, 0xDD));
  _mm512_store_si512(pb + 6 * 64, _mm512_shuffle_i32x4(u2, u6, 0xDD));
  _mm512_store_si512(pb + 7 * 64, _mm512_shuffle_i32x4(u3, u7, 0xDD));
}

// Per-block f32 parameters of 16 rows, lane i = row i, at params[(b - b0) * fstride + 16 * v + i] (v = 0: scale0,
// v = 1: scale1 or bias). The same values as BlockParamsRow (same conversions and products), computed 16 rows
// at a time: scale fields are gathered from the 16 rows' blocks (4-byte reads inside each block).
void BuildParams(const MatrixView& w, QFormat fmt, const uint8_t* const* rows, int64_t r0, int nrows, int64_t b0,
                 int64_t nbc, float* params, int64_t fstride) {
  alignas(64) int32_t offs[kRows];
  for (int i = 0; i < kRows; ++i) offs[i] = static_cast<int32_t>(rows[i] - rows[0]);
  const __m512i idx = _mm512_load_si512(offs);
  switch (fmt) {
    case QFormat::kQ8_0:
    case QFormat::kQ4_0: {
      // The f16 scale is the first two bytes of each block.
      const int bb = fmt == QFormat::kQ8_0 ? static_cast<int>(sizeof(BlockQ8_0)) : static_cast<int>(sizeof(BlockQ4_0));
      for (int64_t b = 0; b < nbc; ++b) {
        __m512i g = _mm512_i32gather_epi32(idx, rows[0] + (b0 + b) * bb, 1);
        _mm512_store_ps(params + b * fstride, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
      }
      return;
    }
    case QFormat::kQ4_K: {
      // d, dmin, then 12 bytes of packed 6-bit scales/mins (ggml get_scale_min_k4), per super-block of 8 blocks.
      const __m512i m6 = _mm512_set1_epi32(63), m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3);
      for (int64_t sb = b0 / 8; sb < (b0 + nbc) / 8; ++sb) {
        const uint8_t* base = rows[0] + sb * static_cast<int64_t>(sizeof(BlockQ4_K));
        const __m512i g0 = _mm512_i32gather_epi32(idx, base, 1);
        const __m512i qa = _mm512_i32gather_epi32(idx, base + 4, 1);   // scales[0..3]
        const __m512i qb = _mm512_i32gather_epi32(idx, base + 8, 1);   // scales[4..7]
        const __m512i qc = _mm512_i32gather_epi32(idx, base + 12, 1);  // scales[8..11]
        const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g0));
        const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g0, 16)));
        for (int j = 0; j < 8; ++j) {
          __m512i sc, m;
          if (j < 4) {
            sc = _mm512_and_si512(_mm512_srli_epi32(qa, 8 * j), m6);
            m = _mm512_and_si512(_mm512_srli_epi32(qb, 8 * j), m6);
          } else {
            const int k = j - 4;
            sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(qc, 8 * k), m4),
                                 _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qa, 8 * k + 6), m2), 4));
            m = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(qc, 8 * k + 4), m4),
                                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qb, 8 * k + 6), m2), 4));
          }
          float* pb = params + (sb * 8 + j - b0) * fstride;
          _mm512_store_ps(pb, _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc)));
          const __m512 neg_min = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m));
          _mm512_store_ps(pb + 16, _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(neg_min),
                                                                        _mm512_set1_epi32(INT32_MIN))));  // -(dmin * m)
        }
      }
      return;
    }
    case QFormat::kQ6_K: {
      // 16 int8 sub-block scales at byte 192, f16 d at byte 208, per super-block of 8 blocks.
      for (int64_t sb = b0 / 8; sb < (b0 + nbc) / 8; ++sb) {
        const uint8_t* base = rows[0] + sb * static_cast<int64_t>(sizeof(BlockQ6_K));
        const __m512 d = _mm512_cvtph_ps(
            _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_i32gather_epi32(idx, base + 206, 1), 16)));
        __m512i sc[4];
        for (int q = 0; q < 4; ++q) sc[q] = _mm512_i32gather_epi32(idx, base + 192 + 4 * q, 1);
        for (int k = 0; k < 8; ++k) {
          const __m512i word = sc[k / 2];
          const int pos = (2 * k) % 4;  // byte of scales[2k] within its dword
          const __m512i s0 = _mm512_srai_epi32(_mm512_slli_epi32(word, 24 - 8 * pos), 24);
          const __m512i s1 = _mm512_srai_epi32(_mm512_slli_epi32(word, 16 - 8 * pos), 24);
          float* pb = params + (sb * 8 + k - b0) * fstride;
          _mm512_store_ps(pb, _mm512_mul_ps(d, _mm512_cvtepi32_ps(s0)));
          _mm512_store_ps(pb + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(s1)));
        }
      }
      return;
    }
    case QFormat::kMlx: {
      // Per group: gather the 16 rows' scale and bias (rows[i] -> row r0 + min(i, nrows - 1)), convert, and store
      // the vectors for each block of the group. A 4-byte gather of a 2-byte value also reads the next value,
      // which for the very last value of the array lies past its end: that lane is masked and loaded alone.
      const int64_t gs = w.mlx.group_size, groups = w.cols / gs;
      const int bpg = static_cast<int>(gs / 32);  // blocks per group; chunks start on a group boundary
      const int esize = static_cast<int>(Info(w.dtype).block_bytes);
      alignas(64) int32_t soffs[kRows];
      for (int i = 0; i < kRows; ++i) soffs[i] = static_cast<int32_t>(std::min(i, nrows - 1) * groups * esize);
      const __m512i sidx = _mm512_load_si512(soffs);
      const int last_lane = r0 + nrows == w.rows ? nrows - 1 : -1;  // lane i >= nrows repeats it too
      for (int64_t g = b0 / bpg; g < (b0 + nbc) / bpg; ++g) {
        const int64_t elem = r0 * groups + g;
        __m512 v[2];
        for (int k = 0; k < 2; ++k) {
          const uint8_t* base = (k == 0 ? w.scales : w.biases) + elem * esize;
          if (w.dtype == DType::kF32) {
            v[k] = _mm512_i32gather_ps(sidx, base, 1);
            continue;
          }
          __mmask16 m = 0xFFFF;
          if (last_lane >= 0 && g == groups - 1) m = static_cast<__mmask16>((1u << last_lane) - 1);
          __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, sidx, base, 1);
          if (m != 0xFFFF) {
            uint16_t h;
            std::memcpy(&h, base + soffs[last_lane], 2);
            raw = _mm512_mask_set1_epi32(raw, static_cast<__mmask16>(~m), h);
          }
          const __m256i h16 = _mm512_cvtepi32_epi16(raw);
          v[k] = w.dtype == DType::kF16 ? _mm512_cvtph_ps(h16)
                                        : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h16), 16));
        }
        for (int j = 0; j < bpg; ++j) {
          float* pb = params + (g * bpg + j - b0) * fstride;
          _mm512_store_ps(pb, v[0]);
          _mm512_store_ps(pb + 16, v[1]);
        }
      }
      return;
    }
  }
}

// Fills the panel for blocks [b0, b0 + nbc) of 16 rows. rows[0..15] are all valid pointers: a ragged
// last group repeats its last row (lanes are independent; the extra lanes are never stored).
template <typename U>
void BuildPanel(const MatrixView& w, QFormat fmt, const uint8_t* const* rows, int64_t r0, int nrows, int64_t b0,
                int64_t nbc, uint8_t* panel) {
  const int64_t stride = BlockStride(fmt);
  for (int64_t b = 0; b < nbc; ++b) PanelBlock<U>(rows, b0 + b, panel + b * stride);
  BuildParams(w, fmt, rows, r0, nrows, b0, nbc, reinterpret_cast<float*>(panel + kCodeBytes), stride / 4);
}

inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The row groups of one register tile (G of them, 16 rows each) over the same chunk of blocks: each group's panel,
// its chunk's first header (the kinds with headers; null otherwise) and its f32 accumulators ([token][16], carried
// across chunks). `pf`/`pf_lines`: lines to prefetch while the tile runs, a block's share at a time, one range a group.
template <int G>
struct TileGroups {
  const uint8_t* panel[G];
  const uint8_t* headers[G];
  float* acc[G];
  const uint8_t* pf[G] = {};
  int64_t pf_lines[G] = {};
  // Q4_K with many tokens: the chunk's parameters as f32, worked out once per chunk by ExpandParams instead of once
  // per token tile (ExpandedAt says where each vector lies).
  const float* expanded = nullptr;
};

// Whether a pass may read its parameters from TileGroups::expanded: Q4_K, whose d * scale and -(dmin * min) take 9
// operations a group and block to form from the packed bytes. kernels_bench, two threads, Q4_K at 64 tokens: down
// 951 -> 980 GOP/s, l2 819 -> 853. With one token or a tile or two a chunk the extra pass over the parameters costs
// more than it saves (expanded always: 1 token 178 -> 149), and MLX's 16-bit values (one conversion) gained nothing at
// 64 tokens.
template <ParamKind kPk>
constexpr bool kExpands = kPk == ParamKind::kQ4K;
// Token tiles a chunk from which a pass expands.
constexpr int64_t kExpandTiles = 3;

// Vector v (0: scale, 1: bias) of block b, row group g (of G) in an expanded chunk.
template <int G, class F>
inline F* ExpandedAt(F* expanded, int64_t b, int g, int v) {
  return expanded + ((b * G + g) * 2 + v) * 16;
}

// Fills tg.expanded's nbc blocks from the panels and headers: LoadParams' values, so the products see the same bits.
template <int G, ParamKind kPk>
void ExpandParams(const TileGroups<G>& tg, int header_shift, int64_t stride, int64_t nbc, int code_bytes,
                  float* expanded) {
  for (int64_t b = 0; b < nbc; ++b)
    for (int g = 0; g < G; ++g)
      for (int v = 0; v < 2; ++v)
        _mm512_store_ps(ExpandedAt<G>(expanded, b, g, v),
                        LoadParams<kPk>(tg.panel[g] + b * stride + code_bytes, v,
                                        HeaderOf(kPk, tg.headers[g], b, header_shift)));
}

// One register tile: G x 16 rows x T tokens over the chunk's nbc blocks. kSubs: int sums per block (2 for Q6_K);
// kBias: Q4_K / MLX bias term. kNib: the panel's codes are nibble-packed (repacked 4-bit formats). kPk: how the block's
// parameters are stored (packed_params-inl.h; panels built per call hold f32); kQ6K also packs the codes in planes
// (PackedCodes).
// Two groups share each broadcast of a token's 4 activation bytes (and of its scales): broadcasts are loads, and the
// load ports, not the multiplies, bound a 16-row tile (one broadcast per vpdpbusd). Each output's operations are the
// same whatever G and T: they only change which register holds its accumulator. The first chunk (b0 == 0) starts
// the accumulators at zero in registers, so the callers need not clear `acc` (a memset a pass: ~1.5% of a step).
template <int T, int G, int kSubs, bool kBias, bool kNib, ParamKind kPk, bool kExp>
void Tile(const TileGroups<G>& tg, int header_shift, int64_t stride, int64_t nbc, const QuantizedActs& a, int64_t t0,
          int64_t b0) {
  constexpr bool kSix = kPk == ParamKind::kQ6K;
  constexpr int kCB = PackedCodeBytes(kSix, kNib);
  __m512 f[G][T];
  const int8_t* xq[T];
  const float* dx[T];
  const float* ds[T];
  const int32_t* corr[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) f[g][t] = b0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(tg.acc[g] + 16 * t);
    xq[t] = a.q + (t0 + t) * a.cols + b0 * 32;
    dx[t] = a.d + (t0 + t) * a.nb + b0;
    ds[t] = a.ds + (t0 + t) * a.nb + b0;
    corr[t] = a.corr + ((t0 + t) * a.nb + b0) * kSubs;
  }
  for (int64_t b = 0; b < nbc; ++b) {
    const uint8_t* pb[G];
    const uint8_t* header[G];
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      pb[g] = tg.panel[g] + b * stride;
      header[g] = HeaderOf(kPk, tg.headers[g], b, header_shift);
    }
    // The next chunk's lines, a block's share at a time, so the loads stream while the products run.
#pragma GCC unroll 2
    for (int r = 0; r < G; ++r) {
      if (tg.pf_lines[r] == 0) continue;  // the later token tiles: no lines, so no divisions either
      for (int64_t i = tg.pf_lines[r] * b / nbc; i < tg.pf_lines[r] * (b + 1) / nbc; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(tg.pf[r] + i * 64), _MM_HINT_T0);
    }
#pragma GCC unroll 2
    for (int s = 0; s < kSubs; ++s) {
      // With one or two tokens the 8 vpdpbusd per block would form one dependent chain per token, bound by
      // the instruction's latency: split into two chains (even and odd j) summed at the end; int32 sums are
      // exact, so the block dot is unchanged.
      constexpr int kChains = T <= 2 ? 2 : 1;
      __m512i ia[G][T], ib[G][T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512i c = _mm512_set1_epi32(corr[t][b * kSubs + s]);
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
          ia[g][t] = c;
          ib[g][t] = _mm512_setzero_si512();
        }
      }
#pragma GCC unroll 8
      for (int j = s * (8 / kSubs); j < (s + 1) * (8 / kSubs); ++j) {
        __m512i wj[G];
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) wj[g] = PackedCodes<kNib, kSix>(pb[g], j);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          const __m512i x = Bcast4(xq[t] + b * 32 + 4 * j);
#pragma GCC unroll 2
          for (int g = 0; g < G; ++g) {
            if (kChains == 2 && (j & 1)) {
              ib[g][t] = _mm512_dpbusd_epi32(ib[g][t], wj[g], x);
            } else {
              ia[g][t] = _mm512_dpbusd_epi32(ia[g][t], wj[g], x);
            }
          }
        }
      }
      if constexpr (kChains == 2) {
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
          for (int g = 0; g < G; ++g) ia[g][t] = _mm512_add_epi32(ia[g][t], ib[g][t]);
      }
      __m512 scale[G];
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g)
        scale[g] = kExp ? _mm512_load_ps(ExpandedAt<G>(tg.expanded, b, g, s))
                        : LoadParams<kPk>(pb[g] + kCB, s, header[g]);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512 dxt = _mm512_set1_ps(dx[t][b]);
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g)
          f[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[g][t]), _mm512_mul_ps(scale[g], dxt), f[g][t]);
      }
    }
    if constexpr (kBias) {
      __m512 bias[G];
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g)
        bias[g] = kExp ? _mm512_load_ps(ExpandedAt<G>(tg.expanded, b, g, 1))
                       : LoadParams<kPk>(pb[g] + kCB, 1, header[g]);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512 dst = _mm512_set1_ps(ds[t][b]);
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) f[g][t] = _mm512_fmadd_ps(bias[g], dst, f[g][t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) _mm512_store_ps(tg.acc[g] + 16 * t, f[g][t]);
}

template <int G, int kSubs, bool kBias, bool kNib, ParamKind kPk, bool kExp, int... Ts>
void RunTileImpl(int tt, std::integer_sequence<int, Ts...>, const TileGroups<G>& tg, int header_shift, int64_t stride,
                 int64_t nbc, const QuantizedActs& a, int64_t t0, int64_t b0) {
  using Fn = void (*)(const TileGroups<G>&, int, int64_t, int64_t, const QuantizedActs&, int64_t, int64_t);
  static constexpr Fn kTiles[] = {&Tile<Ts + 1, G, kSubs, kBias, kNib, kPk, kExp>...};
  kTiles[tt - 1](tg, header_shift, stride, nbc, a, t0, b0);
}

// Tokens per register tile: 8 for one row group (8 int32 + 8 f32 accumulators), 6 for two (12 + 12 registers).
template <int G>
constexpr int kTokTileOf = G == 1 ? 8 : 6;
constexpr int kTokTile = kTokTileOf<1>;

// Tile for tt (1..kTokTileOf<G>) tokens; kExp: its parameters from tg.expanded.
template <int G, int kSubs, bool kBias, bool kNib = false, ParamKind kPk = ParamKind::kF32, bool kExp = false>
void RunTile(int tt, const TileGroups<G>& tg, int64_t stride, int64_t nbc, const QuantizedActs& a, int64_t t0,
             int64_t b0, int header_shift = 0) {
  RunTileImpl<G, kSubs, kBias, kNib, kPk, kExp>(tt, std::make_integer_sequence<int, kTokTileOf<G>>{}, tg,
                                                header_shift, stride, nbc, a, t0, b0);
}

// QuantizeActs, 16 blocks at a time: the same operations per value as the scalar version (max of |x| is exact in
// any order, one division, one reciprocal, x * id rounded to nearest-even, exact int sums). A block's max and its
// int sums are reductions of a vector each; done one block at a time, those horizontal steps and the scalar
// divisions took most of the time (`kernels_bench --benchmark_filter=QuantizeActs/avx512`, 64 tokens: 130-139 M
// blocks/s one block at a time, 360-387 M this way; ~2% of a batched decode step before).
//
// ReduceEach16: op's reduction of the 16 lanes of v[j] lands in lane 4 (j % 4) + j / 4 of the result (four rounds of
// pairwise shuffles, halving the width each round). That map is a 4 x 4 transpose, its own inverse: callers put block
// kLaneBlock[j] in v[j], and lane b then holds block b's.
constexpr int kLaneBlock[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

template <class Op>
inline __m512 ReduceEach16(const __m512* v, Op op) {
  __m512 r[8], s[4], t[2];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j)
    r[j] = op(_mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0x44), _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0xEE));
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j)
    s[j] = op(_mm512_shuffle_f32x4(r[2 * j], r[2 * j + 1], 0x88), _mm512_shuffle_f32x4(r[2 * j], r[2 * j + 1], 0xDD));
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j)
    t[j] = op(_mm512_shuffle_ps(s[2 * j], s[2 * j + 1], 0x44), _mm512_shuffle_ps(s[2 * j], s[2 * j + 1], 0xEE));
  return op(_mm512_shuffle_ps(t[0], t[1], 0x88), _mm512_shuffle_ps(t[0], t[1], 0xDD));
}

inline __m512 MaxPs(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
inline __m512 AddEpi32(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

// x * id rounded to the nearest int, at least -127. The scalar version also clamps at 127, which x * id never passes
// (|x| <= amax, so x * id <= 127 (1 + 2^-22)); a NaN or infinite x * id converts to INT_MIN, which the max takes to
// -127 as the clamp does.
inline __m512i QuantizeVec(const float* x, __m512 id) {
  return _mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), id)), _mm512_set1_epi32(-127));
}

// kHalves: Q6_K's activations, with a correction per half-block.
template <bool kHalves>
void QuantizeActsT(const float* x, int64_t t0, int64_t t1, int code_offset, QuantizedActs* a) {
  const int64_t cols = a->cols, nb = a->nb;
  // The bytes of packs_epi16(packs_epi32(q0, q1), packs_epi32(q2, q3)) come 128-bit lane by lane: dword k of that
  // lane holds 4 values of q(k) (of q0..q3 in turn). This permutation puts q0's bytes first, then q1's, q2's, q3's.
  const __m512i pack_order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  for (int64_t t = t0; t < t1; ++t) {
    const float* xt = x + t * cols;
    int8_t* qt = a->q + t * cols;
    int32_t* corr = a->corr + t * nb * a->subs;
    for (int64_t b0 = 0; b0 < nb; b0 += 16) {
      const int k = static_cast<int>(std::min<int64_t>(16, nb - b0));  // blocks in this group
      const float* xg = xt + b0 * 32;
      __m512 m[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const int b = kLaneBlock[j];
        m[j] = b < k ? _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xg + b * 32)),
                                     _mm512_abs_ps(_mm512_loadu_ps(xg + b * 32 + 16)))
                     : _mm512_setzero_ps();
      }
      const __m512 d = _mm512_div_ps(ReduceEach16(m, MaxPs), _mm512_set1_ps(127.0f));
      const __mmask16 nonzero = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ);
      alignas(64) float id[16];
      _mm512_store_ps(id, _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), d));
      // Per block the sums of its two halves (sum0, sum1: Q6_K's corrections), or of the whole block (sum0).
      __m512 sum0[16], sum1[kHalves ? 16 : 1];
#pragma GCC unroll 8
      for (int b = 0; b < 16; b += 2) {
        const int j = kLaneBlock[b], j2 = kLaneBlock[b + 1];  // their slots (the map is its own inverse)
        if (b >= k) {
          sum0[j] = sum0[j2] = _mm512_setzero_ps();
          if constexpr (kHalves) sum1[j] = sum1[j2] = _mm512_setzero_ps();
          continue;
        }
        const float* xb = xg + b * 32;
        const bool two = b + 1 < k;
        const __m512 id0 = _mm512_set1_ps(id[b]), id1 = _mm512_set1_ps(id[b + 1]);
        const __m512i q0 = QuantizeVec(xb, id0), q1 = QuantizeVec(xb + 16, id0);
        const __m512i q2 = two ? QuantizeVec(xb + 32, id1) : _mm512_setzero_si512();
        const __m512i q3 = two ? QuantizeVec(xb + 48, id1) : _mm512_setzero_si512();
        const __m512i bytes = _mm512_permutexvar_epi32(
            pack_order, _mm512_packs_epi16(_mm512_packs_epi32(q0, q1), _mm512_packs_epi32(q2, q3)));
        if (two) {
          _mm512_storeu_si512(qt + (b0 + b) * 32, bytes);
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(qt + (b0 + b) * 32), _mm512_castsi512_si256(bytes));
        }
        if constexpr (kHalves) {
          sum0[j] = _mm512_castsi512_ps(q0), sum1[j] = _mm512_castsi512_ps(q1);
          sum0[j2] = _mm512_castsi512_ps(q2), sum1[j2] = _mm512_castsi512_ps(q3);
        } else {
          sum0[j] = _mm512_castsi512_ps(_mm512_add_epi32(q0, q1));
          sum0[j2] = _mm512_castsi512_ps(_mm512_add_epi32(q2, q3));
        }
      }
      const __mmask16 in_group = static_cast<__mmask16>((1u << k) - 1);
      const __m512i s0 = _mm512_castps_si512(ReduceEach16(sum0, AddEpi32));
      __m512i s1 = _mm512_setzero_si512();
      if constexpr (kHalves) s1 = _mm512_castps_si512(ReduceEach16(sum1, AddEpi32));
      const __m512i s = _mm512_add_epi32(s0, s1);
      _mm512_mask_storeu_ps(a->d + t * nb + b0, in_group, d);
      _mm512_mask_storeu_ps(a->ds + t * nb + b0, in_group, _mm512_mul_ps(d, _mm512_cvtepi32_ps(s)));
      const __m512i neg_offset = _mm512_set1_epi32(-code_offset);
      if constexpr (!kHalves) {
        _mm512_mask_storeu_epi32(corr + b0, in_group, _mm512_mullo_epi32(neg_offset, s));
      } else {  // per block: its first half's correction, then its second's
        const __m512i c0 = _mm512_mullo_epi32(neg_offset, s0), c1 = _mm512_mullo_epi32(neg_offset, s1);
        const __m512i first = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(8));
        const uint64_t pairs = (uint64_t{1} << (2 * k)) - 1;  // 2k values
        _mm512_mask_storeu_epi32(corr + 2 * b0, static_cast<__mmask16>(pairs),
                                 _mm512_permutex2var_epi32(c0, first, c1));
        _mm512_mask_storeu_epi32(corr + 2 * b0 + 16, static_cast<__mmask16>(pairs >> 16),
                                 _mm512_permutex2var_epi32(c0, second, c1));
      }
    }
  }
}

void QuantizeActsAvx512(const float* x, int64_t t0, int64_t t1, int code_offset, QuantizedActs* a) {
  if (a->subs == 2) {
    QuantizeActsT<true>(x, t0, t1, code_offset, a);
  } else {
    QuantizeActsT<false>(x, t0, t1, code_offset, a);
  }
}

size_t PanelBytes() { return kChunkBlocks * (kCodeBytes + 64 * 2); }
// A task's scratch: two panels (the one QuantRowsT builds; two row groups' Q6_K chunks unpacked by the packed path),
// then two row groups' accumulators.
size_t AccOffset() { return 2 * PanelBytes(); }

size_t ScratchBytes(int64_t n_tokens, int64_t /*cols*/) {
  return AccOffset() + 2 * static_cast<size_t>(std::min<int64_t>(n_tokens, kTokBlock)) * 64 + 64;
}

int CodeOffset(const MatrixView& w, QFormat fmt) { return CodeOffsetOf<false>(w, fmt); }

// Software prefetch of the next panel chunk's weight bytes, spread over the current chunk's token tiles, so
// streaming the weights from memory overlaps the dot products instead of stalling the panel build.
struct Prefetcher {
  const uint8_t* rows[kRows];
  int nrows = 0;
  size_t begin = 0, lines = 0;  // byte offset in each row, 64-byte lines per row

  void Plan(const MatrixView& w, int64_t r0, int64_t r_end, int64_t nb, int64_t b0, int64_t nbc) {
    nrows = static_cast<int>(std::min<int64_t>(kRows, r_end - r0));
    if (nrows <= 0) return;
    for (int i = 0; i < nrows; ++i) rows[i] = w.Row(r0 + i);
    begin = w.row_bytes * static_cast<size_t>(b0) / static_cast<size_t>(nb);
    size_t end = w.row_bytes * static_cast<size_t>(b0 + nbc) / static_cast<size_t>(nb);
    lines = (end - begin + 63) / 64 + 1;
  }
  // Issues part k of n (every line of every row once over k = 0..n-1).
  void Issue(int64_t k, int64_t n) const {
    if (nrows <= 0) return;
    const size_t total = lines * static_cast<size_t>(nrows);
    const size_t from = total * static_cast<size_t>(k) / static_cast<size_t>(n);
    const size_t to = total * static_cast<size_t>(k + 1) / static_cast<size_t>(n);
    for (size_t i = from; i < to; ++i)
      _mm_prefetch(reinterpret_cast<const char*>(rows[i / lines] + begin + (i % lines) * 64), _MM_HINT_T0);
  }
};

// Rows [row_begin, row_end) for all tokens. Loop nest: token block (kTokBlock) > row group (kRows) >
// column chunk (kChunkBlocks: build the panel, prefetch the next one) > token tile (kTokTile, registers).
// Each output's f32 accumulator lives in `acc` between chunks; its operations do not depend on the nest.
template <typename U>
void QuantRowsT(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const MatrixView& w = *args.w;
  const QuantizedActs& a = *args.acts;
  const QFormat fmt = args.fmt;
  const int64_t nb = a.nb, n_tokens = a.n_tokens, stride = BlockStride(fmt);
  uint8_t* panel = scratch;
  float* acc = reinterpret_cast<float*>(scratch + AccOffset());
  const bool stream = StreamOutput(args);
  auto tile = [&](int tt, int64_t nbc, int64_t t0, int64_t b0, float* ac) {
    const TileGroups<1> tg{{panel}, {nullptr}, {ac}};
    if (fmt == QFormat::kQ6_K) {
      RunTile<1, 2, false>(tt, tg, stride, nbc, a, t0, b0);
    } else if (HasBias(fmt)) {
      RunTile<1, 1, true>(tt, tg, stride, nbc, a, t0, b0);
    } else {
      RunTile<1, 1, false>(tt, tg, stride, nbc, a, t0, b0);
    }
  };
  for (int64_t tb0 = 0; tb0 < n_tokens; tb0 += kTokBlock) {
    const int64_t nt = std::min<int64_t>(kTokBlock, n_tokens - tb0);
    const int64_t n_tiles = (nt + kTokTile - 1) / kTokTile;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
      const int nrows = static_cast<int>(std::min<int64_t>(kRows, row_end - r0));
      const uint8_t* rows[kRows];
      for (int i = 0; i < kRows; ++i) rows[i] = w.Row(r0 + std::min(i, nrows - 1));
      for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
        const int64_t nbc = std::min<int64_t>(kChunkBlocks, nb - b0);
        BuildPanel<U>(w, fmt, rows, r0, nrows, b0, nbc, panel);
        // The chunk kPrefetchChunks ahead (the next row group after the last chunk of this one).
        int64_t pr = r0, pb = b0;
        Prefetcher next;
        for (int ahead = 0; ahead < kPrefetchChunks; ++ahead) {
          if (pb + kChunkBlocks < nb) {
            pb += kChunkBlocks;
          } else {
            pr += kRows;
            pb = 0;
          }
        }
        if (pr < row_end) next.Plan(w, pr, row_end, nb, pb, std::min<int64_t>(kChunkBlocks, nb - pb));
        for (int64_t k = 0; k < n_tiles; ++k) {
          next.Issue(k, n_tiles);
          const int64_t t0 = tb0 + k * kTokTile;
          tile(static_cast<int>(std::min<int64_t>(kTokTile, tb0 + nt - t0)), nbc, t0, b0, acc + (t0 - tb0) * 16);
        }
      }
      Avx512StoreRows(args, acc, tb0, nt, r0, nrows, stream);
    }
  }
}

void QuantRows(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  WithUnpacker<false>(*args.w, args.fmt,
                    [&](auto u) { QuantRowsT<decltype(u)>(args, row_begin, row_end, scratch); });
  _mm_sfence();  // streaming stores, if any, are visible before the task reports done
}

// ---- Weights repacked at load ------------------------------------------------------------------------------
// The panels QuantRowsT builds per call, built once: row group g's block b at packed + (g * nb + b) * stride,
// groups and blocks in order, so a task streams one contiguous run of bytes. Formats whose codes fit in 4
// bits (Q4_0, Q4_K, MLX 2-4 bit) keep them nibble-packed (256 code bytes per block instead of 512), so a
// 4-bit model reads about two thirds of an 8-bit one's bytes, and Q6_K's as that 4-bit plane and a 2-bit one (384);
// parameters that came from 16-bit values (Q8_0 and Q4_0 scales, MLX f16/bf16 scales and biases) are stored as those,
// MLX's once per group, the K-quants' as their own fields and f16 super-block scales (packed_params-inl.h; a row
// group's headers precede its blocks). The codes and the parameters' f32 values are exactly those BuildPanel makes, so
// results are bit-identical to the on-the-fly path.
ParamKind PackedParams(const MatrixView& w, QFormat fmt) {
  switch (fmt) {
    case QFormat::kQ8_0:
    case QFormat::kQ4_0:
      return ParamKind::kF16;
    case QFormat::kMlx:  // 16-bit scales and biases once per group (BuildParams starts chunks on group boundaries)
      return w.dtype == DType::kF16 ? ParamKind::kF16PerGroup
                                    : w.dtype == DType::kBF16 ? ParamKind::kBF16PerGroup : ParamKind::kF32;
    case QFormat::kQ4_K:
      return ParamKind::kQ4K;  // products d * sub-block scale: the kernel forms them from the stored fields
    case QFormat::kQ6_K:
      return ParamKind::kQ6K;  // likewise
  }
  return ParamKind::kF32;
}
int CodeBytes(const MatrixView& w, QFormat fmt) { return PackedCodeBytes(fmt == QFormat::kQ6_K, Nibbles(w, fmt)); }
int64_t PackedStride(const MatrixView& w, QFormat fmt) {
  return CodeBytes(w, fmt) + ParamBytes(PackedParams(w, fmt)) * ParamVectors(fmt);
}
// One header per 2^shift blocks: a K-quant's super-block, an MLX group (32, 64 or 128 columns: 1, 2 or 4 blocks).
int HeaderShift(const MatrixView& w, QFormat fmt) {
  const ParamKind pk = PackedParams(w, fmt);
  if (pk == ParamKind::kQ4K || pk == ParamKind::kQ6K) return kKQuantHeaderShift;
  return HasHeaders(pk) ? MlxGroupShift(w) : 0;
}
int64_t HeaderBytes(const MatrixView& w, QFormat fmt) {
  return GroupHeaderBytes(PackedParams(w, fmt), w.cols / 32, HeaderShift(w, fmt));
}

size_t PackedBytes(const MatrixView& w, QFormat fmt) {
  const int64_t groups = (w.rows + kRows - 1) / kRows, nb = w.cols / 32;
  return static_cast<size_t>(groups * (HeaderBytes(w, fmt) + nb * PackedStride(w, fmt)));
}

template <typename U>
void PackT(const MatrixView& w, QFormat fmt, uint8_t* out) {
  const int64_t nb = w.cols / 32, groups = (w.rows + kRows - 1) / kRows;
  const int64_t stride = BlockStride(fmt), pstride = PackedStride(w, fmt);
  const bool six = fmt == QFormat::kQ6_K, nib = Nibbles(w, fmt) || six;  // Q6_K: low 4 bits as nibbles, 2 in a plane
  const int pv = ParamVectors(fmt), code_bytes = CodeBytes(w, fmt);
  const ParamKind pk = PackedParams(w, fmt);
  const int shift = HeaderShift(w, fmt);
  const int64_t header_bytes = HeaderBytes(w, fmt);
  std::unique_ptr<uint8_t[]> mem(new uint8_t[PanelBytes() + 64]);
  uint8_t* panel = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.get()) + 63) & ~uintptr_t{63});
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t r0 = g * kRows;
    const int nrows = static_cast<int>(std::min<int64_t>(kRows, w.rows - r0));
    const uint8_t* rows[kRows];
    for (int i = 0; i < kRows; ++i) rows[i] = w.Row(r0 + std::min(i, nrows - 1));
    uint8_t* headers = out + g * (header_bytes + nb * pstride);  // as PackedGroupAt reads them
    uint8_t* blocks = headers + header_bytes;
    if (pk == ParamKind::kQ4K || pk == ParamKind::kQ6K) {
      PackKQuantParams<kRows>(fmt, rows, nb, pstride, code_bytes, headers, blocks);
    }
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
      const int64_t nbc = std::min<int64_t>(kChunkBlocks, nb - b0);
      BuildPanel<U>(w, fmt, rows, r0, nrows, b0, nbc, panel);
      for (int64_t b = 0; b < nbc; ++b) {
        const uint8_t* src = panel + b * stride;
        uint8_t* dst = blocks + (b0 + b) * pstride;
        if (nib) {
          for (int k = 0; k < 4; ++k) {
            const __m512i lo = _mm512_load_si512(src + 64 * k), hi = _mm512_load_si512(src + 64 * (k + 4));
            _mm512_storeu_si512(dst + 64 * k,
                                _mm512_or_si512(_mm512_and_si512(lo, m4), _mm512_slli_epi16(_mm512_and_si512(hi, m4), 4)));
          }
          for (int m = 0; six && m < 2; ++m) {  // the high 2 bits: register 2q + m at bits 2q of vector m
            __m512i plane = _mm512_setzero_si512();
            for (int q = 0; q < 4; ++q) {
              const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(_mm512_load_si512(src + 64 * (2 * q + m)), 4),
                                                  _mm512_set1_epi8(0x03));
              plane = _mm512_or_si512(plane, _mm512_sll_epi16(hi, _mm_cvtsi32_si128(2 * q)));
            }
            _mm512_storeu_si512(dst + kCodeBytes / 2 + 64 * m, plane);
          }
        } else {
          std::memcpy(dst, src, kCodeBytes);
        }
        if (pk == ParamKind::kQ4K || pk == ParamKind::kQ6K) continue;  // written by PackKQuantParams
        const bool per_group = HasHeaders(pk);
        if (per_group && ((b0 + b) & ((int64_t{1} << shift) - 1)) != 0) continue;  // the group's first block stored it
        uint8_t* to = per_group ? headers + ((b0 + b) >> shift) * HeaderBytesOf(pk) : dst + code_bytes;
        for (int v = 0; v < pv; ++v)
          StoreParams(pk, _mm512_load_ps(reinterpret_cast<const float*>(src + kCodeBytes) + 16 * v), to, v);
      }
    }
  }
}

void Pack(const MatrixView& w, QFormat fmt, uint8_t* out) {
  WithUnpacker<false>(w, fmt, [&](auto u) { PackT<decltype(u)>(w, fmt, out); });
}

// The packed rows of one task: where group g (rows 16g..16g + 15) and its chunks lie.
struct PackedTask {
  const uint8_t* packed;
  int64_t nb, pstride, header_bytes;
  int64_t row_end, g_end;   // one past the task's last row, and its last group
  const uint8_t* task_end;  // one past its bytes
  int shift;

  PackedGroup Group(int64_t g) const { return PackedGroupAt(packed, g, nb, pstride, header_bytes); }
  // Where chunk b0 of group g starts: at its headers when it is the group's first chunk (they precede its blocks).
  const uint8_t* ChunkStart(int64_t g, int64_t b0) const {
    const PackedGroup pg = Group(g);
    return b0 == 0 ? pg.headers : pg.blocks + b0 * pstride;
  }
};

// Q6_K's codes take 4-5 operations a register to unpack from their planes (PackedCodes): with several token tiles a
// chunk, each group's chunk is unpacked once into the on-the-fly path's panel layout (codes as bytes, the parameters'
// f32 values; BuildPanel's) at panels + g * PanelBytes(), and the tiles read that.
template <int G>
void UnpackQ6KChunk(const TileGroups<G>& tg, int header_shift, int64_t pstride, int64_t nbc, uint8_t* panels) {
  constexpr int kCB = PackedCodeBytes(true, false);
  const int64_t stride = BlockStride(QFormat::kQ6_K);
  for (int g = 0; g < G; ++g) {
    for (int64_t b = 0; b < nbc; ++b) {
      const uint8_t* pb = tg.panel[g] + b * pstride;
      uint8_t* out = panels + g * PanelBytes() + b * stride;
      __m512i reg[8];
      UnpackSixBitCodes(pb, reg);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm512_store_si512(out + 64 * j, reg[j]);
      const uint8_t* header = HeaderOf(ParamKind::kQ6K, tg.headers[g], b, header_shift);
      for (int v = 0; v < 2; ++v)
        _mm512_store_ps(out + kCodeBytes + 64 * v, LoadParams<ParamKind::kQ6K>(pb + kCB, v, header));
    }
  }
}
// Token tiles a chunk from which a pass unpacks Q6_K's chunks.
constexpr int64_t kUnpackTiles = 3;

// Row groups g0..g0 + G - 1 for tokens [tb0, tb0 + nt): each chunk of blocks through all token tiles, then the rows
// stored. acc holds each group's accumulators, nt x 16 floats apart; `panels`: room for G unpacked chunks.
template <int G, int kSubs, bool kBias, bool kNib, ParamKind kPk>
void PackedGroupsPass(const QuantArgs& args, const PackedTask& pt, int64_t g0, int64_t tb0, int64_t nt, float* acc,
                      uint8_t* panels, bool stream) {
  constexpr int kTile = kTokTileOf<G>;
  constexpr bool kSix = kPk == ParamKind::kQ6K;
  const int64_t nb = pt.nb, n_tiles = (nt + kTile - 1) / kTile;
  const int64_t pf_bytes = kChunkBlocks * pt.pstride + GroupHeaderBytes(kPk, kChunkBlocks, pt.shift);
  alignas(64) float expanded[kExpands<kPk> ? kChunkBlocks * G * 2 * 16 : 1];
  const bool expand = kExpands<kPk> && n_tiles >= kExpandTiles;
  const bool unpack = kSix && n_tiles >= kUnpackTiles;
  for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
    const int64_t nbc = std::min<int64_t>(kChunkBlocks, nb - b0);
    TileGroups<G> tg;
    for (int g = 0; g < G; ++g) {
      const PackedGroup pg = pt.Group(g0 + g);
      tg.panel[g] = pg.blocks + b0 * pt.pstride;
      tg.headers[g] = HasHeaders(kPk) ? HeaderOf(kPk, pg.headers, b0, pt.shift) : nullptr;
    }
    if (expand) {
      ExpandParams<G, kPk>(tg, pt.shift, pt.pstride, nbc, PackedCodeBytes(kSix, kNib), expanded);
      tg.expanded = expanded;
    }
    if (unpack) {
      UnpackQ6KChunk<G>(tg, pt.shift, pt.pstride, nbc, panels);
      for (int g = 0; g < G; ++g) {
        tg.panel[g] = panels + g * PanelBytes();
        tg.headers[g] = nullptr;
      }
    }
    // The chunks the next pass reads (these groups' next chunks, or the next groups' first ones): prefetched a
    // block's share at a time through the first token tile (the later tiles read this chunk from L1), not in one
    // burst that fills the miss queue.
    const bool last = b0 + kChunkBlocks >= nb;
    for (int g = 0; g < G; ++g) {
      const int64_t next = last ? g0 + G + g : g0 + g;
      if (next >= pt.g_end) break;
      tg.pf[g] = pt.ChunkStart(next, last ? 0 : b0 + kChunkBlocks);
      tg.pf_lines[g] = std::max<int64_t>(0, std::min<int64_t>(pf_bytes, pt.task_end - tg.pf[g])) / 64;
    }
    for (int64_t k = 0; k < n_tiles; ++k) {
      const int64_t t0 = tb0 + k * kTile;
      for (int g = 0; g < G; ++g) tg.acc[g] = acc + (g * nt + t0 - tb0) * 16;
      const int tt = static_cast<int>(std::min<int64_t>(kTile, tb0 + nt - t0));
      if constexpr (kSix) {
        if (unpack) {
          RunTile<G, kSubs, kBias>(tt, tg, BlockStride(QFormat::kQ6_K), nbc, *args.acts, t0, b0);
        } else {
          RunTile<G, kSubs, kBias, kNib, kPk>(tt, tg, pt.pstride, nbc, *args.acts, t0, b0, pt.shift);
        }
      } else if (expand) {  // kExpands<kPk> is false for the other kinds: one instance either way
        RunTile<G, kSubs, kBias, kNib, kPk, kExpands<kPk>>(tt, tg, pt.pstride, nbc, *args.acts, t0, b0, pt.shift);
      } else {
        RunTile<G, kSubs, kBias, kNib, kPk>(tt, tg, pt.pstride, nbc, *args.acts, t0, b0, pt.shift);
      }
      if (k == 0) std::fill_n(tg.pf_lines, G, 0);
    }
  }
  for (int g = 0; g < G; ++g) {
    const int64_t r0 = (g0 + g) * kRows;
    Avx512StoreRows(args, acc + g * nt * 16, tb0, nt, r0, static_cast<int>(std::min<int64_t>(kRows, pt.row_end - r0)),
                    stream);
  }
}

// QuantRowsT's loop nest over the packed panels (row_begin is a multiple of kRows), two row groups at a time
// (TileGroups; a task's odd last group alone) where the tokens fill a two-group tile.
template <int kSubs, bool kBias, bool kNib, ParamKind kPk>
void QuantRowsPackedT(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const MatrixView& w = *args.w;
  const int64_t nb = args.acts->nb, n_tokens = args.acts->n_tokens, pstride = PackedStride(w, args.fmt);
  float* acc = reinterpret_cast<float*>(scratch + AccOffset());
  const bool stream = StreamOutput(args);
  PackedTask pt{w.packed, nb, pstride, HeaderBytes(w, args.fmt), row_end, (row_end + kRows - 1) / kRows, nullptr,
                HeaderShift(w, args.fmt)};
  pt.task_end = pt.Group(pt.g_end).headers;
  for (int64_t tb0 = 0; tb0 < n_tokens; tb0 += kTokBlock) {
    const int64_t nt = std::min<int64_t>(kTokBlock, n_tokens - tb0);
    const int pair = nt >= kTokTileOf<2> ? 2 : 1;  // fewer tokens: one group's tile, with two chains per token
    for (int64_t g0 = row_begin / kRows; g0 < pt.g_end; g0 += pair) {
      if (pair == 2 && g0 + 1 < pt.g_end) {
        PackedGroupsPass<2, kSubs, kBias, kNib, kPk>(args, pt, g0, tb0, nt, acc, scratch, stream);
      } else {
        PackedGroupsPass<1, kSubs, kBias, kNib, kPk>(args, pt, g0, tb0, nt, acc, scratch, stream);
      }
    }
  }
}

template <int kSubs, bool kBias, bool kNib>
void QuantRowsPackedP(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  switch (PackedParams(*args.w, args.fmt)) {
    case ParamKind::kF16:
      return QuantRowsPackedT<kSubs, kBias, kNib, ParamKind::kF16>(args, row_begin, row_end, scratch);
    case ParamKind::kBF16:
      return QuantRowsPackedT<kSubs, kBias, kNib, ParamKind::kBF16>(args, row_begin, row_end, scratch);
    case ParamKind::kF16PerGroup:  // MLX only: one scale and a bias
      if constexpr (kSubs == 1 && kBias) {
        return QuantRowsPackedT<1, true, kNib, ParamKind::kF16PerGroup>(args, row_begin, row_end, scratch);
      } else {
        PARALLM_CHECK_MSG(false, "MLX parameters with another format's kernel");
      }
    case ParamKind::kBF16PerGroup:
      if constexpr (kSubs == 1 && kBias) {
        return QuantRowsPackedT<1, true, kNib, ParamKind::kBF16PerGroup>(args, row_begin, row_end, scratch);
      } else {
        PARALLM_CHECK_MSG(false, "MLX parameters with another format's kernel");
      }
    case ParamKind::kQ4K:  // Q4_K only: one scale, a bias, nibble codes
      if constexpr (kSubs == 1 && kBias && kNib) {
        return QuantRowsPackedT<1, true, true, ParamKind::kQ4K>(args, row_begin, row_end, scratch);
      } else {
        PARALLM_CHECK_MSG(false, "Q4_K parameters with another format's kernel");
      }
    default:
      return QuantRowsPackedT<kSubs, kBias, kNib, ParamKind::kF32>(args, row_begin, row_end, scratch);
  }
}

void QuantRowsPacked(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const QFormat fmt = args.fmt;
  if (fmt == QFormat::kQ6_K) {
    QuantRowsPackedT<2, false, false, ParamKind::kQ6K>(args, row_begin, row_end, scratch);
  } else if (Nibbles(*args.w, fmt)) {
    if (HasBias(fmt)) {
      QuantRowsPackedP<1, true, true>(args, row_begin, row_end, scratch);
    } else {
      QuantRowsPackedP<1, false, true>(args, row_begin, row_end, scratch);
    }
  } else if (HasBias(fmt)) {
    QuantRowsPackedP<1, true, false>(args, row_begin, row_end, scratch);
  } else {
    QuantRowsPackedP<1, false, false>(args, row_begin, row_end, scratch);
  }
  _mm_sfence();
}

// ---- f32 FMA path ---------------------------------------------------------------------------------------
// One output = one zmm accumulator over columns in steps of 16 (the tail masked with zeros), then a fixed
// horizontal sum: the same operations in a 1x1 tile as in a 4x4 one.
template <DType kType>
inline __m512 LoadW(const uint8_t* row, int64_t c, __mmask16 m) {
  if constexpr (kType == DType::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c);
  } else {
    __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + c);
    if constexpr (kType == DType::kF16) {
      return _mm512_cvtph_ps(h);
    } else {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
}

// Horizontal sum in a fixed order (halves, quarters, then within 128 bits).
inline float HSum(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
  __m128 x = _mm512_castps512_ps128(v);
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

template <DType kType, int R, int T>
void FloatTile(const FloatArgs& a, int64_t r0, int64_t t0) {
  const MatrixView& w = *a.w;
  const int64_t cols = w.cols;
  __m512 acc[R][T];
  const uint8_t* rows[R];
  const float* xs[T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) rows[r] = w.Row(r0 + r);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) xs[t] = a.x + (t0 + t) * cols;
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t c = 0; c < cols; c += 16) {
    const __mmask16 m = cols - c >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (cols - c)) - 1);
    __m512 xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xv[t] = _mm512_maskz_loadu_ps(m, xs[t] + c);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 wv = LoadW<kType>(rows[r], c, m);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.y_stride + r0 + r] = HSum(acc[r][t]);
}

struct FloatTiles {
  template <DType kType, int R, int T>
  static void Run(const FloatArgs& a, int64_t r0, int64_t t0) { FloatTile<kType, R, T>(a, r0, t0); }
};

void FloatRows(const FloatArgs& a, int64_t row_begin, int64_t row_end) {
  FloatRowsByTiles<FloatTiles, 4>(a, row_begin, row_end);
}

}  // namespace

// Streaming stores skip the read-for-ownership of each line of a large output (see StreamOutput).
void Avx512StoreRows(const QuantArgs& args, const float* acc, int64_t t0, int64_t nt, int64_t r0, int nrows,
                     bool stream) {
  const __mmask16 m = static_cast<__mmask16>((1u << nrows) - 1);
  for (int64_t t = 0; t < nt; ++t) {
    float* dst = args.y + (t0 + t) * args.y_stride + r0;
    const __m512 v = _mm512_load_ps(acc + t * 16);
    if (stream && nrows == kRows && (reinterpret_cast<uintptr_t>(dst) & 63) == 0) {
      _mm512_stream_ps(dst, v);
    } else {
      _mm512_mask_storeu_ps(dst, m, v);
    }
  }
}

int64_t Avx512PackedStride(const MatrixView& w, QFormat fmt) { return PackedStride(w, fmt); }
bool Avx512PackedNibbles(const MatrixView& w, QFormat fmt) { return Nibbles(w, fmt); }
int Avx512PackedParamKind(const MatrixView& w, QFormat fmt) { return static_cast<int>(PackedParams(w, fmt)); }
int Avx512PackedHeaderShift(const MatrixView& w, QFormat fmt) { return HeaderShift(w, fmt); }
int64_t Avx512PackedHeaderBytes(const MatrixView& w, QFormat fmt) { return HeaderBytes(w, fmt); }

const IsaKernels* Avx512Kernels() {
  static const IsaKernels k{kRows,      &CodeOffset, &ScratchBytes, &QuantizeActsAvx512, &QuantRows,
                            &FloatRows, &PackedBytes, &Pack,         &QuantRowsPacked,    kTokTileOf<2>};
  return &k;
}

}  // namespace parallm::mm

#pragma GCC diagnostic pop
#pragma GCC pop_options
