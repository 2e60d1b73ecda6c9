// PromptAttention on AVX-512 BF16 dot products (VDPBF16PS), for CPUs with AVX512-BF16 but no AMX (AMD Zen 4 and 5,
// Intel Cooper Lake): kernels/prompt_attention.h states its formula (the pair formula); ref::PromptAttention is its
// twin.
//
// The same gathered tiles as the AMX kernel (cpu/prompt_attention_tiles-inl.h), read as vector operands: a row of a key
// tile is one dimension pair of 16 keys, so a VDPBF16PS of it with a query's pair broadcast adds that pair's two
// products to 16 scores; a row of a value tile is one key pair of 16 dimensions, so one with a token's probability pair
// broadcast adds two products to 16 outputs. Each score and output is one lane's chain of such steps in increasing
// pair order, which is the formula; a register tile of several tokens and key blocks (or dimension groups) shares each
// load among its chains, and a token's bits do not depend on the tile it sits in.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

#include "kernels/attention.h"
#include "kernels/kv_dtype.h"
#include "util/check.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace parallm::avx512bf16 {
namespace {

#include "kernels/cpu/bf16_pair-inl.h"
#include "kernels/cpu/prompt_attention_tiles-inl.h"

// A broadcast pair of bf16 (two neighbours of a row) as VDPBF16PS's left operand.
inline __m512bh Pair(const uint16_t* at) {
  int32_t v;
  std::memcpy(&v, at, 4);
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(v));
}
inline __m512bh Row(const uint8_t* at) { return reinterpret_cast<__m512bh>(_mm512_load_si512(at)); }

constexpr int kScoreBlocks = 2;  // key blocks (16 keys) per score tile
constexpr int kScoreTokens = 8;  // tokens per score tile
constexpr int kValueTokens = 6;  // tokens per value tile (of 4 dimension groups)

// Scores of tokens [r0, r0 + NT) of the tile (bf16 query rows of D at q) against key blocks [kb0, kb0 + KB): per lane,
// the chain over the D/2 dimension pairs in order.
template <int NT, int KB>
void ScoreTile(const uint16_t* q, int D, const uint8_t* keys, int64_t kb0, float* scores, int64_t nk) {
  const int64_t chunks = D / 32;
  __m512 acc[NT][KB];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 4
    for (int b = 0; b < KB; ++b) acc[t][b] = _mm512_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
#pragma GCC unroll 2
    for (int p = 0; p < 16; ++p) {
      __m512bh k[KB];
#pragma GCC unroll 4
      for (int b = 0; b < KB; ++b) k[b] = Row(keys + ((kb0 + b) * chunks + c) * kTile + p * 64);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m512bh qp = Pair(q + t * D + c * 32 + 2 * p);
#pragma GCC unroll 4
        for (int b = 0; b < KB; ++b) acc[t][b] = _mm512_dpbf16_ps(acc[t][b], qp, k[b]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 4
    for (int b = 0; b < KB; ++b) _mm512_store_ps(scores + t * nk + (kb0 + b) * 16, acc[t][b]);
}

// Outputs of tokens [0, NT) (their bf16 probability rows of nk at probs) for dimension groups [g0, g0 + NG) over key
// chunks [0, n_chunks): per lane, the chain over the key pairs in order. Stored to o (rows of D floats).
template <int NT, int NG>
void ValueTile(const uint16_t* probs, int64_t nk, const uint8_t* values, int groups, int g0, int64_t n_chunks,
               float* o, int D) {
  __m512 acc[NT][NG];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g) acc[t][g] = _mm512_setzero_ps();
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
#pragma GCC unroll 2
    for (int p = 0; p < 16; ++p) {
      __m512bh v[NG];
#pragma GCC unroll 4
      for (int g = 0; g < NG; ++g) v[g] = Row(values + (ch * groups + g0 + g) * kTile + p * 64);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m512bh ep = Pair(probs + t * nk + ch * 32 + 2 * p);
#pragma GCC unroll 4
        for (int g = 0; g < NG; ++g) acc[t][g] = _mm512_dpbf16_ps(acc[t][g], ep, v[g]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 4
    for (int g = 0; g < NG; ++g) _mm512_store_ps(o + t * D + (g0 + g) * 16, acc[t][g]);
}

// Tile functions for 1..N tokens, indexed by tokens - 1.
template <int KB, int... I>
constexpr auto ScoreTiles(std::integer_sequence<int, I...>) {
  return std::array{&ScoreTile<I + 1, KB>...};
}
template <int NG, int... I>
constexpr auto ValueTiles(std::integer_sequence<int, I...>) {
  return std::array{&ValueTile<I + 1, NG>...};
}

}  // namespace

void PromptAttention(const float* q, int64_t q_stride, const AttentionShape& s, const PagedKvView& kv,
                     std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head,
                     std::span<uint8_t> scratch, float* out, int64_t out_stride) {
  static constexpr auto kScores = ScoreTiles<kScoreBlocks>(std::make_integer_sequence<int, kScoreTokens>{});
  static constexpr auto kValues4 = ValueTiles<4>(std::make_integer_sequence<int, kValueTokens>{});
  static constexpr auto kValues2 = ValueTiles<2>(std::make_integer_sequence<int, kValueTokens>{});
  const int D = s.head_dim, groups = D / 16, group = s.n_heads / s.n_kv_heads;
  const int64_t n_ctx_last = n_ctx_first + n_tokens - 1;
  const Layout lay(s, n_ctx_last);
  auto* base = reinterpret_cast<uint8_t*>(Align64(reinterpret_cast<int64_t>(scratch.data())));
  GatherKv(s, kv, block_table, n_ctx_last, kv_head, lay, base);
  const uint8_t* keys = base + lay.keys;
  const uint8_t* values = base + lay.values;
  auto* scores = reinterpret_cast<float*>(base + lay.scores);
  auto* probs = reinterpret_cast<uint16_t*>(base + lay.probs);
  auto* qb = reinterpret_cast<uint16_t*>(base + lay.q);
  auto* o = reinterpret_cast<float*>(base + lay.o);

  for (int t0 = 0; t0 < n_tokens; t0 += kTok) {
    const int nt = std::min(kTok, n_tokens - t0);
    const int64_t nk = Round32(n_ctx_first + t0 + nt - 1);  // this tile's keys
    for (int h = kv_head * group; h < (kv_head + 1) * group; ++h) {
      // The tile's queries as rows of D bf16.
      for (int r = 0; r < nt; ++r) {
        const float* qr = q + (t0 + r) * q_stride + static_cast<int64_t>(h) * D;
        for (int c = 0; c < D; c += 32)
          _mm512_store_si512(qb + r * D + c, ConsecutiveBf16(_mm512_loadu_ps(qr + c), _mm512_loadu_ps(qr + c + 16)));
      }
      for (int r0 = 0; r0 < nt; r0 += kScoreTokens) {
        const int n = std::min(kScoreTokens, nt - r0);
        for (int64_t kb = 0; kb < nk / 16; kb += kScoreBlocks)
          kScores[static_cast<size_t>(n - 1)](qb + r0 * D, D, keys, kb, scores + r0 * lay.nk, lay.nk);
      }
      alignas(64) float inv[kTok];
      for (int r = 0; r < nt; ++r)
        inv[r] = SoftmaxRow(scores + r * lay.nk, n_ctx_first + t0 + r, nk, s.scale, probs + r * lay.nk);
      for (int r0 = 0; r0 < nt; r0 += kValueTokens) {
        const size_t n = static_cast<size_t>(std::min(kValueTokens, nt - r0) - 1);
        const uint16_t* pr = probs + r0 * lay.nk;
        int g0 = 0;
        for (; groups - g0 >= 4; g0 += 4) kValues4[n](pr, lay.nk, values, groups, g0, nk / 32, o + r0 * D, D);
        for (; g0 < groups; g0 += 2) kValues2[n](pr, lay.nk, values, groups, g0, nk / 32, o + r0 * D, D);
      }
      for (int r = 0; r < nt; ++r) {
        float* dst = out + (t0 + r) * out_stride + static_cast<int64_t>(h) * D;
        const __m512 f = _mm512_set1_ps(inv[r]);
        for (int d = 0; d < D; d += 16) _mm512_storeu_ps(dst + d, _mm512_mul_ps(_mm512_load_ps(o + r * D + d), f));
      }
    }
  }
}

}  // namespace parallm::avx512bf16

#pragma GCC diagnostic pop
#pragma GCC pop_options
