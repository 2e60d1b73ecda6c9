// PromptAttention on AMX-BF16 tiles (kernels/prompt_attention.h states the formula; ref::PromptAttention is its twin).
//
// A call gathers its KV head's keys and values of positions [0, n_ctx_last) once, as bf16 tiles, and then serves all
// its tokens and the group's query heads from them: per tile of 16 tokens and query head, the scores of the key blocks
// up to the tile's last token (tiles of 16 tokens x 16 keys, one multiply per 32 dimensions), the softmax of each
// token's row in f32 on the vector units, and the products with the values (tiles of 16 tokens x 16 dimensions,
// summed in the tile registers over all the key chunks).
//
// Layouts, each tile 16 rows of 64 bytes:
//   keys    B operand of q·k: key block kb (16 keys) x dimension chunk c (32): row r = dimensions 2r, 2r + 1 of each
//           of the 16 keys (a 32-bit pair per key), at ((kb * D/32) + c) KiB
//   values  B operand of p·v: key chunk ch (32 keys) x dimension group g (16): row r = keys 2r, 2r + 1 of each of
//           the 16 dimensions, at ((ch * D/16) + g) KiB
//   q       A operand: chunk c's 16 tokens x 32 dimensions, at c KiB
//   scores  16 rows of nk f32 (nk: n_ctx_last rounded up to 32); probs: 16 rows of nk bf16 (the A operand of p·v)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/attention.h"
#include "kernels/cpu/amx_tile_config.h"
#include "kernels/kv_dtype.h"
#include "util/check.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace parallm::amx {
namespace {

#include "kernels/cpu/bf16_pair-inl.h"

constexpr int kTok = 16;         // tokens per tile (tile rows)
constexpr int64_t kTile = 1024;  // bytes of one tile

#define kC0 0
#define kC1 1
#define kC2 2
#define kC3 3
#define kA 4
#define kB0 6
#define kB1 7

int64_t Round32(int64_t n) { return (n + 31) / 32 * 32; }
int64_t Align64(int64_t n) { return (n + 63) / 64 * 64; }

// Where each part of a call's scratch lies (bytes from the 64-aligned start).
struct Layout {
  int64_t nk = 0;  // positions gathered: n_ctx_last rounded up to 32
  int64_t keys = 0, values = 0, scores = 0, probs = 0, q = 0, o = 0, total = 0;

  Layout(const AttentionShape& s, int64_t n_ctx_last) : nk(Round32(n_ctx_last)) {
    auto take = [&](int64_t bytes) {
      const int64_t at = total;
      total += Align64(bytes);
      return at;
    };
    keys = take(nk * s.head_dim * 2);
    values = take(nk * s.head_dim * 2);
    scores = take(kTok * nk * 4);
    probs = take(kTok * nk * 2);
    q = take(kTok * s.head_dim * 2);
    o = take(kTok * s.head_dim * 4);
    total += 64;  // the start is aligned up to 64 bytes inside the caller's buffer
  }
};

// 16 f32 of a stored row from element i (int8: code * the row's scale, as DecodeKvElement).
template <KvDtype kDt>
inline __m512 LoadKv16(const void* row, int64_t i, float scale) {
  if constexpr (kDt == KvDtype::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(row) + i);
  } else if constexpr (kDt == KvDtype::kBf16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else if constexpr (kDt == KvDtype::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + i)));
  } else {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const int8_t*>(row) + i));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), _mm512_set1_ps(scale));
  }
}

// 32 consecutive f32 (lo, then hi) as 32 bf16 in order: 16 pairs of neighbours.
inline __m512i ConsecutiveBf16(__m512 lo, __m512 hi) { return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)); }

// ExpClamped (kernels/fast_exp.h) on 16 lanes, operation for operation, so each lane has its bits.
inline __m512 Exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(
      _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f)));
  r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(-2.12194440e-4f)));
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

// The call's keys and values of positions [0, n_ctx_last) into their tile layouts; positions [n_ctx_last, nk) zero.
template <KvDtype kDt>
void Gather(const AttentionShape& s, const PagedKvView& kv, std::span<const int32_t> block_table, int64_t n_ctx_last,
            int kv_head, const Layout& lay, uint8_t* base) {
  const int D = s.head_dim, chunks = D / 32, groups = D / 16;
  const int64_t elem = static_cast<int64_t>(KvElementBytes(kDt));
  auto row_of = [&](const void* layer, int64_t slot) {
    return static_cast<const char*>(layer) + (slot * kv.slot_stride + static_cast<int64_t>(kv_head) * D) * elem;
  };
  auto scale_of = [&](const float* scales, int64_t slot) {
    return kDt == KvDtype::kInt8 ? scales[slot * s.n_kv_heads + kv_head] : 1.0f;
  };
  uint8_t* keys = base + lay.keys;
  uint8_t* values = base + lay.values;
  // Keys: each key's chunk of 32 dimensions is 16 pairs, one per tile row, in the key's column.
  const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(64));
  for (int64_t j = 0; j < lay.nk; ++j) {
    const bool in = j < n_ctx_last;
    const int64_t slot = in ? SlotOf(kv, block_table, j) : 0;
    const void* row = in ? row_of(kv.keys, slot) : nullptr;
    const float scale = in ? scale_of(kv.key_scales, slot) : 0.0f;
    uint8_t* column = keys + (j / 16) * chunks * kTile + (j % 16) * 4;
    for (int c = 0; c < chunks; ++c) {
      const __m512i pairs =
          in ? ConsecutiveBf16(LoadKv16<kDt>(row, 32 * c, scale), LoadKv16<kDt>(row, 32 * c + 16, scale))
             : _mm512_setzero_si512();
      _mm512_i32scatter_epi32(column + c * kTile, rows, pairs, 1);
    }
  }
  // Values: tile row r of a chunk interleaves keys 2r and 2r + 1, 16 dimensions at a time.
  for (int64_t j0 = 0; j0 < lay.nk; j0 += 2) {
    const int64_t ch = j0 / 32, r = (j0 % 32) / 2;
    const bool in0 = j0 < n_ctx_last, in1 = j0 + 1 < n_ctx_last;
    const int64_t slot0 = in0 ? SlotOf(kv, block_table, j0) : 0,
                  slot1 = in1 ? SlotOf(kv, block_table, j0 + 1) : 0;
    const void* row0 = in0 ? row_of(kv.values, slot0) : nullptr;
    const void* row1 = in1 ? row_of(kv.values, slot1) : nullptr;
    const float scale0 = in0 ? scale_of(kv.value_scales, slot0) : 0.0f;
    const float scale1 = in1 ? scale_of(kv.value_scales, slot1) : 0.0f;
    for (int g = 0; g < groups; ++g) {
      const __m512 lo = in0 ? LoadKv16<kDt>(row0, 16 * g, scale0) : _mm512_setzero_ps();
      const __m512 hi = in1 ? LoadKv16<kDt>(row1, 16 * g, scale1) : _mm512_setzero_ps();
      _mm512_store_si512(values + (ch * groups + g) * kTile + r * 64, Bf16Pair(lo, hi));
    }
  }
}

// Tiles of sums of p·v for dimension groups [g0, g0 + kGroups) over key chunks [0, n_chunks), stored to o.
template <int kGroups>
void ProbsTimesValues(const uint8_t* probs, int64_t probs_stride, const uint8_t* values, int groups, int g0,
                      int64_t n_chunks, float* o, int64_t o_stride) {
  _tile_zero(kC0);
  _tile_zero(kC1);
  if constexpr (kGroups == 4) {
    _tile_zero(kC2);
    _tile_zero(kC3);
  }
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    const uint8_t* v = values + (ch * groups + g0) * kTile;
    _tile_loadd(kA, probs + ch * 64, probs_stride);
    _tile_loadd(kB0, v, 64);
    _tile_loadd(kB1, v + kTile, 64);
    _tile_dpbf16ps(kC0, kA, kB0);
    _tile_dpbf16ps(kC1, kA, kB1);
    if constexpr (kGroups == 4) {
      _tile_loadd(kB0, v + 2 * kTile, 64);
      _tile_loadd(kB1, v + 3 * kTile, 64);
      _tile_dpbf16ps(kC2, kA, kB0);
      _tile_dpbf16ps(kC3, kA, kB1);
    }
  }
  _tile_stored(kC0, o + 16 * g0, o_stride);
  _tile_stored(kC1, o + 16 * (g0 + 1), o_stride);
  if constexpr (kGroups == 4) {
    _tile_stored(kC2, o + 16 * (g0 + 2), o_stride);
    _tile_stored(kC3, o + 16 * (g0 + 3), o_stride);
  }
}

// One token's softmax row: probs[j] = bf16(exp(scores[j] * scale - max)) for j < n_ctx, 0 for j in [n_ctx, nk);
// returns 1 / (their sum, in the formula's lane order).
float SoftmaxRow(const float* scores, int64_t n_ctx, int64_t nk, float scale, uint16_t* probs) {
  const __m512 vscale = _mm512_set1_ps(scale);
  auto mask_at = [&](int64_t j) {
    return j + 16 <= n_ctx ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n_ctx - j)) - 1);
  };
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n_ctx; j += 16) {
    const __mmask16 m = mask_at(j);
    mx = _mm512_mask_max_ps(mx, m, mx, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, scores + j), vscale));
  }
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j < n_ctx; j += 16) {
    const __mmask16 m = mask_at(j);
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, scores + j), vscale), vmax));
    const __m256i pb = _mm256_maskz_mov_epi16(m, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(e)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(probs + j), pb);
    sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(pb), 16)));
  }
  for (; j < nk; j += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(probs + j), _mm256_setzero_si256());
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  for (int width = 8; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return 1.0f / lanes[0];
}

}  // namespace

int64_t PromptAttentionScratchBytes(const AttentionShape& shape, int64_t n_ctx_last) {
  return Layout(shape, n_ctx_last).total;
}

void PromptAttention(const float* q, int64_t q_stride, const AttentionShape& s, const PagedKvView& kv,
                     std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head,
                     std::span<uint8_t> scratch, float* out, int64_t out_stride) {
  const int D = s.head_dim, chunks = D / 32, groups = D / 16, group = s.n_heads / s.n_kv_heads;
  const int64_t n_ctx_last = n_ctx_first + n_tokens - 1;
  const Layout lay(s, n_ctx_last);
  auto* base = reinterpret_cast<uint8_t*>(Align64(reinterpret_cast<int64_t>(scratch.data())));
  switch (kv.dtype) {
    case KvDtype::kF32: Gather<KvDtype::kF32>(s, kv, block_table, n_ctx_last, kv_head, lay, base); break;
    case KvDtype::kBf16: Gather<KvDtype::kBf16>(s, kv, block_table, n_ctx_last, kv_head, lay, base); break;
    case KvDtype::kInt8: Gather<KvDtype::kInt8>(s, kv, block_table, n_ctx_last, kv_head, lay, base); break;
    case KvDtype::kF16: Gather<KvDtype::kF16>(s, kv, block_table, n_ctx_last, kv_head, lay, base); break;
  }
  const uint8_t* keys = base + lay.keys;
  const uint8_t* values = base + lay.values;
  auto* scores = reinterpret_cast<float*>(base + lay.scores);
  auto* probs = reinterpret_cast<uint16_t*>(base + lay.probs);
  uint8_t* qb = base + lay.q;
  auto* o = reinterpret_cast<float*>(base + lay.o);
  const int64_t scores_stride = lay.nk * 4, probs_stride = lay.nk * 2;

  amx::TileConfig config;
  for (int t = 0; t < 8; ++t) config.Set(t, 16, 64);
  amx::LoadTileConfig(config);
  for (int t0 = 0; t0 < n_tokens; t0 += kTok) {
    const int nt = std::min(kTok, n_tokens - t0);
    const int64_t nk = Round32(n_ctx_first + t0 + nt - 1);  // this tile's keys
    for (int h = kv_head * group; h < (kv_head + 1) * group; ++h) {
      // The tile's queries as bf16 A tiles (rows past the last token zero).
      for (int r = 0; r < kTok; ++r) {
        const float* qr = q + (t0 + r) * q_stride + static_cast<int64_t>(h) * D;
        for (int c = 0; c < chunks; ++c) {
          const __m512i v = r < nt ? ConsecutiveBf16(_mm512_loadu_ps(qr + 32 * c), _mm512_loadu_ps(qr + 32 * c + 16))
                                   : _mm512_setzero_si512();
          _mm512_store_si512(qb + c * kTile + r * 64, v);
        }
      }
      // Scores, two key blocks (32 keys) at a time.
      for (int64_t kb = 0; kb < nk / 16; kb += 2) {
        _tile_zero(kC0);
        _tile_zero(kC1);
        for (int c = 0; c < chunks; ++c) {
          _tile_loadd(kA, qb + c * kTile, 64);
          _tile_loadd(kB0, keys + (kb * chunks + c) * kTile, 64);
          _tile_loadd(kB1, keys + ((kb + 1) * chunks + c) * kTile, 64);
          _tile_dpbf16ps(kC0, kA, kB0);
          _tile_dpbf16ps(kC1, kA, kB1);
        }
        _tile_stored(kC0, scores + kb * 16, scores_stride);
        _tile_stored(kC1, scores + (kb + 1) * 16, scores_stride);
      }
      alignas(64) float inv[kTok];
      for (int r = 0; r < kTok; ++r) {
        uint16_t* row = probs + r * lay.nk;
        if (r < nt) {
          inv[r] = SoftmaxRow(scores + r * lay.nk, n_ctx_first + t0 + r, nk, s.scale, row);
        } else {
          std::memset(row, 0, static_cast<size_t>(nk) * 2);
        }
      }
      for (int g0 = 0; g0 < groups; g0 += 4) {
        if (groups - g0 >= 4) {
          ProbsTimesValues<4>(reinterpret_cast<const uint8_t*>(probs), probs_stride, values, groups, g0, nk / 32, o,
                              D * 4);
        } else {
          ProbsTimesValues<2>(reinterpret_cast<const uint8_t*>(probs), probs_stride, values, groups, g0, nk / 32, o,
                              D * 4);
        }
      }
      for (int r = 0; r < nt; ++r) {
        float* dst = out + (t0 + r) * out_stride + static_cast<int64_t>(h) * D;
        const __m512 f = _mm512_set1_ps(inv[r]);
        for (int d = 0; d < D; d += 16) _mm512_storeu_ps(dst + d, _mm512_mul_ps(_mm512_load_ps(o + r * D + d), f));
      }
    }
  }
  _tile_release();
}

}  // namespace parallm::amx

#undef kC0
#undef kC1
#undef kC2
#undef kC3
#undef kA
#undef kB0
#undef kB1

#pragma GCC diagnostic pop
#pragma GCC pop_options
