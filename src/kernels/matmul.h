// MatMul: Y[t, r] = sum_c X[t, c] * W[r, c] for a batch of token rows X against a stored weight matrix W
// (any MatrixView: f32/f16/bf16, GGML Q8_0/Q4_0/Q4_K/Q6_K, MLX affine 2-8 bit), dequantizing on the fly.
//
// Quantized weights take the int8 path: each activation row is quantized once per call into blocks of
// 32 int8 values with an f32 scale (and, where the weight format needs it, the block sum), and dot
// products run on int8 hardware (AVX-512 VNNI / AVX-VNNI / AVX2, ARM dotprod) with f32 accumulation.
//
// Batch invariance: Y[t, r] depends only on X[t, :] and W[r, :], never on how many tokens are in the batch,
// which other tokens are there, how tiles or threads are split: every (t, r) dot product accumulates its
// blocks in the same fixed order whatever the batch size. The engine's batched == unbatched guarantee rests
// on this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "tensor/matrix.h"
#include "util/thread_pool.h"

namespace parallm {

// x: [n_tokens, w.cols] f32 row-major; y: [n_tokens, w.rows] f32 row-major (y_stride >= w.rows floats
// between rows, for writing into a slice of a wider buffer). `pool` may be null (single-threaded).
void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool);

// Rows [begin, end) of a batch.
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
};
// The bf16 formula (kernels/matmul_internal.h) for some rows of a batch: where Bf16RowsEnabled(), the rows in
// `bf16_rows` (sorted, disjoint) of a quantized matrix the formula covers are multiplied in bf16 on AMX tiles, with
// no per-block f32 tail (1.1-1.45x the int8 formula's rate at 512 rows, even at ~32, slower below: every weight is
// dequantized once a call); the other rows, and every row elsewhere, take the int8 formula. Which formula a row gets depends only on whether the caller lists it, the matrix's format and
// the machine, never on the rest of the batch, so batch invariance holds as long as the caller lists a token by
// something of its own (the engine: tokens of the prompt). The two formulas round differently.
void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool,
            std::span<const RowRange> bf16_rows);
// Whether the bf16 formula runs here: the active path is AMX on a CPU with AMX-BF16, and it is not turned off
// (PARALLM_BF16_ROWS=0, or SetBf16RowsEnabled(false): tests and benchmarks compare the two).
bool Bf16RowsEnabled();
void SetBf16RowsEnabled(bool on);
// Whether a prompt's bf16 formulas are wanted at all, whatever the machine: what PARALLM_BF16_ROWS and
// SetBf16RowsEnabled say. Bf16RowsEnabled() adds AMX to it; PromptAttention (kernels/prompt_attention.h), which also
// runs without AMX, adds its own kernel's check.
bool Bf16PromptsWanted();
// Whether the bf16 formula covers w's format (quantized with one scale per 32-column block: Q8_0, Q4_0, Q4_K, MLX).
bool Bf16FormulaCovers(const MatrixView& w);

// One product of MatMulMulti: y ([n_tokens, y_stride]) = x W^T.
struct MatMulOut {
  const MatrixView* w = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
};
// Several matrices applied to the same input (Q/K/V, gate/up): every output bit-identical to a MatMul call of
// its own, but x is quantized once per distinct activation format and all the matrices' rows run in one
// parallel loop (one dispatch, and the small K/V matrices no longer leave a thread idle). All w share cols.
void MatMulMulti(std::span<const MatMulOut> outs, const float* x, int64_t n_tokens, ThreadPool* pool);
// MatMulMulti with bf16_rows, as MatMul's.
void MatMulMulti(std::span<const MatMulOut> outs, const float* x, int64_t n_tokens, ThreadPool* pool,
                 std::span<const RowRange> bf16_rows);

// MatMulMulti with bf16_rows, but the rows listed in bf16_rows of the products the bf16 formula covers are left alone:
// the caller makes them (GatedMlpBf16).
void MatMulMultiExcept(std::span<const MatMulOut> outs, const float* x, int64_t n_tokens, ThreadPool* pool,
                       std::span<const RowRange> bf16_rows);

// An activation times up, elementwise: out[i] = act(gate[i]) * up[i] (SiluMul, GeluTanhMul).
using ActMulFn = void (*)(const float* gate, const float* up, int64_t n, float* out);
// The listed rows of a gated MLP on the bf16 formula: y = down · act(gate · x) * (up · x) for the rows in `rows`
// (sorted, disjoint), bit for bit what MatMulMulti({gate, up}, ..., rows), act on those rows and MatMul(down, ...,
// rows) give. But gate's and up's row groups run as a pair, and each pair of tiles of sums becomes act(gate) * up
// and then bf16, what down reads, straight from the tile registers: the two f32 outputs n x F, the widest of a step,
// are never written nor read back (writing them was half the time of the products at 512 rows). Where
// GatedMlpBf16Covers: Bf16RowsEnabled(), the three covered and packed at load, gate and up alike in shape and format.
bool GatedMlpBf16Covers(const MatrixView& gate, const MatrixView& up, const MatrixView& down);
void GatedMlpBf16(const MatrixView& gate, const MatrixView& up, const MatrixView& down, ActMulFn act, const float* x,
                  std::span<const RowRange> rows, float* y, int64_t y_stride, ThreadPool* pool);

// One product of MatMulGrouped: y ([n_tokens, y_stride]) = rows [x_begin, x_begin + n_tokens) of x times W^T.
struct MatMulGroupOut {
  const MatrixView* w = nullptr;
  int64_t x_begin = 0;
  int64_t n_tokens = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
};
// Many products over row ranges of one input (a mixture-of-experts layer: each expert's gate and up over its token
// group, or each expert's down): x ([x_rows, cols]) is quantized once per distinct activation format, and the row
// blocks of all the products run in one parallel loop, so both threads stay busy when each expert has one token.
// Every output is bit-identical to a MatMul call on its own rows. All w share cols.
void MatMulGrouped(std::span<const MatMulGroupOut> outs, const float* x, int64_t x_rows, ThreadPool* pool);
// MatMulGrouped over gathered rows: input row i of the products is row gather[i] of x ([x_rows, cols]), i < n_rows
// (a mixture-of-experts layer's gate and up: each assignment's token). Each row of x is quantized once, however many
// times it is gathered (8 times for top-8 routing), and no f32 copy is made; every output is bit-identical to
// MatMulGrouped over the gathered f32 rows. gather null: MatMulGrouped (n_rows = x_rows).
void MatMulGroupedGather(std::span<const MatMulGroupOut> outs, const float* x, int64_t x_rows, const int32_t* gather,
                         int64_t n_rows, ThreadPool* pool);

// Greedy decoding's LM head: argmax[t] = the row r of w with the largest Y[t, r] (after `softcap` > 0:
// cap * tanh(Y / cap), as SoftCap), ties to the lowest r and NaN never taken, exactly ArgMax over MatMul's row. Y's
// values are MatMul's bits, but a task computes its rows a chunk at a time into a buffer that stays in cache and
// scans them there, so the [n_tokens, w.rows] outputs (64 sequences' logits over a 152k vocabulary: 39 MB a step)
// are never written to memory nor read back.
void MatMulArgMax(const MatrixView& w, const float* x, int64_t n_tokens, float softcap, int32_t* argmax,
                  ThreadPool* pool);
// A gated MLP's first half: y = act(x gate^T) * (x up^T) ([n_tokens, y_stride]), bit for bit MatMulMulti({gate, up})
// followed by act over each token's row. But a task runs its rows of gate and the same rows of up a chunk at a time
// into a buffer that stays in cache and writes only act's result: up's outputs and the pre-activation gate (64 tokens
// x 4,864 floats each a layer) are never written to memory nor read back. Gate and up alike in shape.
void MatMulGated(const MatrixView& gate, const MatrixView& up, ActMulFn act, const float* x, int64_t n_tokens, float* y,
                 int64_t y_stride, ThreadPool* pool);
// Repacks w once, at load, into the layout of the path MatMul uses now (ActiveIsa: the best this CPU has, unless
// PARALLM_ISA or a test chose another), so MatMul no longer rebuilds its panels on every call; sets w->packed /
// w->packed_isa and returns the owner of the bytes (keep it alive as long as w), or null where that path does not
// repack this matrix (float weights, the scalar twin). A path forced later (tests) ignores a copy packed for another
// path. *bytes (if not null) receives the packed copy's size.
std::shared_ptr<uint8_t[]> RepackForKernels(MatrixView* w, size_t* bytes);
// RepackForKernels for a model's matrices at once, one matrix per task over `pool` (may be null). Copies under
// 1 MiB (a mixture's experts: 0.2 MiB each in qwen3-moe-mini, thousands of them; small K/V projections) share one
// mapping advised as huge pages, at offsets fixed by the matrices' order, where each on its own heap block would sit
// on 4 KiB pages (a TLB walk per 64 cache lines as a decode step streams them); larger ones each get their own, as
// RepackForKernels gives them. Returns the owners (keep them alive as long as the matrices); *bytes (if not null)
// receives the total of the packed copies. `packed_one` (if set) is called for each matrix once its copy is made, on
// the thread that made it (the loader drops the stored bytes' pages there, so they are never all held twice).
std::vector<std::shared_ptr<uint8_t[]>> RepackAllForKernels(
    std::span<MatrixView* const> mats, ThreadPool* pool, size_t* bytes,
    const std::function<void(const MatrixView&)>& packed_one = {});

namespace ref {
// The scalar reference twin: same signature and the same activation quantization as the fast path, so the
// two agree to rounding (f32 accumulation order) on every type.
void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool);
// The bf16 formula's twin (kernels/matmul_internal.h), for quantized w of a format it covers.
void MatMulBf16(const MatrixView& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride);
}  // namespace ref

}  // namespace parallm
