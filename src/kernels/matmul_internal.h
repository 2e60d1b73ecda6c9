// Internals shared by the MatMul paths (scalar twin, AVX2, AVX-VNNI, AVX-512, AMX, NEON): activation quantization,
// per-block weight parameters, and the per-ISA entry points that matmul.cpp dispatches to.
//
// The int8 path, in one formula. For token t, weight row r and 32-column block b, with the activation
// block quantized as x_i ~= dx * qx_i (qx_i in [-127, 127], dx = amax / 127, S = sum qx_i, ds = dx * S):
//   idot = sum_i code_i * qx_i                    exact int32, weight codes after their format offset
//   acc  = fma(float(idot), scale * dx, acc)      Q6_K does this per 16-column half, each with its scale
//   acc  = fma(bias, ds, acc)                     Q4_K (bias = -dmin * m) and MLX (bias) only
// blocks in increasing b, acc starting at 0, Y[t, r] = acc. Every path performs exactly these f32 operations
// for every (t, r) whatever the batch and tiling (the SIMD paths keep one row per vector lane, so a lane's
// operations are these scalar ones), so all paths, batch sizes and thread splits agree bit for bit.
//
// The bf16 formula, for the rows a caller asks for (MatMul's bf16_rows: a prompt's tokens) where Bf16RowsEnabled().
// Each weight is dequantized to f32, w = fma(code, scale, bias) (Q4_K, MLX) or code * scale (Q8_0, Q4_0; Q6_K: the
// scale of the weight's 16-column half), with the codes and parameters above, and it and x are rounded to bf16
// (ToBf16). Per 32-column block b, the even columns' products are summed in order in f32 (se), the odd ones' likewise
// (so), and acc = acc + (se + so), blocks in increasing b from acc = 0 (sums and products with denormals flushed to
// zero). That is what one AMX-BF16 tile multiply does per 32 columns (TDPBF16PS on the Sapphire Rapids kind, checked
// against this formula bit for bit on random operands), so a 32-column block costs two tile operations and no f32
// tail; ref::MatMulBf16 is its twin.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "tensor/matrix.h"

namespace parallm::mm {

// The weight formats of the int8 path.
enum class QFormat : uint8_t { kQ8_0, kQ4_0, kQ4_K, kQ6_K, kMlx };

// Returns false for float weights (F32/F16/BF16), which take the f32 FMA path.
bool QuantFormatOf(const MatrixView& w, QFormat* fmt);
inline bool HasBias(QFormat f) { return f == QFormat::kQ4_K || f == QFormat::kMlx; }
inline int SubBlocks(QFormat f) { return f == QFormat::kQ6_K ? 2 : 1; }  // int sums per 32-column block

// Activation rows quantized to blocks of 32 int8 (layout [token][...], all arrays owned by the caller).
struct QuantizedActs {
  int64_t n_tokens = 0;
  int64_t cols = 0;
  int64_t nb = 0;            // cols / 32
  int subs = 1;              // int corrections per block: 1, or 2 (per 16 columns, Q6_K)
  int8_t* q = nullptr;       // [n_tokens][cols]
  float* d = nullptr;        // [n_tokens][nb] block scale dx
  float* ds = nullptr;       // [n_tokens][nb] dx * float(sum of the block's qx)
  int32_t* corr = nullptr;   // [n_tokens][nb * subs] -code_offset * (sum of qx over the block or half-block)
};

// Bytes needed by QuantizeActs' arrays for this shape (with alignment slack); CarveActs lays them out in `buf`.
size_t ActsBytes(int64_t n_tokens, int64_t cols, int subs);
QuantizedActs CarveActs(void* buf, int64_t n_tokens, int64_t cols, int subs);
// Copies token `src` of `from` (all its arrays) to token `dst` of `to`; both have the same cols and subs.
void CopyActsRow(const QuantizedActs& from, int64_t src, QuantizedActs* to, int64_t dst);
// Quantizes tokens [t0, t1) of x ([n_tokens][cols] f32). `code_offset` is what the SIMD kernel adds to the
// weight codes to make them the unsigned (or signed) bytes it multiplies; corr undoes it in the int domain.
void QuantizeActs(const float* x, int64_t t0, int64_t t1, int code_offset, QuantizedActs* a);

// Decode parameters of blocks [b0, b1) (32 columns each) of weight row r, written at out[(b - b0) * stride]:
// scale0 (first or only sub-block scale), scale1 (Q6_K second half; may be null otherwise), bias (Q4_K/MLX;
// may be null otherwise).
void BlockParamsRow(const MatrixView& w, QFormat fmt, int64_t r, int64_t b0, int64_t b1, float* scale0,
                    float* scale1, float* bias, int64_t stride);
// Sub-block j's 6-bit scale and min from a Q4_K super-block's 12 packed bytes q (ggml's get_scale_min_k4).
void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m);
// The 32 integer weight codes of block b of row r after the format's own offset (Q8_0: qs; Q4_0: q - 8;
// Q4_K: q; Q6_K: q - 32; MLX: q), i.e. the integers whose dot with qx the formula above needs.
void BlockCodes(const MatrixView& w, QFormat fmt, int64_t r, int64_t b, int16_t* codes);

// ---- Per-ISA entry points -----------------------------------------------------------------------------------
// Rows are processed in groups of RowGroup() (one row per vector lane); a task covers whole groups, except
// the last group of the matrix, which may be ragged. Scratch: ScratchBytes(n_tokens, cols) bytes, 64-byte
// aligned, owned by the calling thread.
struct QuantArgs {
  const MatrixView* w = nullptr;
  QFormat fmt = QFormat::kQ8_0;
  const QuantizedActs* acts = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
};
// Whether a call's outputs are large enough to bypass the caches (the LM head's logits: tokens x 151936 floats,
// written once and read much later): its full, aligned lines then go straight to memory.
inline bool StreamOutput(const QuantArgs& a) {
  // Rows up to y_stride: MatMulArgMax's chunks of a wide matrix go to a small buffer that must stay in cache.
  return static_cast<double>(a.acts->n_tokens) * static_cast<double>(std::min(a.w->rows, a.y_stride)) * 4 > 16e6;
}
struct FloatArgs {
  const MatrixView* w = nullptr;
  const float* x = nullptr;
  int64_t n_tokens = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
};

// The f32 FMA paths' loop nest: rows [row_begin, row_end) x all tokens in tiles of up to 4 rows x kMaxT tokens,
// each tile run by Tiles::Run<dtype, R, T>(a, r0, t0), the path's register tile (compiled for its instruction
// set). A tile only groups outputs; each output's operations are the same in any tile.
template <typename Tiles, int kMaxT>
void FloatRowsByTiles(const FloatArgs& a, int64_t row_begin, int64_t row_end) {
  using Fn = void (*)(const FloatArgs&, int64_t, int64_t);
  auto rows = [&]<DType kType>() {
    static constexpr auto kTable = []<int... I>(std::integer_sequence<int, I...>) {
      return std::array<Fn, 4 * kMaxT>{&Tiles::template Run<kType, I / kMaxT + 1, I % kMaxT + 1>...};
    }(std::make_integer_sequence<int, 4 * kMaxT>{});
    for (int64_t r0 = row_begin; r0 < row_end; r0 += 4) {
      const int64_t rr = std::min<int64_t>(4, row_end - r0);
      for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kMaxT)
        kTable[static_cast<size_t>((rr - 1) * kMaxT + std::min<int64_t>(kMaxT, a.n_tokens - t0) - 1)](a, r0, t0);
    }
  };
  switch (a.w->dtype) {
    case DType::kF32: return rows.template operator()<DType::kF32>();
    case DType::kF16: return rows.template operator()<DType::kF16>();
    default: return rows.template operator()<DType::kBF16>();
  }
}

struct IsaKernels {
  int row_group = 16;
  int (*code_offset)(const MatrixView& w, QFormat fmt) = nullptr;
  size_t (*scratch_bytes)(int64_t n_tokens, int64_t cols) = nullptr;
  // Same contract and bit-identical results as QuantizeActs.
  void (*quantize_acts)(const float* x, int64_t t0, int64_t t1, int code_offset, QuantizedActs* a) = nullptr;
  void (*quant_rows)(const QuantArgs& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) = nullptr;
  void (*float_rows)(const FloatArgs& a, int64_t row_begin, int64_t row_end) = nullptr;
  // Repacking at load (null where the path does not repack): bytes of the packed copy (0: this format is not
  // repacked), fill it, and quant_rows over it (same contract and bit-identical results as quant_rows).
  size_t (*packed_bytes)(const MatrixView& w, QFormat fmt) = nullptr;
  void (*pack)(const MatrixView& w, QFormat fmt, uint8_t* out) = nullptr;
  void (*quant_rows_packed)(const QuantArgs& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) = nullptr;
  // From this many tokens quant_rows_packed tiles two row groups at a time (0: never), so a task's groups are best
  // whole pairs: an odd one left over runs at the one-group tile's speed.
  int pair_tokens = 0;
};

// The bf16 kernels' activations: token tiles of 16 rows, each 32-column block of a tile 1 KiB together (16 rows x 64
// bytes), so a tile load reads consecutive lines. Row t, column c (of `cols`) is at this element; a ragged last tile
// is as long as a whole one.
inline int64_t Bf16TileOffset(int64_t t, int64_t c, int64_t cols) {
  return ((t / 16) * (cols / 32) + c / 32) * 512 + (t % 16) * 32 + c % 32;
}
inline int64_t Bf16TilesElems(int64_t n_tokens, int64_t cols) { return (n_tokens + 15) / 16 * 16 * cols; }

struct Bf16Args {
  const MatrixView* w = nullptr;
  QFormat fmt = QFormat::kQ8_0;
  const uint16_t* x = nullptr;  // n_tokens rows of w->cols bf16, as token tiles (Bf16TileOffset)
  int64_t n_tokens = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  const int32_t* y_rows = nullptr;  // token t's output row of y, increasing (a batch's runs of rows); null: t
};
// GatedMlpBf16's first half: act(gate x) * (up x) as bf16 token tiles h (gate->rows columns), for x's n_tokens rows.
struct GatedBf16Args {
  const MatrixView* gate = nullptr;
  const MatrixView* up = nullptr;
  QFormat fmt = QFormat::kQ8_0;  // both's
  const uint16_t* x = nullptr;   // token tiles, gate->cols columns
  int64_t n_tokens = 0;
  void (*act)(const float* gate, const float* up, int64_t n, float* out) = nullptr;
  uint16_t* h = nullptr;
};
// The bf16 formula's kernel (AMX-BF16): scratch bytes per thread for a matrix of `cols` columns; rows to token tiles;
// rows [row_begin, row_end) of a product (whole row groups of 16 but the matrix's last), reading the AVX-512 packed
// weights; GatedMlpBf16's first half. Formats: Bf16FormulaCovers.
struct Bf16Kernels {
  size_t (*scratch_bytes)(int64_t cols) = nullptr;
  // x's `count` rows (w->cols apart) to bf16, as rows first.. of token tiles.
  void (*to_bf16)(const float* x, int64_t cols, int64_t count, uint16_t* tiles, int64_t first) = nullptr;
  void (*rows)(const Bf16Args& a, int64_t row_begin, int64_t row_end, uint8_t* scratch) = nullptr;
  // Whether gated_rows takes this gate and up: their packed blocks read alike (one kernel for the pair).
  bool (*gated_pair_ok)(const MatrixView& gate, const MatrixView& up, QFormat gate_fmt, QFormat up_fmt) = nullptr;
  // Row groups [group_begin, group_end) (16 rows of gate and up each) of h, all tokens.
  void (*gated_rows)(const GatedBf16Args& a, int64_t group_begin, int64_t group_end, uint8_t* scratch) = nullptr;
};
// Formats the bf16 formula covers: all the quantized ones (float weights take the f32 path).
inline bool Bf16FormulaCovers(QFormat) { return true; }
// f32 to bf16: nearest, ties to even; denormals to (signed) zero; NaN stays NaN (VCVTNEPS2BF16's rounding).
uint16_t ToBf16(float v);
float FromBf16(uint16_t h);
// One tile multiply's step of one sum of the bf16 formula: acc + (se + so) over the 32 products a[i] * b[i] (bf16
// values as f32), se over even i and so over odd i in increasing i, each sum with denormals flushed to zero. The
// scalar twins' building block (ref::MatMulBf16, ref::PromptAttention).
float Bf16TileStep(float acc, const float* a, const float* b);

// Null when the path is not compiled in.
const Bf16Kernels* AmxBf16Kernels();
const IsaKernels* Avx512Kernels();
const IsaKernels* AvxVnniKernels();
const IsaKernels* Avx2Kernels();
const IsaKernels* AmxKernels();  // AVX-512's, with quant_rows_packed on AMX tiles for batches
const IsaKernels* NeonKernels();  // ARM64: NEON + sdot, 4 rows per group, repacked at load

// The AVX-512 packed layout (RepackForKernels), which the AMX path reads too: bytes per packed block of 16 rows,
// whether its codes are nibble-packed (256 code bytes instead of 512), and how its parameters are stored (a
// cpu/packed_params-inl.h ParamKind, which also places a row group's super-block headers: PackedGroupAt).
int64_t Avx512PackedStride(const MatrixView& w, QFormat fmt);
bool Avx512PackedNibbles(const MatrixView& w, QFormat fmt);
int Avx512PackedParamKind(const MatrixView& w, QFormat fmt);
// Its headers (Q4_K super-blocks, MLX groups): one per 2^shift blocks, and their bytes per row group.
int Avx512PackedHeaderShift(const MatrixView& w, QFormat fmt);
int64_t Avx512PackedHeaderBytes(const MatrixView& w, QFormat fmt);
// Writes finished accumulators (acc[t * 16 + lane], lane = row r0 + lane) of rows [r0, r0 + nrows) for tokens
// [t0, t0 + nt) into args.y, streaming full aligned lines when `stream` (StreamOutput).
void Avx512StoreRows(const QuantArgs& args, const float* acc, int64_t t0, int64_t nt, int64_t r0, int nrows,
                     bool stream);

}  // namespace parallm::mm
