// The bf16 formula on AMX-BF16 tiles: MatMul rows of a batch (a prompt's tokens) multiplied in bf16 with f32
// sums, the weights dequantized from the AVX-512 packed copy into a bf16 panel per row group, once per block of
// tokens. matmul_internal.h states the formula; ref::MatMulBf16 is its scalar twin.
//
// Why: the int8 formula's f32 tail (convert, scale x activation scale, fma, per token, row and 32-column block) runs
// on the vector units, which on the Sapphire Rapids kind do not work while the tile unit does (kernels_bench
// AmxProbe): a 32 x 32 x 32 block costs its tile side plus its tail. Here a tile multiply adds its products into
// the f32 sums itself, so the sums stay in the tile registers across all the columns and nothing runs per block but
// the loads and the multiplies; the dequantization costs about as much as one token's tail and is shared by every
// token of the block (up to 512), which is also why a few rows alone cost more here than on the int8 formula (1 row:
// ~5x; even at ~32, ahead from 64).
//
// Loop nest per task: token block (as many tokens as keep their bf16 rows within 1.5 MiB of L2) > pair of row groups
// (dequantized into two panels of nb x 1 KiB) > pair of token tiles > 32-column blocks, 2 x 2 tiles of sums. A ragged
// last token tile reads a zero-padded copy; ragged tiles and row groups are stored through a buffer.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/amx_tile_config.h"
#include "kernels/matmul_internal.h"
#include "util/check.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace parallm::mm {
namespace {

#include "kernels/cpu/packed_params-inl.h"

constexpr int kRows = 16;            // weight rows per group (tile columns)
constexpr int kTok = 16;             // tokens per tile (tile rows)
constexpr int kPanelBlock = 1024;    // a dequantized block for 16 rows: 16 column pairs x 16 rows x 2 bf16
constexpr int64_t kTokBlockBytes = int64_t{3} << 19;  // a token block's bf16 rows (1.5 MiB), read once per row group pair
constexpr int64_t kMaxTokBlock = 512;
constexpr int64_t kPrefetchBlocks = 6;  // how far ahead Dequantize asks for the packed weights

#define kC00 0
#define kC01 1
#define kC10 2
#define kC11 3
#define kA0 4
#define kA1 5
#define kB0 6
#define kB1 7

void ConfigureTiles() {
  amx::TileConfig c;
  for (int t = 0; t < 8; ++t) c.Set(t, 16, 64);
  amx::LoadTileConfig(c);
}

int64_t TokBlock(int64_t cols) {
  const int64_t fit = kTokBlockBytes / (2 * cols) / (2 * kTok) * (2 * kTok);
  return std::clamp<int64_t>(fit, 2 * kTok, kMaxTokBlock);
}

// Two vectors of 16 f32 (column c and c + 1 of 16 rows) as one tile row of the B operand: lane r holds row r's
// pair, column c in the low half. bf16 by VCVTNE2PS2BF16 (nearest even; denormals flushed), as ToBf16 does, then
// interleaved.
inline __m512i Bf16Pair(__m512 lo, __m512 hi) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                       5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}

// Dequantizes the group's nb blocks into `panel` (nb x kPanelBlock bytes, block b at b * kPanelBlock): value =
// fma(code, scale, bias) (kBias) or code * scale, then bf16. Packed register j holds codes 4j..4j+3 of each row (a
// dword per row), so it gives tile rows 2j (columns 4j, 4j+1) and 2j + 1 (4j + 2, 4j + 3).
template <bool kBias, bool kSigned, ParamKind kPk>
void Dequantize(const PackedRows& g, int64_t nb, uint8_t* panel) {
  for (int64_t b = 0; b < nb; ++b) {
    // The weights come from memory (a pass over them per token block): ask for a later block's while this one runs.
    if (b + kPrefetchBlocks < nb)
      for (int64_t off = 0; off < g.stride; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(g.base + (b + kPrefetchBlocks) * g.stride + off), _MM_HINT_T0);
    __m512i reg[8];
    g.LoadCodes(b, reg);
    const __m512 scale = LoadParams<kPk>(g.Params(b), 0, g.Header(b));
    __m512 bias = _mm512_setzero_ps();
    if constexpr (kBias) bias = LoadParams<kPk>(g.Params(b), 1, g.Header(b));
    auto value = [&](__m512i v, int c) {
      __m512i code;
      if constexpr (kSigned) {
        code = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * c), 24);
      } else {
        code = _mm512_and_si512(_mm512_srli_epi32(v, 8 * c), _mm512_set1_epi32(0xFF));
      }
      const __m512 f = _mm512_cvtepi32_ps(code);
      if constexpr (kBias) return _mm512_fmadd_ps(f, scale, bias);
      return _mm512_mul_ps(f, scale);
    };
    uint8_t* out = panel + b * kPanelBlock;
    for (int j = 0; j < 8; ++j) {
      _mm512_store_si512(out + 128 * j, Bf16Pair(value(reg[j], 0), value(reg[j], 1)));
      _mm512_store_si512(out + 128 * j + 64, Bf16Pair(value(reg[j], 2), value(reg[j], 3)));
    }
  }
}

// The sums of token tiles a[0] (and a[1]: kTwoTiles) x row groups panel[0], panel[1] over all nb blocks, left in
// the tile registers.
template <bool kTwoTiles>
void Multiply(const uint16_t* const a[2], int64_t a_stride_bytes, const uint8_t* const panel[2], int64_t nb) {
  _tile_zero(kC00);
  _tile_zero(kC01);
  if constexpr (kTwoTiles) {
    _tile_zero(kC10);
    _tile_zero(kC11);
  }
  for (int64_t b = 0; b < nb; ++b) {
    _tile_loadd(kA0, a[0] + b * 32, a_stride_bytes);
    _tile_loadd(kB0, panel[0] + b * kPanelBlock, 64);
    _tile_loadd(kB1, panel[1] + b * kPanelBlock, 64);
    _tile_dpbf16ps(kC00, kA0, kB0);
    _tile_dpbf16ps(kC01, kA0, kB1);
    if constexpr (kTwoTiles) {
      _tile_loadd(kA1, a[1] + b * 32, a_stride_bytes);
      _tile_dpbf16ps(kC10, kA1, kB0);
      _tile_dpbf16ps(kC11, kA1, kB1);
    }
  }
}

// Sums of tokens [t0, t0 + nt) x rows [r0, r0 + nrows) go straight into y when the tile is whole and its tokens'
// outputs are consecutive rows of y; else the tile is stored into `buf` (16 x 16 f32) and its part copied row by row.
// (A macro: GCC's tile intrinsics paste the register number.)
inline int64_t OutRow(const Bf16Args& a, int64_t t) { return a.y_rows == nullptr ? t : a.y_rows[t]; }
inline bool Whole(const Bf16Args& a, int64_t t0, int nt, int nrows) {
  return nt == kTok && nrows == kRows && OutRow(a, t0 + kTok - 1) - OutRow(a, t0) == kTok - 1;
}
inline void CopySums(const Bf16Args& a, const float* buf, int64_t t0, int nt, int64_t r0, int nrows) {
  for (int i = 0; i < nt; ++i)
    std::memcpy(a.y + OutRow(a, t0 + i) * a.y_stride + r0, buf + i * kRows, static_cast<size_t>(nrows) * 4);
}
#define PARALLM_STORE_SUMS(tile, t0, nt, r0, nrows)                                 \
  if (Whole(a, t0, nt, nrows)) {                                                     \
    _tile_stored(tile, a.y + OutRow(a, t0) * a.y_stride + (r0), a.y_stride * 4);     \
  } else {                                                                           \
    _tile_stored(tile, buf, 64);                                                     \
    CopySums(a, buf, t0, nt, r0, nrows);                                             \
  }

// Scratch: the two panels, the store buffer, the padded ragged token tile.
size_t ScratchBytes(int64_t cols) {
  return static_cast<size_t>(2 * (cols / 32) * kPanelBlock + kTok * kRows * 4 + kTok * cols * 2);
}

template <bool kBias, bool kSigned, ParamKind kPk>
void RowsT(const Bf16Args& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const MatrixView& w = *a.w;
  const int64_t cols = w.cols, nb = cols / 32, n = a.n_tokens;
  uint8_t* panels[2] = {scratch, scratch + nb * kPanelBlock};
  auto* buf = reinterpret_cast<float*>(scratch + 2 * nb * kPanelBlock);
  auto* pad = reinterpret_cast<uint16_t*>(scratch + 2 * nb * kPanelBlock + kTok * kRows * 4);
  PackedRows g(w, a.fmt);
  // A ragged last token tile reads its rows from a zero-padded copy (the padding's sums are never stored).
  const int64_t ragged_t0 = n / kTok * kTok;
  if (ragged_t0 < n) {
    std::memset(pad, 0, static_cast<size_t>(kTok * cols * 2));
    std::memcpy(pad, a.x + ragged_t0 * cols, static_cast<size_t>((n - ragged_t0) * cols * 2));
  }
  auto tile_rows = [&](int64_t t0) { return t0 == ragged_t0 ? pad : a.x + t0 * cols; };
  ConfigureTiles();
  const int64_t tok_block = TokBlock(cols);
  for (int64_t tb0 = 0; tb0 < n; tb0 += tok_block) {
    const int64_t tb1 = std::min(n, tb0 + tok_block);
    for (int64_t g0 = row_begin; g0 < row_end; g0 += 2 * kRows) {
      const int64_t r0[2] = {g0, g0 + kRows};
      const bool has_g1 = r0[1] < row_end;
      const int nrows[2] = {static_cast<int>(std::min<int64_t>(kRows, row_end - r0[0])),
                            has_g1 ? static_cast<int>(std::min<int64_t>(kRows, row_end - r0[1])) : 0};
      for (int j = 0; j < (has_g1 ? 2 : 1); ++j) {
        g.At(w.packed, r0[j] / kRows, nb, kPk);
        Dequantize<kBias, kSigned, kPk>(g, nb, panels[j]);
      }
      const uint8_t* const panel[2] = {panels[0], panels[has_g1 ? 1 : 0]};
      for (int64_t t0 = tb0; t0 < tb1; t0 += 2 * kTok) {
        const bool has_t1 = t0 + kTok < tb1;
        const uint16_t* const rows[2] = {tile_rows(t0), has_t1 ? tile_rows(t0 + kTok) : nullptr};
        const int nt[2] = {static_cast<int>(std::min<int64_t>(kTok, tb1 - t0)),
                           has_t1 ? static_cast<int>(std::min<int64_t>(kTok, tb1 - t0 - kTok)) : 0};
        if (has_t1) {
          Multiply<true>(rows, cols * 2, panel, nb);
        } else {
          Multiply<false>(rows, cols * 2, panel, nb);
        }
        PARALLM_STORE_SUMS(kC00, t0, nt[0], r0[0], nrows[0]);
        if (has_g1) {
          PARALLM_STORE_SUMS(kC01, t0, nt[0], r0[1], nrows[1]);
        }
        if (has_t1) {
          PARALLM_STORE_SUMS(kC10, t0 + kTok, nt[1], r0[0], nrows[0]);
        }
        if (has_t1 && has_g1) {
          PARALLM_STORE_SUMS(kC11, t0 + kTok, nt[1], r0[1], nrows[1]);
        }
      }
    }
  }
  _tile_release();
}

template <bool kBias, bool kSigned, ParamKind kPk>
struct RowsK {
  static void Run(const Bf16Args& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
    RowsT<kBias, kSigned, kPk>(a, row_begin, row_end, scratch);
  }
};

void Rows(const Bf16Args& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const auto pk = static_cast<ParamKind>(Avx512PackedParamKind(*a.w, a.fmt));
  const auto fn = PickKernel<RowsK>(HasBias(a.fmt), Avx512Kernels()->code_offset(*a.w, a.fmt) != 0, pk);
  PARALLM_CHECK(fn != nullptr);
  fn(a, row_begin, row_end, scratch);
}

// x rows [t0, t1) to bf16 (nearest even, denormals flushed: VCVTNEPS2BF16, as ToBf16).
void ToBf16Rows(const float* x, int64_t cols, int64_t t0, int64_t t1, uint16_t* out) {
  for (int64_t t = t0; t < t1; ++t) {
    const float* xr = x + t * cols;
    uint16_t* o = out + t * cols;
    for (int64_t c = 0; c < cols; c += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + c),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(xr + c))));
  }
}

}  // namespace

const Bf16Kernels* AmxBf16Kernels() {
  static const Bf16Kernels k{&ScratchBytes, &ToBf16Rows, &Rows};
  return &k;
}

}  // namespace parallm::mm

#undef PARALLM_STORE_SUMS
#undef kC00
#undef kC01
#undef kC10
#undef kC11
#undef kA0
#undef kA1
#undef kB0
#undef kB1

#pragma GCC diagnostic pop
#pragma GCC pop_options
