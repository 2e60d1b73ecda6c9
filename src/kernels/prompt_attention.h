// Attention for a prompt's tokens in bf16 (the prompt rows' formula, as MatMul's bf16 formula is their products'): q·k
// and p·v as bf16 products with f32 sums, the softmax between them in f32. Two kernels, each with its own formula for
// the sums, the one the CPU runs: AMX-BF16 tile multiplies (Sapphire Rapids and later) or, without AMX, AVX512-BF16
// dot products (VDPBF16PS: AMD Zen 4 and 5, Cooper Lake).
//
// The formula, for a token with n_ctx positions of context (it attends to positions [0, n_ctx)) and one query head of
// KV head g, with ToBf16/FromBf16 and a step P(acc, a, b) over a run of products a[i] * b[i] (bf16 values as f32, so
// each product is exact):
//   tiles (AMX)  P = T(acc, a, b) = acc + (se + so) over 32 products (the even-indexed products summed in order, the
//                odd ones likewise, sums with denormals flushed: kernels/matmul_internal.h's bf16 formula and
//                Bf16TileStep)
//   pairs        P = acc, then for each pair (2i, 2i + 1) in increasing i: acc = (acc + a[2i+1] b[2i+1]) + a[2i] b[2i]
//                (VDPBF16PS's order, checked against the instruction bit for bit on random normal operands; with
//                denormal operands, products or sums, and in the sign of an exact zero, the instruction's handling is
//                not the twin's, which a model's attention does not reach)
//   q', k'_j, v'_j    the query and the stored keys and values as f32 (KvDtype's decoding), rounded to bf16
//   S_j = P(... P(0, q'[0:32], k'_j[0:32]) ..., q'[D-32:D], k'_j[D-32:D])         over head_dim D in 32s
//   s_j = S_j * scale,  m = max_j s_j,  e_j = FromBf16(ToBf16(ExpForBf16(s_j - m)))   (kernels/fast_exp.h)
//   l   = sum of e_j: lane j % 16 sums its e_j in increasing j, then lanes [0, 8) add lanes [8, 16), [0, 4) add
//         [4, 8), [0, 2) add [2, 4), 0 adds 1
//   o_d = P(... P(0, e[0:32], v'[0:32]_d) ..., e[32c:32c+32], v'[32c:32c+32]_d)   key chunks from position 0, the
//         positions past n_ctx in the last chunk with e = 0
//   out_d = o_d * (1 / l)
// (With pairs, a chain of P over 32s is one chain over all the pairs in order.) Each token's result is the same bits
// whichever tokens share the call, however its prompt was chunked, and on any thread: only its own position and the
// keys and values before it enter (key chunks are aligned at position 0; a token past its last chunk adds exact zeros,
// which leaves a sum as it was). The values of later positions that a call reads must be finite (a model's are; 0 x NaN
// would not be 0).
//
// Why: prompt attention is ~17% of a 512-token prefill in f32 on the vector units (PagedAttentionTokens); the same
// products on tiles cost a fraction of that, and as VDPBF16PS pairs (twice the products of an f32 FMA, a register tile
// sharing each load) about half. Decode tokens keep PagedAttention: a decode step's formula must not depend on the
// batch, and one token's attention is a matrix-vector product neither helps.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/attention.h"

namespace parallm {

// Which of the formulas PromptAttention computes on this CPU and kernel path (kNone: neither kernel runs here): tiles
// where the path is AMX and the CPU has AMX-BF16, pairs where it is AVX-512 (or AMX) and the CPU has AVX512-BF16.
enum class PromptFormula { kNone, kTiles, kPairs };
PromptFormula PromptFormulaHere();

// Whether PromptAttention runs here for layers of this shape: a kernel (PromptFormulaHere), no sliding window, no
// soft-capping, and head_dim a multiple of 32 up to 256.
bool PromptAttentionCovers(const AttentionShape& shape);

// Scratch bytes PromptAttention needs for a call whose last token has n_ctx_last positions of context.
int64_t PromptAttentionScratchBytes(const AttentionShape& shape, int64_t n_ctx_last);

// Tokens [0, n_tokens) of one sequence, consecutive, token i with n_ctx_first + i positions of context; its query heads
// at q + i * q_stride, its output at out + i * out_stride (both [n_heads, head_dim]); only the query heads of KV head
// `kv_head` are computed. Keys and values through the sequence's block table, as PagedAttention reads them.
void PromptAttention(const float* q, int64_t q_stride, const AttentionShape& shape, const PagedKvView& kv,
                     std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head,
                     std::span<uint8_t> scratch, float* out, int64_t out_stride);

namespace ref {
// The formula above (tiles or pairs) in plain loops, one token and head at a time.
void PromptAttention(PromptFormula formula, const float* q, int64_t q_stride, const AttentionShape& shape,
                     const PagedKvView& kv, std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens,
                     int kv_head, float* out, int64_t out_stride);
}  // namespace ref

}  // namespace parallm
