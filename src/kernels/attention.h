// Paged attention for one token: its query heads attend causally over its sequence's cached keys and values,
// read through the sequence's block table. Grouped-query attention: query head h reads KV head
// h / (n_heads / n_kv_heads).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/kv_dtype.h"

namespace parallm {

// One layer's KV storage as the kernel reads it: slot s (= block * block_size + offset) holds n_kv_heads x
// head_dim keys of `dtype` starting slot_stride elements after slot s - 1's (values likewise). int8 rows have one
// f32 scale each: KV head h of slot s at key_scales[s * n_kv_heads + h] (value_scales likewise).
struct PagedKvView {
  const void* keys = nullptr;
  const void* values = nullptr;
  int64_t slot_stride = 0;  // elements per slot
  int block_size = 16;
  KvDtype dtype = KvDtype::kF32;
  const float* key_scales = nullptr;  // int8 only
  const float* value_scales = nullptr;
};

// The KV slot of position j of a sequence whose blocks are `block_table`: block_table[j / block_size] * block_size +
// j % block_size.
inline int64_t SlotOf(const PagedKvView& kv, std::span<const int32_t> block_table, int64_t j) {
  return static_cast<int64_t>(block_table[static_cast<size_t>(j / kv.block_size)]) * kv.block_size + j % kv.block_size;
}

struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
  // Sliding window: the token (the last of its n_ctx positions) attends only to the last `sliding_window`
  // positions, itself included (0: all of them).
  int sliding_window = 0;
  // Soft-capping of the scaled scores before the softmax: cap * tanh(score / cap) (Gemma 2; 0: none).
  float softcap = 0;
};

// The first position a token with n_ctx positions of context attends to.
inline int64_t AttentionBegin(const AttentionShape& shape, int64_t n_ctx) {
  return shape.sliding_window > 0 && n_ctx > shape.sliding_window ? n_ctx - shape.sliding_window : 0;
}

// Floats of `scratch` PagedAttention needs for a context of n_ctx positions: one row of scores per query head of a
// KV head's group, each padded to a multiple of 16 positions (the widest vector tile).
inline int64_t PagedAttentionScratchSize(const AttentionShape& shape, int64_t n_ctx) {
  return static_cast<int64_t>(shape.n_heads / shape.n_kv_heads) * ((n_ctx + 15) / 16 * 16);
}

// q: [n_heads, head_dim] of one token; out: [n_heads, head_dim]. Attends to positions [AttentionBegin, n_ctx), whose slots
// are block_table[j / block_size] * block_size + j % block_size. `scratch` holds at least
// PagedAttentionScratchSize(shape, n_ctx) floats (checked).
// Only the heads in [kv_head_begin, kv_head_end) of KV heads (and their query heads) are computed, so callers can
// split one token's work across threads. The result for a head depends only on q and the sequence's keys and
// values: never on the split, on other tokens, or on the batch (the same bits on the same CPU).
void PagedAttention(const float* q, const AttentionShape& shape, const PagedKvView& kv,
                    std::span<const int32_t> block_table, int64_t n_ctx, int kv_head_begin, int kv_head_end,
                    std::span<float> scratch, float* out);

// Attention for n_tokens consecutive tokens of one sequence (a prefill chunk, or part of one): token i's query heads
// at q + i * q_stride, its output at out + i * out_stride, with n_ctx_first + i positions of context. Each token's
// result is the same bits as PagedAttention's for that token alone (the same kernel width), whatever n_tokens and
// whichever tokens share the call: every token's rows go through the same operations in the same order; only the
// loads of key and value rows are shared, each tile read once for up to kAttentionTokenBlock tokens rather than once
// per token. Tokens that a sliding window cuts (window start past position 0) are computed one by one.
// `scratch` holds at least PagedAttentionTokensScratchSize(shape, n_ctx_first + n_tokens - 1, n_tokens) floats.
inline constexpr int kAttentionTokenBlock = 16;
int64_t PagedAttentionTokensScratchSize(const AttentionShape& shape, int64_t n_ctx_last, int n_tokens);
void PagedAttentionTokens(const float* q, int64_t q_stride, const AttentionShape& shape, const PagedKvView& kv,
                          std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head_begin,
                          int kv_head_end, std::span<float> scratch, float* out, int64_t out_stride);

// For tests and benchmarks: the vector lanes of the kernel in use (16: AVX-512, 8: AVX2, 4: baseline x86-64), and
// a switch to another width this CPU runs (0: the best one); false if it cannot. Not while kernels are running.
int PagedAttentionLanes();
bool SetPagedAttentionLanes(int lanes);

namespace ref {
void PagedAttention(const float* q, const AttentionShape& shape, const PagedKvView& kv,
                    std::span<const int32_t> block_table, int64_t n_ctx, int kv_head_begin, int kv_head_end,
                    std::span<float> scratch, float* out);
}  // namespace ref

}  // namespace parallm
