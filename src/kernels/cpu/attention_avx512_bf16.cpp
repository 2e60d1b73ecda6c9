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

// One register tile of chains: out[t * out_stride + 16 j + lane] for tokens t < NT and column vectors j < NJ, each the
// chain over n_chunks x 16 pairs in order: acc = VDPBF16PS(acc, pair p of chunk c of token t's row (a, a_stride bf16
// apart, 32 a chunk), row p of chunk c of column vector j (at b + c * b_chunk + j * b_column, rows of 64 bytes)).
// Scores: a = the queries, the column vectors key blocks, a chunk 32 dimensions. Outputs: a = the probabilities, the
// column vectors dimension groups, a chunk 32 keys.
template <int NT, int NJ>
void PairTile(const uint16_t* a, int64_t a_stride, const uint8_t* b, int64_t b_chunk, int64_t b_column,
              int64_t n_chunks, float* out, int64_t out_stride) {
  __m512 acc[NT][NJ];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) acc[t][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < n_chunks; ++c) {
#pragma GCC unroll 2
    for (int p = 0; p < 16; ++p) {
      __m512bh col[NJ];
#pragma GCC unroll 4
      for (int j = 0; j < NJ; ++j) col[j] = Row(b + c * b_chunk + j * b_column + p * 64);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m512bh pair = Pair(a + t * a_stride + c * 32 + 2 * p);
#pragma GCC unroll 4
        for (int j = 0; j < NJ; ++j) acc[t][j] = _mm512_dpbf16_ps(acc[t][j], pair, col[j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) _mm512_store_ps(out + t * out_stride + j * 16, acc[t][j]);
}

// Tile functions for 1..N tokens, indexed by tokens - 1.
template <int NJ, int... I>
constexpr auto PairTiles(std::integer_sequence<int, I...>) {
  return std::array{&PairTile<I + 1, NJ>...};
}

}  // namespace

void PromptAttention(const float* q, int64_t q_stride, const AttentionShape& s, const PagedKvView& kv,
                     std::span<const int32_t> block_table, int64_t n_ctx_first, int n_tokens, int kv_head,
                     std::span<uint8_t> scratch, float* out, int64_t out_stride) {
  static constexpr auto kScores = PairTiles<kScoreBlocks>(std::make_integer_sequence<int, kScoreTokens>{});
  static constexpr auto kValues4 = PairTiles<4>(std::make_integer_sequence<int, kValueTokens>{});
  static constexpr auto kValues2 = PairTiles<2>(std::make_integer_sequence<int, kValueTokens>{});
  const int D = s.head_dim, chunks = D / 32, groups = D / 16, group = s.n_heads / s.n_kv_heads;
  const CallScratch call = GatherCall(s, kv, block_table, n_ctx_first + n_tokens - 1, kv_head, scratch);
  const int64_t nk_all = call.nk;
  uint16_t* qb = reinterpret_cast<uint16_t*>(call.q);
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
      // Scores: key blocks of 16 as the column vectors, each chunk 32 dimensions.
      for (int r0 = 0; r0 < nt; r0 += kScoreTokens) {
        const size_t n = static_cast<size_t>(std::min(kScoreTokens, nt - r0) - 1);
        for (int64_t kb = 0; kb < nk / 16; kb += kScoreBlocks)
          kScores[n](qb + r0 * D, D, call.keys + kb * chunks * kTile, kTile, chunks * kTile, chunks,
                     call.scores + r0 * nk_all + kb * 16, nk_all);
      }
      alignas(64) float inv[kTok];
      for (int r = 0; r < nt; ++r)
        inv[r] = SoftmaxRow(call.scores + r * nk_all, n_ctx_first + t0 + r, nk, s.scale, call.probs + r * nk_all);
      // Outputs: dimension groups of 16 as the column vectors, each chunk 32 keys.
      for (int r0 = 0; r0 < nt; r0 += kValueTokens) {
        const size_t n = static_cast<size_t>(std::min(kValueTokens, nt - r0) - 1);
        const uint16_t* pr = call.probs + r0 * nk_all;
        float* o = call.o + r0 * D;
        int g0 = 0;
        for (; groups - g0 >= 4; g0 += 4)
          kValues4[n](pr, nk_all, call.values + g0 * kTile, groups * kTile, kTile, nk / 32, o + g0 * 16, D);
        for (; g0 < groups; g0 += 2)
          kValues2[n](pr, nk_all, call.values + g0 * kTile, groups * kTile, kTile, nk / 32, o + g0 * 16, D);
      }
      for (int r = 0; r < nt; ++r) {
        float* dst = out + (t0 + r) * out_stride + static_cast<int64_t>(h) * D;
        const __m512 f = _mm512_set1_ps(inv[r]);
        for (int d = 0; d < D; d += 16)
          _mm512_storeu_ps(dst + d, _mm512_mul_ps(_mm512_load_ps(call.o + r * D + d), f));
      }
    }
  }
}

}  // namespace parallm::avx512bf16

#pragma GCC diagnostic pop
#pragma GCC pop_options
