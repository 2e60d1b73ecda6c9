// What both PromptAttention kernels share (cpu/attention_amx_bf16.cpp on AMX tiles, cpu/attention_avx512_bf16.cpp on
// AVX-512 BF16 dot products): the call's scratch layout, the gathering of its KV head's keys and values into bf16
// tiles, and a token's softmax row.
//
// Layouts, each tile 16 rows of 64 bytes:
//   keys    key block kb (16 keys) x dimension chunk c (32): row r = dimensions 2r, 2r + 1 of each of the 16 keys (a
//           32-bit pair per key), at ((kb * D/32) + c) KiB
//   values  key chunk ch (32 keys) x dimension group g (16): row r = keys 2r, 2r + 1 of each of the 16 dimensions, at
//           ((ch * D/16) + g) KiB
//   q       16 tokens' queries as bf16 (the kernel's own layout)
//   scores  16 rows of nk f32 (nk: n_ctx_last rounded up to 32); probs: 16 rows of nk bf16
//
// Included by those files inside their `#pragma GCC target` regions (AVX-512 BF16) and anonymous namespaces, after
// bf16_pair-inl.h. Requires: <immintrin.h>, <cmath>, <cstring>, <span>, kernels/attention.h, kernels/kv_dtype.h.

constexpr int kTok = 16;         // tokens per tile (tile rows)
constexpr int64_t kTile = 1024;  // bytes of one tile

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

// ExpForBf16 (kernels/fast_exp.h) on 16 lanes, operation for operation, so each lane has its bits.
inline __m512 Exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 24);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
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

// A call's scratch, carved by its Layout, with the KV head's keys and values gathered: where both kernels start.
struct CallScratch {
  int64_t nk = 0;  // positions gathered (Layout::nk): the length of a row of scores or probs
  const uint8_t* keys = nullptr;
  const uint8_t* values = nullptr;
  float* scores = nullptr;
  uint16_t* probs = nullptr;
  uint8_t* q = nullptr;
  float* o = nullptr;
};

CallScratch GatherCall(const AttentionShape& s, const PagedKvView& kv, std::span<const int32_t> block_table,
                       int64_t n_ctx_last, int kv_head, std::span<uint8_t> scratch) {
  const Layout lay(s, n_ctx_last);
  auto* base = reinterpret_cast<uint8_t*>(Align64(reinterpret_cast<int64_t>(scratch.data())));
  switch (kv.dtype) {
    case KvDtype::kF32: Gather<KvDtype::kF32>(s, kv, block_table, n_ctx_last, kv_head, lay, base); break;
    case KvDtype::kBf16: Gather<KvDtype::kBf16>(s, kv, block_table, n_ctx_last, kv_head, lay, base); break;
    case KvDtype::kInt8: Gather<KvDtype::kInt8>(s, kv, block_table, n_ctx_last, kv_head, lay, base); break;
    case KvDtype::kF16: Gather<KvDtype::kF16>(s, kv, block_table, n_ctx_last, kv_head, lay, base); break;
  }
  return CallScratch{lay.nk,
                     base + lay.keys,
                     base + lay.values,
                     reinterpret_cast<float*>(base + lay.scores),
                     reinterpret_cast<uint16_t*>(base + lay.probs),
                     base + lay.q,
                     reinterpret_cast<float*>(base + lay.o)};
}

// One token's softmax row: probs[j] = bf16(exp(scores[j] * scale - max)) for j < n_ctx, 0 for j in [n_ctx, nk);
// returns 1 / (their sum, in the formula's lane order).
float SoftmaxRow(const float* scores, int64_t n_ctx, int64_t nk, float scale, uint16_t* probs) {
  const __m512 vscale = _mm512_set1_ps(scale);
  const int64_t full = n_ctx / 16 * 16;  // whole vectors; then a masked one for the rest, if any
  const auto tail = static_cast<__mmask16>((1u << (n_ctx - full)) - 1);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < full; j += 16) mx = _mm512_max_ps(mx, _mm512_mul_ps(_mm512_loadu_ps(scores + j), vscale));
  if (tail != 0)
    mx = _mm512_mask_max_ps(mx, tail, mx, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, scores + full), vscale));
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  // Lane l sums its probabilities (as rounded to bf16) in increasing position; masked lanes add exact zeros.
  __m512 sum = _mm512_setzero_ps();
  auto probs_at = [&](int64_t j, __mmask16 m) {
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, scores + j), vscale), vmax));
    const __m256i pb = _mm256_maskz_mov_epi16(m, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(e)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(probs + j), pb);
    sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(pb), 16)));
  };
  for (int64_t j = 0; j < full; j += 16) probs_at(j, static_cast<__mmask16>(0xFFFF));
  int64_t j = full;
  if (tail != 0) {
    probs_at(j, tail);
    j += 16;
  }
  for (; j < nk; j += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(probs + j), _mm256_setzero_si256());
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  for (int width = 8; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return 1.0f / lanes[0];
}

