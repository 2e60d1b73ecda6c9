// PromptAttention's dispatch to its AMX-BF16 kernel (cpu/attention_amx_bf16.cpp) or its AVX512-BF16 one
// (cpu/attention_avx512_bf16.cpp), and its scalar twin.
#include "kernels/prompt_attention.h"

#include <cmath>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/fast_exp.h"
#include "kernels/kv_dtype.h"
#include "kernels/matmul_internal.h"
#include "util/check.h"

namespace parallm {

#if defined(__x86_64__)
namespace amx {  // cpu/attention_amx_bf16.cpp
int64_t PromptAttentionScratchBytes(const AttentionShape& shape, int64_t n_ctx_last);
void PromptAttention(const float* q, int64_t q_stride, const AttentionShape& shape, const PagedKvView& kv,
                     std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head,
                     std::span<uint8_t> scratch, float* out, int64_t out_stride);
}  // namespace amx
namespace avx512bf16 {  // cpu/attention_avx512_bf16.cpp: the same scratch layout
void PromptAttention(const float* q, int64_t q_stride, const AttentionShape& shape, const PagedKvView& kv,
                     std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head,
                     std::span<uint8_t> scratch, float* out, int64_t out_stride);
}  // namespace avx512bf16
#endif

PromptFormula PromptFormulaHere() {
  // The kernel path in use (ActiveIsa: PARALLM_ISA, tests' ForceIsa) bounds the instructions, as for MatMul.
  const IsaPath isa = ActiveIsa();
  if (isa == IsaPath::kAmx && HasAmxBf16()) return PromptFormula::kTiles;
  if ((isa == IsaPath::kAmx || isa == IsaPath::kAvx512) && HasAvx512Bf16()) return PromptFormula::kPairs;
  return PromptFormula::kNone;
}

bool PromptAttentionCovers(const AttentionShape& shape) {
  return PromptFormulaHere() != PromptFormula::kNone && shape.sliding_window == 0 && shape.softcap == 0 &&
         shape.head_dim % 32 == 0 && shape.head_dim > 0 && shape.head_dim <= 256;
}

int64_t PromptAttentionScratchBytes(const AttentionShape& shape, int64_t n_ctx_last) {
#if defined(__x86_64__)
  return amx::PromptAttentionScratchBytes(shape, n_ctx_last);  // both kernels' layout
#else
  (void)shape, (void)n_ctx_last;
  return 0;
#endif
}

void PromptAttention(const float* q, int64_t q_stride, const AttentionShape& shape, const PagedKvView& kv,
                     std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head,
                     std::span<uint8_t> scratch, float* out, int64_t out_stride) {
  PARALLM_CHECK_MSG(PromptAttentionCovers(shape), "PromptAttention on a CPU or layer shape it does not cover");
  PARALLM_CHECK(n_tokens >= 1 && n_ctx_first >= 1 && kv_head >= 0 && kv_head < shape.n_kv_heads);
  const int64_t n_ctx_last = n_ctx_first + n_tokens - 1;
  PARALLM_CHECK(n_ctx_last <= static_cast<int64_t>(block_table.size()) * kv.block_size);
  PARALLM_CHECK(static_cast<int64_t>(scratch.size()) >= PromptAttentionScratchBytes(shape, n_ctx_last));
#if defined(__x86_64__)
  if (PromptFormulaHere() == PromptFormula::kTiles) {
    amx::PromptAttention(q, q_stride, shape, kv, block_table, n_ctx_first, n_tokens, kv_head, scratch, out, out_stride);
  } else {
    avx512bf16::PromptAttention(q, q_stride, shape, kv, block_table, n_ctx_first, n_tokens, kv_head, scratch, out,
                                out_stride);
  }
#else
  (void)q, (void)q_stride, (void)out, (void)out_stride;
#endif
}

namespace ref {
namespace {

// The pairs formula's step over 32 products: acc = (acc + a[2i+1] b[2i+1]) + a[2i] b[2i] for i = 0..15. Not
// vectorized: GCC 12.2 at -O2 vectorizes this in-order sum (odd element first) into wrong results (-3.96 for 0.054 on
// random normal operands), while the same loop taking the even element first comes out right.
__attribute__((optimize("no-tree-vectorize"))) float PairsStep(float acc, const float* a, const float* b) {
  for (int i = 0; i < 32; i += 2) acc = (acc + a[i + 1] * b[i + 1]) + a[i] * b[i];
  return acc;
}

}  // namespace

void PromptAttention(PromptFormula formula, const float* q, int64_t q_stride, const AttentionShape& s,
                     const PagedKvView& kv, std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens,
                     int kv_head, float* out, int64_t out_stride) {
  PARALLM_CHECK(s.head_dim % 32 == 0 && s.sliding_window == 0 && s.softcap == 0 && formula != PromptFormula::kNone);
  float (*step)(float, const float*, const float*) = formula == PromptFormula::kTiles ? mm::Bf16TileStep : PairsStep;
  const int D = s.head_dim, group = s.n_heads / s.n_kv_heads;
  const int64_t n_ctx_last = n_ctx_first + n_tokens - 1;
  const size_t elem = KvElementBytes(kv.dtype);
  // Keys and values of positions [0, n_ctx_last) as bf16 values in f32: k[j * D + d].
  std::vector<float> k(static_cast<size_t>(n_ctx_last * D)), v(k.size());
  for (int64_t j = 0; j < n_ctx_last; ++j) {
    const int64_t slot = SlotOf(kv, block_table, j);
    const int64_t row = slot * kv.slot_stride + static_cast<int64_t>(kv_head) * D;
    const bool int8 = kv.dtype == KvDtype::kInt8;
    const float ks = int8 ? kv.key_scales[slot * s.n_kv_heads + kv_head] : 1.0f;
    const float vs = int8 ? kv.value_scales[slot * s.n_kv_heads + kv_head] : 1.0f;
    for (int d = 0; d < D; ++d) {
      const size_t at = static_cast<size_t>(row + d) * elem;
      k[static_cast<size_t>(j * D + d)] =
          mm::FromBf16(mm::ToBf16(DecodeKvElement(kv.dtype, static_cast<const char*>(kv.keys) + at, 0, ks)));
      v[static_cast<size_t>(j * D + d)] =
          mm::FromBf16(mm::ToBf16(DecodeKvElement(kv.dtype, static_cast<const char*>(kv.values) + at, 0, vs)));
    }
  }
  std::vector<float> qb(static_cast<size_t>(D)), e, column(32);
  for (int i = 0; i < n_tokens; ++i) {
    const int64_t n_ctx = n_ctx_first + i, n_chunks = (n_ctx + 31) / 32;
    for (int h = kv_head * group; h < (kv_head + 1) * group; ++h) {
      const float* qh = q + i * q_stride + static_cast<int64_t>(h) * D;
      for (int d = 0; d < D; ++d) qb[static_cast<size_t>(d)] = mm::FromBf16(mm::ToBf16(qh[d]));
      e.assign(static_cast<size_t>(n_chunks * 32), 0.0f);
      float m = -INFINITY;
      for (int64_t j = 0; j < n_ctx; ++j) {
        float acc = 0;
        for (int c = 0; c < D; c += 32) acc = step(acc, qb.data() + c, k.data() + j * D + c);
        e[static_cast<size_t>(j)] = acc * s.scale;
        m = std::max(m, e[static_cast<size_t>(j)]);
      }
      float lanes[16] = {};
      for (int64_t j = 0; j < n_ctx; ++j) {
        float& x = e[static_cast<size_t>(j)];
        x = mm::FromBf16(mm::ToBf16(ExpForBf16(x - m)));
        lanes[j % 16] += x;
      }
      for (int width = 8; width > 0; width /= 2)
        for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
      const float inv = 1.0f / lanes[0];
      for (int d = 0; d < D; ++d) {
        float o = 0;
        for (int64_t c = 0; c < n_chunks; ++c) {
          for (int64_t j = 0; j < 32; ++j) {
            const int64_t pos = c * 32 + j;
            column[static_cast<size_t>(j)] = pos < n_ctx ? v[static_cast<size_t>(pos * D + d)] : 0.0f;
          }
          o = step(o, e.data() + c * 32, column.data());
        }
        out[i * out_stride + static_cast<int64_t>(h) * D + d] = o * inv;
      }
    }
  }
}

}  // namespace ref
}  // namespace parallm
