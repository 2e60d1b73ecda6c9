// Paged attention, one KV head at a time: its query heads (the GQA group) are computed together, so each key and
// value row is read once per token rather than once per query head, and scores come out W positions at a time
// (W = lanes of a vector register) with no horizontal reduction per position. The kernel (attention_simd-inl.h)
// is compiled for AVX-512 (W = 16), AVX2 + FMA (W = 8) and baseline x86-64 (W = 4); the CPU picks one at first
// use. Its order of operations depends on W alone: on one machine a head's result depends only on its own token
// and sequence, whatever the batch, the split or the thread. The paths differ from each other in the last bits.
// A prefill chunk's tokens run together (PagedAttentionTokens, AttendTokens): each tile's keys and values serve
// every token of a run, and each token's rows see the single-token kernel's operations, so its bits are the same.
#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu_features.h"
#include "kernels/fast_exp.h"
#include "kernels/ops.h"
#include "kernels/target_clones.h"
#include "tensor/fp16.h"
#include "util/check.h"

namespace parallm {
namespace {

constexpr int kLanes = 16;

// x[i] = exp(x[i] - mx) for i < n; returns the sum, accumulated in 16 lanes merged in a fixed order.
PARALLM_CLONES float ExpShiftSum(float* x, int64_t n, float mx) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      x[i + l] = ExpClamped(x[i + l] - mx);
      acc[l] += x[i + l];
    }
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  float sum = acc[0];
  for (; i < n; ++i) {
    x[i] = ExpClamped(x[i] - mx);
    sum += x[i];
  }
  return sum;
}

// An f16 element of the cache, as its bits: its own type, so the kernel's loads tell it from bf16's uint16_t.
struct F16Bits {
  uint16_t bits;
};

// One token's attention for one KV head and the `group` query heads that read it.
struct GroupTask {
  const float* q;       // [group, head_dim]
  const void* keys;    // this KV head's key in slot 0; slot s's is slot_stride * s elements further
  const void* values;  // likewise
  int64_t slot_stride;
  const float* key_scales;    // int8: this KV head's scale in slot 0; slot s's is scale_stride * s floats further
  const float* value_scales;  // likewise
  int64_t scale_stride;
  int block_size;
  const int32_t* block_table;
  int64_t begin;       // first position attended to (sliding window; else 0)
  int64_t n_ctx;       // positions [begin, n_ctx) are attended to
  int64_t row_stride;  // floats between two heads' score rows: n_ctx rounded up to a multiple of kLanes
  int group, head_dim;
  float scale;
  float softcap;  // 0: none
  float* scores;  // [group, row_stride]: position begin + i at column i
  float* out;     // [group, head_dim]
};

// Consecutive tokens of one sequence for one KV head, none of them cut by a sliding window: token i of n_tokens
// attends to positions [0, last.n_ctx - (n_tokens - 1 - i)).
struct TokensTask {
  GroupTask last;  // the last token's task (begin 0), but its scores hold n_tokens * group rows of row_stride floats
  const float* q;  // token i's group at q + i * q_stride
  float* out;      // token i's group at out + i * out_stride
  int64_t q_stride, out_stride;
  int n_tokens;
};

// The kernel once per instruction set (attention_simd-inl.h), each in its own namespace and target region.
// GCC 12's AVX-512 headers start conversions from a self-initialized `__Y = __Y` ("undefined" upper bits), which
// -Wmaybe-uninitialized reports once inlined; every lane is written.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define PARALLM_SIMD_KERNEL "kernels/attention_simd-inl.h"
#include "kernels/simd_targets-inl.h"
#undef PARALLM_SIMD_KERNEL
#pragma GCC diagnostic pop

// One kernel per stored element type (KvDtype), for one instruction set.
struct GroupKernels {
  void (*f32)(const GroupTask&);
  void (*bf16)(const GroupTask&);
  void (*int8)(const GroupTask&);
  void (*f16)(const GroupTask&);
  void (*tokens_f32)(const TokensTask&);
  void (*tokens_bf16)(const TokensTask&);
  void (*tokens_int8)(const TokensTask&);
  void (*tokens_f16)(const TokensTask&);

  void Run(KvDtype dtype, const GroupTask& t) const {
    switch (dtype) {
      case KvDtype::kF32: return f32(t);
      case KvDtype::kBf16: return bf16(t);
      case KvDtype::kInt8: return int8(t);
      case KvDtype::kF16: return f16(t);
    }
  }
  void Run(KvDtype dtype, const TokensTask& t) const {
    switch (dtype) {
      case KvDtype::kF32: return tokens_f32(t);
      case KvDtype::kBf16: return tokens_bf16(t);
      case KvDtype::kInt8: return tokens_int8(t);
      case KvDtype::kF16: return tokens_f16(t);
    }
  }
};

#define PARALLM_KERNELS(ns)                                                                                      \
  &ns::AttendGroup<float>, &ns::AttendGroup<uint16_t>, &ns::AttendGroup<int8_t>, &ns::AttendGroup<F16Bits>,          \
      &ns::AttendTokens<float>, &ns::AttendTokens<uint16_t>, &ns::AttendTokens<int8_t>, &ns::AttendTokens<F16Bits>
#if defined(__x86_64__)
constexpr GroupKernels kAvx512{PARALLM_KERNELS(avx512)};
constexpr GroupKernels kAvx2{PARALLM_KERNELS(avx2)};
#endif
constexpr GroupKernels kBaseline{PARALLM_KERNELS(baseline)};
#undef PARALLM_KERNELS

using GroupKernel = const GroupKernels*;

// The kernels for `lanes`, or null where this build or CPU lacks them.
GroupKernel KernelFor(int lanes) {
  if (!SimdLanesRun(lanes)) return nullptr;
#if defined(__x86_64__)
  if (lanes == 16) return &kAvx512;
  if (lanes == 8) return &kAvx2;
#endif
  return &kBaseline;
}

GroupKernel BestKernel() {
  for (int lanes : {16, 8})
    if (GroupKernel k = KernelFor(lanes)) return k;
  return &kBaseline;
}

// Chosen at first use; only tests and benchmarks change it (SetPagedAttentionLanes).
std::atomic<GroupKernel>& CurrentKernel() {
  static std::atomic<GroupKernel> kernel{BestKernel()};
  return kernel;
}

// One KV head's task for a token with n_ctx positions of context (q and out: its group's first head); scores hold
// the group's rows, row_stride floats apart.
GroupTask MakeGroupTask(const float* q, const AttentionShape& s, const PagedKvView& kv,
                        std::span<const int32_t> block_table, int64_t n_ctx, int kvh, int64_t row_stride,
                        float* scores, float* out) {
  const int group = s.n_heads / s.n_kv_heads;
  const int64_t head0 = static_cast<int64_t>(kvh) * group;  // the group's first query head
  const size_t head_offset = static_cast<size_t>(kvh) * static_cast<size_t>(s.head_dim) * KvElementBytes(kv.dtype);
  const bool scaled = kv.dtype == KvDtype::kInt8;
  return GroupTask{q + head0 * s.head_dim,
                   static_cast<const char*>(kv.keys) + head_offset,
                   static_cast<const char*>(kv.values) + head_offset,
                   kv.slot_stride,
                   scaled ? kv.key_scales + kvh : nullptr,
                   scaled ? kv.value_scales + kvh : nullptr,
                   s.n_kv_heads,
                   kv.block_size,
                   block_table.data(),
                   AttentionBegin(s, n_ctx),
                   n_ctx,
                   row_stride,
                   group,
                   s.head_dim,
                   s.scale,
                   s.softcap,
                   scores,
                   out + head0 * s.head_dim};
}

// A score row's floats for n positions: a multiple of 16 (the widest vector tile).
int64_t PaddedRow(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

void CheckKv(const PagedKvView& kv, std::span<const int32_t> block_table, int64_t n_ctx) {
  PARALLM_DCHECK(n_ctx <= static_cast<int64_t>(block_table.size()) * kv.block_size);
  PARALLM_CHECK(kv.dtype != KvDtype::kInt8 || (kv.key_scales != nullptr && kv.value_scales != nullptr));
}

}  // namespace

void PagedAttention(const float* q, const AttentionShape& s, const PagedKvView& kv,
                    std::span<const int32_t> block_table, int64_t n_ctx, int kv_head_begin, int kv_head_end,
                    std::span<float> scratch, float* out) {
  const GroupKernel kernel = CurrentKernel().load(std::memory_order_relaxed);
  PARALLM_CHECK(static_cast<int64_t>(scratch.size()) >= PagedAttentionScratchSize(s, n_ctx));
  CheckKv(kv, block_table, n_ctx);
  const int64_t row_stride = PaddedRow(n_ctx - AttentionBegin(s, n_ctx));
  for (int kvh = kv_head_begin; kvh < kv_head_end; ++kvh)
    kernel->Run(kv.dtype, MakeGroupTask(q, s, kv, block_table, n_ctx, kvh, row_stride, scratch.data(), out));
}

int64_t PagedAttentionTokensScratchSize(const AttentionShape& shape, int64_t n_ctx_last, int n_tokens) {
  const int64_t block = std::min(n_tokens, kAttentionTokenBlock);
  return block * (shape.n_heads / shape.n_kv_heads) * PaddedRow(n_ctx_last);
}

void PagedAttentionTokens(const float* q, int64_t q_stride, const AttentionShape& s, const PagedKvView& kv,
                          std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head_begin,
                          int kv_head_end, std::span<float> scratch, float* out, int64_t out_stride) {
  if (n_tokens <= 0) return;
  const GroupKernel kernel = CurrentKernel().load(std::memory_order_relaxed);
  PARALLM_CHECK(n_ctx_first >= 1);
  const int64_t n_ctx_last = n_ctx_first + n_tokens - 1;
  PARALLM_CHECK(static_cast<int64_t>(scratch.size()) >= PagedAttentionTokensScratchSize(s, n_ctx_last, n_tokens));
  CheckKv(kv, block_table, n_ctx_last);
  // Tokens whose window starts past position 0 tile their positions from their window's start: each goes alone.
  int whole = n_tokens;  // tokens [0, whole) attend from position 0
  if (s.sliding_window > 0)
    whole = static_cast<int>(std::clamp<int64_t>(s.sliding_window - n_ctx_first + 1, 0, n_tokens));
  for (int kvh = kv_head_begin; kvh < kv_head_end; ++kvh) {
    for (int i0 = 0; i0 < whole; i0 += kAttentionTokenBlock) {
      const int count = std::min(kAttentionTokenBlock, whole - i0);
      const int64_t n_ctx = n_ctx_first + i0 + count - 1;  // the block's last token's
      const GroupTask last = MakeGroupTask(q + (i0 + count - 1) * q_stride, s, kv, block_table, n_ctx, kvh,
                                           PaddedRow(n_ctx), scratch.data(), out + (i0 + count - 1) * out_stride);
      const int64_t back = static_cast<int64_t>(count - 1);  // tokens from the block's first to its last
      kernel->Run(kv.dtype, TokensTask{last, last.q - back * q_stride, last.out - back * out_stride, q_stride,
                                       out_stride, count});
    }
    for (int i = whole; i < n_tokens; ++i) {
      const int64_t n_ctx = n_ctx_first + i;
      kernel->Run(kv.dtype, MakeGroupTask(q + i * q_stride, s, kv, block_table, n_ctx, kvh,
                                          PaddedRow(n_ctx - AttentionBegin(s, n_ctx)), scratch.data(),
                                          out + i * out_stride));
    }
  }
}

int PagedAttentionLanes() {
  const GroupKernel k = CurrentKernel().load();
  for (int lanes : {16, 8, 4})
    if (k == KernelFor(lanes)) return lanes;
  return 0;
}

bool SetPagedAttentionLanes(int lanes) {
  const GroupKernel k = lanes == 0 ? BestKernel() : KernelFor(lanes);
  if (k == nullptr) return false;
  CurrentKernel().store(k);
  return true;
}

namespace ref {

void PagedAttention(const float* q, const AttentionShape& s, const PagedKvView& kv,
                    std::span<const int32_t> block_table, int64_t n_ctx, int kv_head_begin, int kv_head_end,
                    std::span<float> scratch_span, float* out) {
  const int64_t begin = AttentionBegin(s, n_ctx), n = n_ctx - begin;
  PARALLM_CHECK(static_cast<int64_t>(scratch_span.size()) >= n);
  float* scratch = scratch_span.data();
  const int group = s.n_heads / s.n_kv_heads;
  auto slot_of = [&](int64_t j) { return SlotOf(kv, block_table, j); };
  // Element i of a layer's buffer (i counted in elements), decoded; int8's scale is that of its slot and head.
  auto Element = [&](const void* base, int64_t i, float scale) {
    return static_cast<double>(
        DecodeKvElement(kv.dtype, static_cast<const char*>(base) + i * static_cast<int64_t>(KvElementBytes(kv.dtype)),
                        0, scale));
  };
  auto ScaleOf = [&](const float* scales, int64_t slot, int kvh) {
    return kv.dtype == KvDtype::kInt8 ? scales[slot * s.n_kv_heads + kvh] : 1.0f;
  };
  for (int h = kv_head_begin * group; h < kv_head_end * group; ++h) {
    const int kvh = h / group;
    for (int64_t j = begin; j < n_ctx; ++j) {
      const int64_t row = slot_of(j) * kv.slot_stride + static_cast<int64_t>(kvh) * s.head_dim;
      const float scale = ScaleOf(kv.key_scales, slot_of(j), kvh);
      double dot = 0;
      for (int d = 0; d < s.head_dim; ++d)
        dot += static_cast<double>(q[h * s.head_dim + d]) * Element(kv.keys, row + d, scale);
      float score = static_cast<float>(dot) * s.scale;
      if (s.softcap > 0) score = s.softcap * std::tanh(score / s.softcap);
      scratch[j - begin] = score;
    }
    Softmax(scratch, n);
    for (int d = 0; d < s.head_dim; ++d) {
      double acc = 0;
      for (int64_t j = begin; j < n_ctx; ++j)
        acc += static_cast<double>(scratch[j - begin]) *
               Element(kv.values, slot_of(j) * kv.slot_stride + kvh * s.head_dim + d, ScaleOf(kv.value_scales, slot_of(j), kvh));
      out[h * s.head_dim + d] = static_cast<float>(acc);
    }
  }
}

}  // namespace ref
}  // namespace parallm
