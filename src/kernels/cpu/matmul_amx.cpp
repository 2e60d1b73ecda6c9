// The AMX path: batched int8 MatMul on Intel AMX tiles (AMX-INT8, Sapphire Rapids and later), reading the
// weights the AVX-512 path repacked at load; everything else (activation quantization, unpacked weights,
// float weights, batches under kMinTokens, Q6_K) is the AVX-512 path's.
//
// Why it pays: one tile multiply (16 tokens x 16 rows x 32 columns = 8192 multiply-adds) costs about what 16
// vpdpbusd do (1024), so for batches the int8 products nearly vanish and what remains is the f32 tail of the
// formula (cvt, scale * dx, fma per token, row and block), which now bounds the kernel (1.5-1.9x the AVX-512 path
// at 64 tokens). The AVX-512 panel of a block (8 x 64 bytes: register j holds codes 4j..4j+3 of each of 16
// rows, lane = row) is already the tile layout AMX wants for its right operand (K/4 rows of 16 columns x 4
// bytes), and the quantized activations ([token][cols] int8) are its left operand as they are, so nothing is
// repacked again.
//
// Loop nest per task: token block (256) > pair of row groups > pair of token tiles (a 2 x 2 block of tiles) >
// 32-column blocks, pipelined (Quad): while the tile unit multiplies a block, the vector units run the tails of
// blocks stored a step earlier, two blocks per pass over the accumulators, convert the codes of a later block and
// prefetch the weights of one further on. An odd last token tile runs alone (half the tile work), and a ragged one
// reads a zero-padded copy of its activations; a batch under 16 tokens is one tile as high as the batch.
//
// What bounds it (Sapphire Rapids kind, 2026-12-03): the tile instructions and the vector arithmetic do not run at
// the same time. kernels_bench AmxProbe/* times one block's tile side and tail alone and together: ~61 and ~59 ns,
// and their sum together (~124; ~105 when each tile's ops are followed by its own tail). In this kernel at 64
// tokens, taking out the tails or the tile instructions (results wrong, timing only) leaves about half the time
// each; taking out the code conversion, the prefetch, or moving the activation tiles into L1 changes nothing
// measurable. So the time a block is the tile side plus the tail, and what would cut it is fewer tile operations
// or fewer f32 operations per multiply-add: blocks wider than 32 columns where the format's scales allow (MLX
// groups of 64 with activations quantized per 64: AmxProbe/tiles/k64 does twice the multiply-adds for ~1.3x the tile
// side, and the tails would halve), which changes the arithmetic of every path.
//
// Bit-exactness: a tile gives C[t][i] = sum qx * code exactly in int32, with the codes as signed bytes (Q8_0, Q4_0:
// the packed code + offset converted back) or unsigned ones (Q4_K, MLX: no offset): the same block dot idot every
// path computes. The f32 tail then runs per lane exactly as in matmul_avx512.cpp (a C row is one
// token's 16 rows, one per lane), blocks in order, so this path equals the scalar twin bit for bit, whatever
// the batch.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/amx_tile_config.h"
#include "kernels/matmul_internal.h"
#include "util/check.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace parallm::mm {
namespace {

#include "kernels/cpu/packed_params-inl.h"

constexpr int kRows = 16;        // weight rows per group (tile columns)
constexpr int kTok = 16;         // tokens per tile (tile rows)
constexpr int kCodeBytes = 512;  // a block's codes for 16 rows (8 x 64 bytes)
constexpr int kTokBlock = 256;   // tokens per pass over the rows (bounds the scratch, keeps activations in L2)
// How many blocks ahead of the tile multiplies the weights are prefetched: a decode batch reads each weight once,
// from memory, and a step of the pipeline is a few hundred cycles.
constexpr int64_t kPrefetchBlocks = 4;
// Batches smaller than this run the AVX-512 kernel. A smaller batch is one tile of that height (ConfigureTiles), but
// each block still loads, multiplies and stores a whole weight tile per row group for its few tokens: in
// kernels_bench (MoE experts' groups, 1 and 2 threads) 12 tokens ran faster here, 8 about even, 4 at ~0.65x.
constexpr int64_t kMinTokens = 12;

// Tile registers: a 2 x 2 block of products per 32-column block, two token tiles (A0, A1) by two row groups
// (B0, B1) into C00..C11. Four independent multiplies keep the tile unit busy through each one's latency, and
// every A and B load feeds two of them. (Macros, not constants: GCC's tile intrinsics paste the register
// number into the assembly text.)
#define kC00 0
#define kC01 1
#define kC10 2
#define kC11 3
#define kA0 4
#define kA1 5
#define kB0 6
#define kB1 7

// Token tiles (A) and products (C) tok_rows high: 16, a ragged last token tile then reading a zero-padded copy of
// its activations, or a batch's whole token count when it is under 16 (one tile, nothing padded or multiplied twice).
void ConfigureTiles(int tok_rows) {
  amx::TileConfig c;
  for (int t : {kC00, kC01, kC10, kC11}) c.Set(t, tok_rows, 64);
  c.Set(kA0, tok_rows, 32);
  c.Set(kA1, tok_rows, 32);
  c.Set(kB0, 8, 64);
  c.Set(kB1, 8, 64);
  amx::LoadTileConfig(c);
}

// Where block b's codes (as the B operand: 8 rows of 64 bytes) and f32 parameters are for one row group.
// The packed codes are unsigned bytes, code + offset (the AVX-512 kernel's vpdpbusd needs them unsigned).
// Nibble-packed blocks must be unpacked anyway, and the offset is taken off then; 8-bit blocks with an offset
// (Q8_0) are converted too (8 subtractions a block and row group, shared by the quad's two token tiles, where the
// int correction in the tail cost one addition per token, row group and block); 8-bit blocks without one are read in
// place.
struct GroupPanel : PackedRows {
  uint8_t* unpack = nullptr;  // 2 x 512 bytes: converted blocks are written here (block b at (b & 1) * 512)

  // Block b's codes as tile bytes (see above): in place, or converted by Unpack(b), which must run before and,
  // since a tile load waits for the vector stores it reads to commit, best a block ahead of this call.
  const uint8_t* Codes(int64_t b) const {
    return code_bytes == kCodeBytes && offset == 0 ? base + b * stride : unpack + (b & 1) * kCodeBytes;
  }
  // Block b's bytes (codes and parameters; not its header) into L1 ahead of Unpack and the tails.
  void Prefetch(int64_t b) const {
    const uint8_t* p = base + b * stride;
    for (int64_t off = 0; off < stride; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
  }
  // 8-bit codes with an offset (Q8_0's code + 128) lose it, so the signed-by-signed multiply gives the block dot
  // without a correction; nibble-packed codes are spread to bytes.
  void Unpack(int64_t b) const {
    if (code_bytes == kCodeBytes && offset == 0) return;  // read in place
    __m512i reg[8];
    LoadCodes(b, reg);
    uint8_t* out = unpack + (b & 1) * kCodeBytes;
    for (int k = 0; k < 8; ++k) _mm512_store_si512(out + 64 * k, reg[k]);
  }
};

// One token tile's activations: its int8 rows (A operand) and its parameters block-major ([b][16 tokens]), so
// the tail reads token i of block b at a fixed offset. Rows past the tile's tokens (ragged tile) are zero in
// the padded copy; the tails skip them, so their parameters are not filled.
struct TileActs {
  const int8_t* q = nullptr;  // row i at q + i * cols
  float* d = nullptr;         // [nb][16]
  float* ds = nullptr;        // [nb][16], biased formats only

  void Fill(const QuantizedActs& a, int64_t t0, int nt, bool bias) {
    for (int i = 0; i < nt; ++i) {
      const int64_t t = t0 + i;
      for (int64_t b = 0; b < a.nb; ++b) {
        d[b * kTok + i] = a.d[t * a.nb + b];
        if (bias) ds[b * kTok + i] = a.ds[t * a.nb + b];
      }
    }
  }
};

// The f32 tail for blocks [b, b + kBlocks) of one product tile: c[j] holds block b + j's dots (row i = token i of
// the tile, lane = row of the group), acc the tile's accumulators for the group's 16 rows; tokens [0, n) of the
// tile (the rest of a ragged tile is never stored). Two blocks at once load and store each accumulator once for
// both; the operations on it are the same, blocks in order. kFirst: the accumulators start at 0 (not read).
template <bool kBias, ParamKind kPk, int kBlocks, bool kFirst>
inline __attribute__((always_inline)) void Tail(const int32_t* const* c, const TileActs& ta, int64_t b,
                                                const GroupPanel& g, float* acc, int n) {
  __m512 scale[kBlocks], bias[kBlocks];
  const float* d[kBlocks];
  const float* ds[kBlocks];
#pragma GCC unroll 2
  for (int j = 0; j < kBlocks; ++j) {
    scale[j] = LoadParams<kPk>(g.Params(b + j), 0, g.Header(b + j));
    if constexpr (kBias) bias[j] = LoadParams<kPk>(g.Params(b + j), 1, g.Header(b + j));
    d[j] = ta.d + (b + j) * kTok;
    ds[j] = ta.ds + (b + j) * kTok;
  }
#pragma GCC unroll 16
  for (int i = 0; i < kTok; ++i) {
    if (i == n) break;
    __m512 f = kFirst ? _mm512_setzero_ps() : _mm512_load_ps(acc + 16 * i);
#pragma GCC unroll 2
    for (int j = 0; j < kBlocks; ++j) {
      f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[j] + 16 * i)),
                          _mm512_mul_ps(scale[j], _mm512_set1_ps(d[j][i])), f);
      if constexpr (kBias) f = _mm512_fmadd_ps(bias[j], _mm512_set1_ps(ds[j][i]), f);
    }
    _mm512_store_ps(acc + 16 * i, f);
  }
}

// All blocks for token tiles t[0], t[1] x row groups g[0], g[1]. kTwoTiles false: token tile t[0] alone (half the
// loads, multiplies and stores: a batch of one tile, or the odd last tile of a larger one). A missing second group
// repeats the first in the tile registers, and its tails and outputs are skipped.
template <bool kBias, bool kSigned, ParamKind kPk, bool kTwoTiles>
void Quad(const QuantArgs& args, const TileActs* t[2], int64_t t0[2], int nt[2],
          const GroupPanel* g[2], int64_t r0[2], int nrows[2], bool has_g1, int32_t* cbuf, float* acc, bool stream) {
  const int64_t nb = args.acts->nb, cols = args.acts->cols;
// (A signed activations; B signed or unsigned codes, see GroupPanel.)
#define Dp(c, a, b)           \
  if constexpr (kSigned) {    \
    _tile_dpbssd(c, a, b);    \
  } else {                    \
    _tile_dpbsud(c, a, b);    \
  }
  auto issue = [&](int64_t b) {
    _tile_loadd(kA0, t[0]->q + b * 32, cols);
    if constexpr (kTwoTiles) _tile_loadd(kA1, t[1]->q + b * 32, cols);
    _tile_loadd(kB0, g[0]->Codes(b), 64);
    _tile_loadd(kB1, g[1]->Codes(b), 64);
    _tile_zero(kC00);
    _tile_zero(kC01);
    Dp(kC00, kA0, kB0);
    Dp(kC01, kA0, kB1);
    if constexpr (kTwoTiles) {
      _tile_zero(kC10);
      _tile_zero(kC11);
      Dp(kC10, kA1, kB0);
      Dp(kC11, kA1, kB1);
    }
  };
  // Tails of blocks [b, b + kBlocks), whose sums sit in buffers (b + j) & 3.
  auto tails = [&]<int kBlocks, bool kFirst>(int64_t b) {
    const int32_t* c[kBlocks];
    for (int j = 0; j < (kTwoTiles ? 2 : 1); ++j) {
      for (int k = 0; k < kBlocks; ++k) c[k] = cbuf + ((b + k) & 3) * 1024 + 512 * j;  // token tile j
      Tail<kBias, kPk, kBlocks, kFirst>(c, *t[j], b, *g[0], acc + 512 * j, nt[j]);
      if (!has_g1) continue;
      for (int k = 0; k < kBlocks; ++k) c[k] += 256;
      Tail<kBias, kPk, kBlocks, kFirst>(c, *t[j], b, *g[1], acc + 512 * j + 256, nt[j]);
    }
  };
  // Tails of blocks [b, b + n), n 1 or 2; block 0's start the accumulators.
  auto tails_from = [&](int64_t b, int n) {
    if (n == 2 && b == 0) {
      tails.template operator()<2, true>(b);
    } else if (n == 2) {
      tails.template operator()<2, false>(b);
    } else if (b == 0) {
      tails.template operator()<1, true>(b);
    } else {
      tails.template operator()<1, false>(b);
    }
  };
  // A pipeline over the blocks: in step b the tile unit multiplies block b + 1, block b's sums are stored, and the
  // vector units run the tails of the two blocks before it when both are stored (a step earlier at least: a vector
  // load waits for the tile store it reads to commit) and unpack block b + 2's codes. Each accumulator still sees
  // its blocks in order.
  for (int j = 0; j < 2; ++j) {
    g[j]->Unpack(0);
    if (nb > 1) g[j]->Unpack(1);
  }
  issue(0);
  int64_t tailed = 0;  // blocks whose tails have run
  for (int64_t b = 0; b < nb; ++b) {
    int32_t* c = cbuf + (b & 3) * 1024;
    _tile_stored(kC00, c, 64);
    _tile_stored(kC01, c + 256, 64);
    if constexpr (kTwoTiles) {
      _tile_stored(kC10, c + 512, 64);
      _tile_stored(kC11, c + 768, 64);
    }
    if (b + 1 < nb) issue(b + 1);
    if (b - tailed >= 2) {
      tails_from(tailed, 2);
      tailed += 2;
    }
    if (b + 2 < nb)
      for (int j = 0; j < 2; ++j) g[j]->Unpack(b + 2);
    if (b + kPrefetchBlocks < nb)
      for (int j = 0; j < 2; ++j) g[j]->Prefetch(b + kPrefetchBlocks);
  }
  if (tailed < nb) tails_from(tailed, static_cast<int>(nb - tailed));
#undef Dp
  Avx512StoreRows(args, acc, t0[0], nt[0], r0[0], nrows[0], stream);
  if (has_g1) Avx512StoreRows(args, acc + 256, t0[0], nt[0], r0[1], nrows[1], stream);
  if (kTwoTiles) Avx512StoreRows(args, acc + 512, t0[1], nt[1], r0[0], nrows[0], stream);
  if (kTwoTiles && has_g1) Avx512StoreRows(args, acc + 768, t0[1], nt[1], r0[1], nrows[1], stream);
}

// Scratch: tile sums (4 x 4 KiB), unpack buffers (2 x 1 KiB), accumulators (4 KiB), the padded ragged tile
// (16 x cols), then each token tile's parameters (2 x nb x 16 x 4 bytes per tile).
constexpr size_t kSumsBytes = 4 * 4096, kUnpackBytes = 2 * 2 * kCodeBytes, kAccBytes = 4096;
constexpr size_t kFixedScratch = kSumsBytes + kUnpackBytes + kAccBytes;
size_t ScratchBytes(int64_t n_tokens, int64_t cols) {
  const int64_t tiles = (std::min<int64_t>(n_tokens, kTokBlock) + kTok - 1) / kTok;
  const size_t amx = kFixedScratch + static_cast<size_t>(kTok * cols + tiles * 2 * (cols / 32) * kTok * 4);
  return std::max(Avx512Kernels()->scratch_bytes(n_tokens, cols), amx);
}

template <bool kBias, bool kSigned, ParamKind kPk>
void RowsT(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const MatrixView& w = *args.w;
  const QuantizedActs& a = *args.acts;
  const int64_t nb = a.nb, n_tokens = a.n_tokens, cols = a.cols;
  const bool stream = StreamOutput(args);
  auto* cbuf = reinterpret_cast<int32_t*>(scratch);
  uint8_t* unpack = scratch + kSumsBytes;
  auto* acc = reinterpret_cast<float*>(scratch + kSumsBytes + kUnpackBytes);
  auto* pad = reinterpret_cast<int8_t*>(scratch + kFixedScratch);
  auto* params = reinterpret_cast<uint8_t*>(pad + kTok * cols);
  GroupPanel panels[2];
  for (int j = 0; j < 2; ++j) {
    static_cast<PackedRows&>(panels[j]) = PackedRows(w, args.fmt);
    panels[j].unpack = unpack + j * 2 * kCodeBytes;
  }
  // Under 16 tokens: one tile as high as the batch, read in place.
  const int tok_rows = static_cast<int>(std::min<int64_t>(kTok, n_tokens));
  ConfigureTiles(tok_rows);
  TileActs tiles[kTokBlock / kTok];
  for (int64_t tb0 = 0; tb0 < n_tokens; tb0 += kTokBlock) {
    const int64_t nt_blk = std::min<int64_t>(kTokBlock, n_tokens - tb0);
    const int n_tiles = static_cast<int>((nt_blk + kTok - 1) / kTok);
    for (int k = 0; k < n_tiles; ++k) {
      TileActs& ta = tiles[k];
      const size_t one = static_cast<size_t>(nb * kTok * 4);
      ta.d = reinterpret_cast<float*>(params + (2 * k + 0) * one);
      ta.ds = reinterpret_cast<float*>(params + (2 * k + 1) * one);
      const int64_t t0 = tb0 + k * kTok;
      const int nt = static_cast<int>(std::min<int64_t>(kTok, tb0 + nt_blk - t0));
      ta.Fill(a, t0, nt, kBias);
      ta.q = a.q + t0 * cols;
      if (nt < tok_rows) {
        std::memcpy(pad, ta.q, static_cast<size_t>(nt * cols));
        std::memset(pad + nt * cols, 0, static_cast<size_t>((kTok - nt) * cols));
        ta.q = pad;
      }
    }
    for (int64_t g0 = row_begin; g0 < row_end; g0 += 2 * kRows) {
      int64_t r0[2] = {g0, g0 + kRows};
      int nrows[2] = {static_cast<int>(std::min<int64_t>(kRows, row_end - g0)), 0};
      const bool has_g1 = r0[1] < row_end;
      if (has_g1) nrows[1] = static_cast<int>(std::min<int64_t>(kRows, row_end - r0[1]));
      for (int j = 0; j < 2; ++j) panels[j].At(w.packed, r0[has_g1 ? j : 0] / kRows, nb);
      const GroupPanel* g[2] = {&panels[0], &panels[1]};
      for (int k = 0; k < n_tiles; k += 2) {
        const bool has_t1 = k + 1 < n_tiles;
        const TileActs* t[2] = {&tiles[k], &tiles[has_t1 ? k + 1 : k]};
        int64_t t0[2] = {tb0 + k * kTok, tb0 + (k + 1) * kTok};
        int nt[2] = {static_cast<int>(std::min<int64_t>(kTok, tb0 + nt_blk - t0[0])), 0};
        if (has_t1) nt[1] = static_cast<int>(std::min<int64_t>(kTok, tb0 + nt_blk - t0[1]));
        if (has_t1) {
          Quad<kBias, kSigned, kPk, true>(args, t, t0, nt, g, r0, nrows, has_g1, cbuf, acc, stream);
        } else {
          Quad<kBias, kSigned, kPk, false>(args, t, t0, nt, g, r0, nrows, has_g1, cbuf, acc, stream);
        }
      }
    }
  }
  _tile_release();
  _mm_sfence();  // streaming stores, if any, are visible before the task reports done
}

template <bool kBias, bool kSigned, ParamKind kPk>
struct RowsK {
  static void Run(const QuantArgs& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
    RowsT<kBias, kSigned, kPk>(a, row_begin, row_end, scratch);
  }
};

void QuantRowsPacked(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  // Q6_K's two scales per block would need half-height tiles; it stays on AVX-512 with the small batches.
  if (args.acts->n_tokens < kMinTokens || SubBlocks(args.fmt) != 1) {
    Avx512Kernels()->quant_rows_packed(args, row_begin, row_end, scratch);
    return;
  }
  const auto pk = static_cast<ParamKind>(Avx512PackedParamKind(*args.w, args.fmt));
  const auto fn = PickKernel<RowsK>(HasBias(args.fmt), Avx512Kernels()->code_offset(*args.w, args.fmt) != 0, pk);
  PARALLM_CHECK(fn != nullptr);
  fn(args, row_begin, row_end, scratch);
}

}  // namespace

const IsaKernels* AmxKernels() {
  static const IsaKernels k = [] {
    IsaKernels k = *Avx512Kernels();
    k.scratch_bytes = &ScratchBytes;
    k.quant_rows_packed = &QuantRowsPacked;
    return k;
  }();
  return &k;
}

}  // namespace parallm::mm

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
