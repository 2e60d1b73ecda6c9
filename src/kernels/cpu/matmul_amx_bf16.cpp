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
// Loop nest per task (Rows): token block (up to 512) > column chunk (as wide as keeps the block's bf16 rows over it
// within 1.5 MiB of L2: all columns up to 1,536) > pair of row groups (its chunk dequantized into two panels) > pair
// of token tiles > 32-column blocks, 2 x 2 tiles of sums, stored to y after each chunk and loaded back for the next
// (the same sums in the same order). The activations come as token tiles (Bf16TileOffset: a tile load reads 1 KiB
// of consecutive lines); ragged tiles and row groups are stored through a buffer.
//
// GatedRows (GatedMlpBf16) pairs gate's row group g with up's instead, and turns each pair of tiles of sums into
// act(gate) * up in bf16 token tiles for down: at 512 tokens, writing the two f32 outputs (10 MiB each at 4,864 rows)
// and reading them back cost more than the tile multiplies (kernels_bench, the stores left out: 2.5-3x the rate).
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

#include "kernels/cpu/bf16_pair-inl.h"
#include "kernels/cpu/packed_params-inl.h"

constexpr int kRows = 16;            // weight rows per group (tile columns)
constexpr int kTok = 16;             // tokens per tile (tile rows)
constexpr int kPanelBlock = 1024;    // a dequantized block for 16 rows: 16 column pairs x 16 rows x 2 bf16
constexpr int64_t kABytes = int64_t{3} << 19;  // a token block's bf16 rows over a column chunk (1.5 MiB): in L2 for all row groups
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

// The size of each of the near-equal parts [0, n) splits into when no part may pass `most`.
int64_t EvenPart(int64_t n, int64_t most) {
  const int64_t parts = (n + most - 1) / most;
  return (n + parts - 1) / parts;
}

// Whether the packed blocks hold two scales, one per 16-column half: Q6_K's.
template <ParamKind kPk>
constexpr bool kTwoScales = kPk == ParamKind::kQ6K;

// Dequantizes the group's blocks [b0, b1) into `panel` (block b at (b - b0) * kPanelBlock): value =
// fma(code, scale, bias) (kBias) or code * scale, then bf16. Packed register j holds codes 4j..4j+3 of each row (a
// dword per row), so it gives tile rows 2j (columns 4j, 4j+1) and 2j + 1 (4j + 2, 4j + 3); registers 4..7 hold the
// second 16-column half (kTwoScales: the second scale's).
template <bool kBias, bool kSigned, ParamKind kPk>
void Dequantize(const PackedRows& g, int64_t b0, int64_t b1, uint8_t* panel) {
  for (int64_t b = b0; b < b1; ++b) {
    // The weights come from memory (a pass over them per token block): ask for a later block's while this one runs.
    if (b + kPrefetchBlocks < b1)
      for (int64_t off = 0; off < g.stride; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(g.base + (b + kPrefetchBlocks) * g.stride + off), _MM_HINT_T0);
    __m512i reg[8];
    g.LoadCodes(b, reg);
    const __m512 scale0 = LoadParams<kPk>(g.Params(b), 0, g.Header(b));
    __m512 bias = _mm512_setzero_ps(), scale1 = scale0;
    if constexpr (kBias) bias = LoadParams<kPk>(g.Params(b), 1, g.Header(b));
    if constexpr (kTwoScales<kPk>) scale1 = LoadParams<kPk>(g.Params(b), 1, g.Header(b));
    auto value = [&](__m512i v, int c, __m512 scale) {
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
    uint8_t* out = panel + (b - b0) * kPanelBlock;
    for (int j = 0; j < 8; ++j) {
      const __m512 scale = j < 4 ? scale0 : scale1;
      _mm512_store_si512(out + 128 * j, Bf16Pair(value(reg[j], 0, scale), value(reg[j], 1, scale)));
      _mm512_store_si512(out + 128 * j + 64, Bf16Pair(value(reg[j], 2, scale), value(reg[j], 3, scale)));
    }
  }
}

// Adds token tiles a[0] (and a[1]: kTwoTiles) x row groups panel[0], panel[1] over nb blocks into the sums in the
// tile registers.
template <bool kTwoTiles>
void Multiply(const uint16_t* const a[2], const uint8_t* const panel[2], int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    _tile_loadd(kA0, a[0] + b * kTok * 32, 64);
    _tile_loadd(kB0, panel[0] + b * kPanelBlock, 64);
    _tile_loadd(kB1, panel[1] + b * kPanelBlock, 64);
    _tile_dpbf16ps(kC00, kA0, kB0);
    _tile_dpbf16ps(kC01, kA0, kB1);
    if constexpr (kTwoTiles) {
      _tile_loadd(kA1, a[1] + b * kTok * 32, 64);
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
// The reverse, for a chunk that goes on from the sums the one before stored: the tile's part of y into a zeroed buf.
inline void GatherSums(const Bf16Args& a, float* buf, int64_t t0, int nt, int64_t r0, int nrows) {
  std::memset(buf, 0, kTok * kRows * 4);
  for (int i = 0; i < nt; ++i)
    std::memcpy(buf + i * kRows, a.y + OutRow(a, t0 + i) * a.y_stride + r0, static_cast<size_t>(nrows) * 4);
}
#define PARALLM_STORE_SUMS(tile, t0, nt, r0, nrows)                                 \
  if (Whole(a, t0, nt, nrows)) {                                                     \
    _tile_stored(tile, a.y + OutRow(a, t0) * a.y_stride + (r0), a.y_stride * 4);     \
  } else {                                                                           \
    _tile_stored(tile, buf, 64);                                                     \
    CopySums(a, buf, t0, nt, r0, nrows);                                             \
  }
// Sums start at zero in a tile's first column chunk, else from what the chunk before stored (a tile never stored:
// zero).
#define PARALLM_START_SUMS(tile, first, t0, nt, r0, nrows)                          \
  if ((first) || (nt) == 0 || (nrows) == 0) {                                        \
    _tile_zero(tile);                                                                \
  } else if (Whole(a, t0, nt, nrows)) {                                              \
    _tile_loadd(tile, a.y + OutRow(a, t0) * a.y_stride + (r0), a.y_stride * 4);      \
  } else {                                                                           \
    GatherSums(a, buf, t0, nt, r0, nrows);                                           \
    _tile_loadd(tile, buf, 64);                                                      \
  }

// Scratch: the two panels and two tiles of sums.
size_t ScratchBytes(int64_t cols) { return static_cast<size_t>(2 * (cols / 32) * kPanelBlock + 2 * kTok * kRows * 4); }

template <bool kBias, bool kSigned, ParamKind kPk>
void RowsT(const Bf16Args& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const MatrixView& w = *a.w;
  const int64_t cols = w.cols, nb = cols / 32, n = a.n_tokens;
  uint8_t* panels[2] = {scratch, scratch + nb * kPanelBlock};
  auto* buf = reinterpret_cast<float*>(scratch + 2 * nb * kPanelBlock);
  PackedRows g(w, a.fmt);
  auto tile = [&](int64_t t0, int64_t b) { return a.x + Bf16TileOffset(t0, b * 32, cols); };
  ConfigureTiles();
  const int64_t tok_block = (EvenPart(n, kMaxTokBlock) + 2 * kTok - 1) / (2 * kTok) * (2 * kTok);
  // Column chunks narrow enough that the token block's rows over one stay in L2 while every row group uses them: each
  // weight is dequantized once per token block, however wide the matrix.
  const int64_t chunk = EvenPart(nb, std::max<int64_t>(1, kABytes / (tok_block * 64)));
  for (int64_t tb0 = 0; tb0 < n; tb0 += tok_block) {
    const int64_t tb1 = std::min(n, tb0 + tok_block);
    for (int64_t k0 = 0; k0 < nb; k0 += chunk) {
      const int64_t k1 = std::min(nb, k0 + chunk);
      const bool first = k0 == 0;
      for (int64_t g0 = row_begin; g0 < row_end; g0 += 2 * kRows) {
        const int64_t r0[2] = {g0, g0 + kRows};
        const bool has_g1 = r0[1] < row_end;
        const int nrows[2] = {static_cast<int>(std::min<int64_t>(kRows, row_end - r0[0])),
                              has_g1 ? static_cast<int>(std::min<int64_t>(kRows, row_end - r0[1])) : 0};
        for (int j = 0; j < (has_g1 ? 2 : 1); ++j) {
          g.At(w.packed, r0[j] / kRows, nb);
          Dequantize<kBias, kSigned, kPk>(g, k0, k1, panels[j]);
        }
        const uint8_t* const panel[2] = {panels[0], panels[has_g1 ? 1 : 0]};
        for (int64_t t0 = tb0; t0 < tb1; t0 += 2 * kTok) {
          const bool has_t1 = t0 + kTok < tb1;
          const uint16_t* const rows[2] = {tile(t0, k0), has_t1 ? tile(t0 + kTok, k0) : nullptr};
          const int nt[2] = {static_cast<int>(std::min<int64_t>(kTok, tb1 - t0)),
                             has_t1 ? static_cast<int>(std::min<int64_t>(kTok, tb1 - t0 - kTok)) : 0};
          PARALLM_START_SUMS(kC00, first, t0, nt[0], r0[0], nrows[0]);
          PARALLM_START_SUMS(kC01, first, t0, nt[0], r0[1], nrows[1]);
          if (has_t1) {
            PARALLM_START_SUMS(kC10, first, t0 + kTok, nt[1], r0[0], nrows[0]);
            PARALLM_START_SUMS(kC11, first, t0 + kTok, nt[1], r0[1], nrows[1]);
            Multiply<true>(rows, panel, k1 - k0);
          } else {
            Multiply<false>(rows, panel, k1 - k0);
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
  }
  _tile_release();
}

template <bool kBias, bool kSigned, ParamKind kPk>
struct RowsK {
  static void Run(const Bf16Args& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
    RowsT<kBias, kSigned, kPk>(a, row_begin, row_end, scratch);
  }
};

// The kernel's template arguments for w.
struct KernelKind {
  bool bias, is_signed;
  ParamKind pk;
  bool operator==(const KernelKind&) const = default;
};
KernelKind KindOf(const MatrixView& w, QFormat fmt) {
  return {HasBias(fmt), Avx512Kernels()->code_offset(w, fmt) != 0, static_cast<ParamKind>(Avx512PackedParamKind(w, fmt))};
}

// PickKernel's instance of K for kind k, and the one for Q6_K's blocks (signed codes, two scales).
template <template <bool, bool, ParamKind> class K>
auto PickBf16Kernel(const KernelKind& k) -> decltype(&K<true, false, ParamKind::kF32>::Run) {
  if (!k.bias && k.is_signed && k.pk == ParamKind::kQ6K) return &K<false, true, ParamKind::kQ6K>::Run;
  return PickKernel<K>(k.bias, k.is_signed, k.pk);
}

void Rows(const Bf16Args& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const KernelKind k = KindOf(*a.w, a.fmt);
  const auto fn = PickBf16Kernel<RowsK>(k);
  PARALLM_CHECK(fn != nullptr);
  fn(a, row_begin, row_end, scratch);
}

// GatedMlpBf16's first half: the row groups of gate and up in pairs (gate's group g with up's group g), each pair of
// tiles of sums (a token tile's 16 rows of gate and of up) stored to two buffers, act(gate) * up over them (the very
// function the unfused path runs over whole outputs: elementwise, so the same bits) and then bf16 into h. Every
// weight is dequantized once per token block: as many tokens as keep their rows over all of gate's columns within
// kABytes (512 at 896 columns).
template <bool kBias, bool kSigned, ParamKind kPk>
void GatedRowsT(const GatedBf16Args& a, int64_t group_begin, int64_t group_end, uint8_t* scratch) {
  const int64_t cols = a.gate->cols, nb = cols / 32, n = a.n_tokens, F = a.gate->rows;
  uint8_t* panels[2] = {scratch, scratch + nb * kPanelBlock};
  auto* sums = reinterpret_cast<float*>(scratch + 2 * nb * kPanelBlock);  // gate's 16 x 16, then up's
  PackedRows pg(*a.gate, a.fmt), pu(*a.up, a.fmt);
  auto tile = [&](int64_t t0) { return a.x + Bf16TileOffset(t0, 0, cols); };
  // A token tile's sums of gate (tg) and up (tu) for row group g: act, bf16, into h's rows t0.. (all 16: a ragged
  // tile's padding rows have zero sums, so h's padding rows are defined too).
  auto out = [&](int64_t t0, int64_t g) {
    a.act(sums, sums + kTok * kRows, kTok * kRows, sums);
    for (int i = 0; i < kTok; ++i)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.h + Bf16TileOffset(t0 + i, g * kRows, F)),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(sums + i * kRows))));
  };
  ConfigureTiles();
  const int64_t tok_block = std::clamp<int64_t>(kABytes / (2 * cols) / (2 * kTok) * (2 * kTok), 2 * kTok, kMaxTokBlock);
  for (int64_t tb0 = 0; tb0 < n; tb0 += tok_block) {
    const int64_t tb1 = std::min(n, tb0 + tok_block);
    for (int64_t g = group_begin; g < group_end; ++g) {
      pg.At(a.gate->packed, g, nb);
      Dequantize<kBias, kSigned, kPk>(pg, 0, nb, panels[0]);
      pu.At(a.up->packed, g, nb);
      Dequantize<kBias, kSigned, kPk>(pu, 0, nb, panels[1]);
      const uint8_t* const panel[2] = {panels[0], panels[1]};
      for (int64_t t0 = tb0; t0 < tb1; t0 += 2 * kTok) {
        const bool has_t1 = t0 + kTok < tb1;
        const uint16_t* const rows[2] = {tile(t0), has_t1 ? tile(t0 + kTok) : nullptr};
        _tile_zero(kC00);
        _tile_zero(kC01);
        if (has_t1) {
          _tile_zero(kC10);
          _tile_zero(kC11);
          Multiply<true>(rows, panel, nb);
        } else {
          Multiply<false>(rows, panel, nb);
        }
        _tile_stored(kC00, sums, 64);
        _tile_stored(kC01, sums + kTok * kRows, 64);
        out(t0, g);
        if (has_t1) {
          _tile_stored(kC10, sums, 64);
          _tile_stored(kC11, sums + kTok * kRows, 64);
          out(t0 + kTok, g);
        }
      }
    }
  }
  _tile_release();
}

template <bool kBias, bool kSigned, ParamKind kPk>
struct GatedRowsK {
  static void Run(const GatedBf16Args& a, int64_t group_begin, int64_t group_end, uint8_t* scratch) {
    GatedRowsT<kBias, kSigned, kPk>(a, group_begin, group_end, scratch);
  }
};

bool GatedPairOk(const MatrixView& gate, const MatrixView& up, QFormat gate_fmt, QFormat up_fmt) {
  return gate_fmt == up_fmt && KindOf(gate, gate_fmt) == KindOf(up, up_fmt);
}

void GatedRows(const GatedBf16Args& a, int64_t group_begin, int64_t group_end, uint8_t* scratch) {
  const KernelKind k = KindOf(*a.gate, a.fmt);
  const auto fn = PickBf16Kernel<GatedRowsK>(k);
  PARALLM_CHECK(fn != nullptr && GatedPairOk(*a.gate, *a.up, a.fmt, a.fmt));
  fn(a, group_begin, group_end, scratch);
}

// x's `count` rows to bf16 (nearest even, denormals flushed: VCVTNE2PS2BF16, as ToBf16) as rows first.. of the token
// tiles (Bf16TileOffset).
void ToBf16Tiles(const float* x, int64_t cols, int64_t count, uint16_t* tiles, int64_t first) {
  for (int64_t i = 0; i < count; ++i) {
    const float* xr = x + i * cols;
    for (int64_t c = 0; c < cols; c += 32)
      _mm512_storeu_si512(tiles + Bf16TileOffset(first + i, c, cols),
                         reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(xr + c + 16),
                                                                      _mm512_loadu_ps(xr + c))));
  }
}

}  // namespace

const Bf16Kernels* AmxBf16Kernels() {
  static const Bf16Kernels k{&ScratchBytes, &ToBf16Tiles, &Rows, &GatedPairOk, &GatedRows};
  return &k;
}

}  // namespace parallm::mm

#undef PARALLM_STORE_SUMS
#undef PARALLM_START_SUMS
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
