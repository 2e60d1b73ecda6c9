// PromptAttention on AMX-BF16 tiles (kernels/prompt_attention.h states the formula; ref::PromptAttention is its twin).
//
// A call gathers its KV head's keys and values of positions [0, n_ctx_last) once, as bf16 tiles, and then serves all
// its tokens and the group's query heads from them: per tile of 16 tokens and query head, the scores of the key blocks
// up to the tile's last token (tiles of 16 tokens x 16 keys, one multiply per 32 dimensions), the softmax of each
// token's row in f32 on the vector units, and the products with the values (tiles of 16 tokens x 16 dimensions,
// summed in the tile registers over all the key chunks).
//
// The layouts (cpu/prompt_attention_tiles-inl.h): keys as the B operand of q·k, values as the B operand of p·v, the
// queries as A tiles (chunk c's 16 tokens x 32 dimensions at c KiB), the probabilities as the A operand of p·v.
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
#include "kernels/cpu/prompt_attention_tiles-inl.h"

#define kC0 0
#define kC1 1
#define kC2 2
#define kC3 3
#define kA 4
#define kB0 6
#define kB1 7

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

}  // namespace

int64_t PromptAttentionScratchBytes(const AttentionShape& shape, int64_t n_ctx_last) {
  return Layout(shape, n_ctx_last).total;
}

void PromptAttention(const float* q, int64_t q_stride, const AttentionShape& s, const PagedKvView& kv,
                     std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head,
                     std::span<uint8_t> scratch, float* out, int64_t out_stride) {
  const int D = s.head_dim, chunks = D / 32, groups = D / 16, group = s.n_heads / s.n_kv_heads;
  const int64_t n_ctx_last = n_ctx_first + n_tokens - 1;
  const CallScratch call = GatherCall(s, kv, block_table, n_ctx_last, kv_head, scratch);
  const uint8_t* keys = call.keys;
  const uint8_t* values = call.values;
  float* scores = call.scores;
  uint16_t* probs = call.probs;
  uint8_t* qb = call.q;
  float* o = call.o;
  const int64_t scores_stride = call.nk * 4, probs_stride = call.nk * 2;

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
        uint16_t* row = probs + r * call.nk;
        if (r < nt) {
          inv[r] = SoftmaxRow(scores + r * call.nk, n_ctx_first + t0 + r, nk, s.scale, row);
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
