// The paged-attention kernel for one KV head and its group of query heads, written once for a vector of W floats
// (simd_vec-inl.h) and compiled once per instruction set: attention.cpp includes it inside a `#pragma GCC target`
// region and a namespace of its own, with PARALLM_SIMD_LANES defined as W. The order of every floating-point
// operation depends on W alone. It is a template over the stored element type (f32, bf16 bits, int8 with a scale
// per slot and head), decoded to f32 as rows load.
//
// Why this shape: in decode the keys and values are the only large data (1 KiB per position and layer on the 0.5B
// shape) and the 7 query heads of a group read the same rows, so each row is loaded once per token and used by the
// whole group while it is in L1. Scores come out W positions at a time: acc[i] holds position i's dot product
// spread over W lanes, and one transpose-and-add (TransposeSum) folds the W of them into one vector, W - 1 adds per
// W positions instead of a log2(W)-level horizontal reduction per position.

#include "kernels/simd_vec-inl.h"

// Transpose-and-add, one level: a and b each hold m = W / seg positions' partial sums, seg lanes per position
// (position after position). The result holds those 2m positions (a's, then b's) with seg / 2 lanes each: the
// first half of each position's lanes plus the second half.
constexpr int HalfLane(int seg, int lane, int half) {
  const int m = W / seg, seg2 = seg / 2, pos = lane / seg2;
  return (pos < m ? 0 : W) + (pos % m) * seg + half * seg2 + lane % seg2;
}

template <int Seg, size_t... L>
PARALLM_INLINE V CombineHalves(V a, V b, std::index_sequence<L...>) {
  return __builtin_shufflevector(a, b, HalfLane(Seg, L, 0)...) + __builtin_shufflevector(a, b, HalfLane(Seg, L, 1)...);
}

// v[0..W): W vectors of partial sums, one per position. Returns lane i = the sum of v[i]'s lanes, in log2(W)
// levels of pairwise shuffles and adds (2 shuffles and 1 add per pair).
template <int Seg = W>
PARALLM_INLINE V TransposeSum(V* v) {
  if constexpr (Seg == 1) {
    return v[0];
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < Seg / 2; ++i) v[i] = CombineHalves<Seg>(v[2 * i], v[2 * i + 1], std::make_index_sequence<W>());
    return TransposeSum<Seg / 2>(v);
  }
}

// Slots of positions [j0, j0 + W) through the block table: one division per tile, then a step along the table (a
// division per row costs as much as the dot products of a row). A partial last tile (n < W) repeats position j0 in
// its missing lanes, so every load stays within the sequence's own blocks; those lanes' scores are never used and
// their weights are zero.
PARALLM_INLINE void TileSlots(const GroupTask& t, int64_t j0, int n, int64_t (&slots)[W]) {
  int64_t block = j0 / t.block_size;
  int64_t offset = j0 % t.block_size;
  if (offset + n <= t.block_size) {  // the usual case: the tile lies in one block, its slots are consecutive
    const int64_t first = static_cast<int64_t>(t.block_table[block]) * t.block_size + offset;
    for (int i = 0; i < W; ++i) slots[i] = first + (i < n ? i : 0);
    return;
  }
  for (int i = 0; i < W; ++i) {
    if (i >= n) {
      slots[i] = slots[0];
      continue;
    }
    slots[i] = static_cast<int64_t>(t.block_table[block]) * t.block_size + offset;
    if (++offset == t.block_size) {
      offset = 0;
      ++block;
    }
  }
}

// Asks for the rows of positions [j, j + W) below the context's end (and int8's scales) to come into cache: with
// many sequences at long contexts every row is a miss, and the kernel's own loads, waiting on each tile's rows, reach
// a fraction of the memory's bandwidth. Called kPrefetchTiles tiles ahead of the tile being computed.
constexpr int kPrefetchTiles = 2;

template <class T>
PARALLM_INLINE void PrefetchTile(const GroupTask& t, const T* base, const float* scales, int64_t j) {
  const int64_t end = std::min<int64_t>(j + W, t.n_ctx);
  if (j >= end) return;
  int64_t block = j / t.block_size;
  int64_t offset = j % t.block_size;
  const int64_t row_bytes = static_cast<int64_t>(t.head_dim) * static_cast<int64_t>(sizeof(T));
  for (; j < end; ++j) {
    const int64_t slot = static_cast<int64_t>(t.block_table[block]) * t.block_size + offset;
    const char* row = reinterpret_cast<const char*>(base + slot * t.slot_stride);
    for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row + b);  // rows start on a line (kv_storage)
    if (scales != nullptr) __builtin_prefetch(scales + slot * t.scale_stride);
    if (++offset == t.block_size) {
      offset = 0;
      ++block;
    }
  }
}

// The stored element types (KvDtype): f32, bf16 (as its bits), f16 (F16Bits) and int8 (its scale applied by the
// caller), loaded W at a time or one by one, as f32. f16 converts exactly in hardware on x86 (F16C) and lane by lane
// elsewhere (tensor/fp16.h, the same values).
typedef uint16_t Vh __attribute__((vector_size(W * sizeof(uint16_t))));
typedef uint32_t Vu __attribute__((vector_size(W * sizeof(uint32_t))));
typedef int8_t Vb __attribute__((vector_size(W * sizeof(int8_t))));

PARALLM_INLINE V LoadRow(const float* p) { return Load(p); }
PARALLM_INLINE V LoadRow(const uint16_t* p) {
  Vh h;
  std::memcpy(&h, p, sizeof h);
  return (V)(__builtin_convertvector(h, Vu) << 16);
}
PARALLM_INLINE V LoadRow(const F16Bits* p) {
#if PARALLM_SIMD_LANES == 16
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif PARALLM_SIMD_LANES == 8
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  V v;
  for (int i = 0; i < W; ++i) v[i] = F16ToF32(p[i].bits);
  return v;
#endif
}
// GCC turns __builtin_convertvector from int8 lanes into one scalar conversion per lane, so the sign extension is
// written out per instruction set.
PARALLM_INLINE V LoadRow(const int8_t* p) {
#if PARALLM_SIMD_LANES == 16
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#elif PARALLM_SIMD_LANES == 8
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#elif defined(__x86_64__)
  int32_t four;
  std::memcpy(&four, p, sizeof four);
  __m128i x = _mm_cvtsi32_si128(four);
  x = _mm_unpacklo_epi8(x, x);                           // each byte twice: b0 b0 b1 b1 ...
  x = _mm_srai_epi32(_mm_unpacklo_epi16(x, x), 24);      // each byte in the top of its lane, shifted down signed
  return _mm_cvtepi32_ps(x);
#else
  Vb b;
  std::memcpy(&b, p, sizeof b);
  return __builtin_convertvector(b, V);
#endif
}
PARALLM_INLINE float Elem(const float* p, int d) { return p[d]; }
PARALLM_INLINE float Elem(const uint16_t* p, int d) {
  const uint32_t u = static_cast<uint32_t>(p[d]) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
PARALLM_INLINE float Elem(const int8_t* p, int d) { return static_cast<float>(p[d]); }
PARALLM_INLINE float Elem(const F16Bits* p, int d) {
#if defined(__x86_64__) && PARALLM_SIMD_LANES >= 8
  return _cvtsh_ss(p[d].bits);
#else
  return F16ToF32(p[d].bits);
#endif
}

// int8 rows' scales for a tile's slots (the scale of KV head h of slot s is at scales[s * scale_stride]).
PARALLM_INLINE V TileScales(const float* scales, int64_t stride, const int64_t (&slots)[W]) {
  V v;
  for (int i = 0; i < W; ++i) v[i] = scales[slots[i] * stride];
  return v;
}

PARALLM_INLINE float MaxOf(const float* x, int64_t n) {
  float mx = -INFINITY;
  int64_t j = 0;
  if (n >= W) {
    V m = Load(x);
    for (j = W; j + W <= n; j += W) {
      const V v = Load(x + j);
      m = m > v ? m : v;
    }
    for (int i = 0; i < W; ++i) mx = std::max(mx, m[i]);
  }
  for (; j < n; ++j) mx = std::max(mx, x[j]);
  return mx;
}

// Vector registers of the instruction set: 32 with AVX-512, 16 with AVX2 and SSE.
constexpr int kVectorRegisters = W == 16 ? 32 : 16;

// The dot products of one query head (qg: QN vectors, held in registers) with the tile's W key rows, lane i of the
// result for row i: each row's QN products accumulate in order of d (as in ScoreHead's general loop, so the same
// bits), one row after the other, reading each row through its own pointer once.
template <int QN, class U>
PARALLM_INLINE V ScoreRows(const float* qg, const U* const (&k)[W]) {
  V q[QN];
#pragma GCC unroll 8
  for (int c = 0; c < QN; ++c) q[c] = Load(qg + c * W);
  V acc[W];
#pragma GCC unroll 16
  for (int i = 0; i < W; ++i) {
    V a{};
#pragma GCC unroll 8
    for (int c = 0; c < QN; ++c) a = MulAdd(q[c], LoadRow(k[i] + c * W), a);
    acc[i] = a;
  }
  return TransposeSum(acc);
}

// One query head's scores (qg: head_dim floats) for the tile's W key rows k[i] of element type U (f32, decoded or
// stored so; bf16 / f16 / int8 read directly), lane i for row i; with kScaled (int8), the rows' scales in key_scale.
// The single-token kernel and the multi-token one both compute every score here: a score's bits depend on its query and
// key rows alone, not on the tile's other lanes (every lane's dot product and its fold in TransposeSum are the same
// operations), so where a position falls in a tile does not matter either.
template <bool kScaled, class U>
PARALLM_INLINE V ScoreHead(const float* qg, const U* const (&k)[W], int D, V key_scale, float scale) {
  const int vec_d = D / W * W;
  V s;
  if (vec_d == 4 * W) {
    s = ScoreRows<4>(qg, k);
  } else if (vec_d == 8 * W && 8 + W <= kVectorRegisters - 4) {
    s = ScoreRows<8>(qg, k);
  } else {
    V acc[W] = {};
    for (int d = 0; d < vec_d; d += W) {
      const V qd = Load(qg + d);
#pragma GCC unroll 16
      for (int i = 0; i < W; ++i) acc[i] = MulAdd(qd, LoadRow(k[i] + d), acc[i]);
    }
    s = TransposeSum(acc);
  }
  for (int d = vec_d; d < D; ++d) {
    V kd;
    for (int i = 0; i < W; ++i) kd[i] = Elem(k[i], d);
    s = MulAdd(Splat(qg[d]), kd, s);
  }
  if constexpr (kScaled) s = s * key_scale;  // q . (scale * k) = scale * (q . k)
  return s * scale;
}

// The scores of positions [j0, j0 + W) (a score row's columns) for every head of the group.
template <bool kScaled, class U>
PARALLM_INLINE void ScoreTile(const GroupTask& t, const U* const (&k)[W], int64_t j0, V key_scale) {
  for (int g = 0; g < t.group; ++g) {
    // A partial tile's extra lanes land in the row's padding (row_stride is a multiple of 16 >= W).
    Store(t.scores + g * t.row_stride + j0,
          ScoreHead<kScaled>(t.q + static_cast<int64_t>(g) * t.head_dim, k, t.head_dim, key_scale, t.scale));
  }
}

// Softmax of one head's score row of n positions (after soft-capping, when asked): max, exp and sum in a fixed lane
// order, then normalized in place; columns [n, padded) (padded: n rounded up to 16) become zero weights for the
// value pass's partial tile.
PARALLM_INLINE void SoftmaxRow(float* row, int64_t n, int64_t padded, float softcap) {
  if (softcap > 0)
    for (int64_t j = 0; j < n; ++j) row[j] = softcap * std::tanh(row[j] / softcap);
  const float inv = 1.0f / ExpShiftSum(row, n, MaxOf(row, n));
  std::fill(row + n, row + padded, 0.0f);
  const V inv_v = Splat(inv);  // W at a time over the padded row (the compiler left the plain loop scalar)
  for (int64_t j = 0; j < padded; j += W) Store(row + j, Load(row + j) * inv_v);
}

// One head's output dims [d, d + W) += the tile's W weights p[i] times its value rows' dims, vd[i]: two chains (even
// and odd positions) halve the wait on FMA latency.
PARALLM_INLINE void AccumulateTile(const float* p, const V (&vd)[W], float* o) {
  V even = Load(o), odd = Splat(0.0f);
#pragma GCC unroll 16
  for (int i = 0; i < W; i += 2) {
    even = MulAdd(Splat(p[i]), vd[i], even);
    odd = MulAdd(Splat(p[i + 1]), vd[i + 1], odd);
  }
  Store(o, even + odd);
}

// The same for one dim past the last whole vector (head_dim not a multiple of W), lane by lane.
template <class T>
PARALLM_INLINE void AccumulateTileDim(const float* p, const T* const (&v)[W], int d, float* o) {
  float acc = *o;
  for (int i = 0; i < W; ++i) acc += p[i] * Elem(v[i], d);
  *o = acc;
}

// Head dims up to this are decoded into a tile of f32 rows (the stack buffer's size); wider ones read stored rows.
constexpr int kMaxDecodedDim = 256;

// Calls score(rows) with the tile's key rows k[i] as the score pass reads them: f32 rows as stored; 16-bit and int8
// rows decoded to f32 into `decoded` once per tile, not once per query head (the heads then read f32 rows from L1),
// up to kMaxDecodedDim dims, wider ones as stored. Decoding is exact, so the scores are the same bits either way.
template <class T, class F>
PARALLM_INLINE void WithKeyRows(const T* const (&k)[W], int D, float* decoded, F&& score) {
  if constexpr (std::is_same_v<T, float>) {
    score(k);
  } else if (D <= kMaxDecodedDim) {
    const int vec_d = D / W * W;
    const float* kf[W];
    for (int i = 0; i < W; ++i) {
      float* row = decoded + i * D;
      for (int d = 0; d < vec_d; d += W) Store(row + d, LoadRow(k[i] + d));
      for (int d = vec_d; d < D; ++d) row[d] = Elem(k[i], d);
      kf[i] = row;
    }
    score(kf);
  } else {
    score(k);
  }
}

// T: the stored element type (float, uint16_t for bf16, F16Bits, int8_t).
template <class T>
void AttendGroup(const GroupTask& t) {
  constexpr bool kScaled = std::is_same_v<T, int8_t>;
  const T* keys = static_cast<const T*>(t.keys);
  const T* values = static_cast<const T*>(t.values);
  int64_t slots[W];
  const int D = t.head_dim, vec_d = D / W * W;  // dims [vec_d, D) (head_dim not a multiple of W) go lane by lane
  // Positions [t.begin, t.n_ctx) are attended to; a score row's column c is position t.begin + c.
  const int64_t n_ctx = t.n_ctx - t.begin;

  // 1. Scores, W positions at a time; each key row comes from memory for the first head, from L1 for the others.
  alignas(64) float decoded[std::is_same_v<T, float> ? 1 : W * kMaxDecodedDim];
  for (int64_t j0 = 0; j0 < n_ctx; j0 += W) {
    const int n = static_cast<int>(std::min<int64_t>(W, n_ctx - j0));
    PrefetchTile(t, keys, kScaled ? t.key_scales : nullptr, t.begin + j0 + kPrefetchTiles * W);
    TileSlots(t, t.begin + j0, n, slots);
    const T* k[W];
    for (int i = 0; i < W; ++i) k[i] = keys + slots[i] * t.slot_stride;
    V key_scale{};
    if constexpr (kScaled) key_scale = TileScales(t.key_scales, t.scale_stride, slots);
    WithKeyRows(k, D, decoded, [&](const auto& rows) { ScoreTile<kScaled>(t, rows, j0, key_scale); });
  }

  for (int tile = 0; tile < kPrefetchTiles; ++tile)  // step 3's first tiles, while the softmax runs
    PrefetchTile(t, values, kScaled ? t.value_scales : nullptr, t.begin + tile * W);

  // 2. Softmax of each head's row.
  for (int g = 0; g < t.group; ++g) SoftmaxRow(t.scores + g * t.row_stride, n_ctx, t.row_stride, t.softcap);

  // 3. out[g] = sum over positions of p[g][j] * v[j], W positions at a time: W dims of the tile's W value rows are
  // loaded into registers once and used by every head of the group; each head's sums run in a fixed order.
  for (int g = 0; g < t.group; ++g) std::fill_n(t.out + static_cast<int64_t>(g) * D, D, 0.0f);
  for (int64_t j0 = 0; j0 < n_ctx; j0 += W) {
    const int n = static_cast<int>(std::min<int64_t>(W, n_ctx - j0));
    PrefetchTile(t, values, kScaled ? t.value_scales : nullptr, t.begin + j0 + kPrefetchTiles * W);
    TileSlots(t, t.begin + j0, n, slots);
    const T* v[W];
    for (int i = 0; i < W; ++i) v[i] = values + slots[i] * t.slot_stride;
    if constexpr (kScaled) {  // p * (scale * v) = (p * scale) * v: the tile's weights take their rows' scales
      const V value_scale = TileScales(t.value_scales, t.scale_stride, slots);
      for (int g = 0; g < t.group; ++g) {
        float* p = t.scores + g * t.row_stride + j0;
        Store(p, Load(p) * value_scale);
      }
    }
    for (int d = 0; d < vec_d; d += W) {
      V vd[W];
#pragma GCC unroll 16
      for (int i = 0; i < W; ++i) vd[i] = LoadRow(v[i] + d);
      for (int g = 0; g < t.group; ++g)
        AccumulateTile(t.scores + g * t.row_stride + j0, vd, t.out + static_cast<int64_t>(g) * D + d);
    }
    for (int d = vec_d; d < D; ++d)
      for (int g = 0; g < t.group; ++g)
        AccumulateTileDim(t.scores + g * t.row_stride + j0, v, d, t.out + static_cast<int64_t>(g) * D + d);
  }
}

// The scores of R query heads (q[r]: head_dim floats) for one tile from its key rows transposed (kt: [D][W] floats,
// position i of dim d at kt[d * W + i], decoded to f32), stored at out[r]: the same operations as ScoreHead's, each
// lane's chain over d and the fold of TransposeSum, with positions in lanes instead of dims. ScoreHead's lane l of
// position i is the chain over c of q[c * W + l] * k_i[c * W + l]; here that is lane i of Leaf<l>, and
// TransposeSum's levels (lane l plus lane l + W/2, then l + W/4, ...) are Fold's: Fold<l, s> = Fold<l, 2s> +
// Fold<l + s, 2s> down to the leaves at s = W. The tail dims, the int8 scale and `scale` follow in ScoreHead's order.
// The tile's rows then serve R heads from registers, and no lanes are shuffled.
template <int R, int QN>
struct TransposedScores {
  const float* kt;
  const float* const (&q)[R];

  template <int L>
  PARALLM_INLINE void Leaf(V (&p)[R]) const {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) p[r] = V{};
#pragma GCC unroll 16
    for (int c = 0; c < QN; ++c) {
      const V k = Load(kt + (c * W + L) * W);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) p[r] = MulAdd(Splat(q[r][c * W + L]), k, p[r]);
    }
  }

  template <int L, int S>
  PARALLM_INLINE void Fold(V (&out)[R]) const {
    if constexpr (S == W) {
      Leaf<L>(out);
    } else {
      V b[R];
      Fold<L, 2 * S>(out);
      Fold<L + S, 2 * S>(b);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) out[r] = out[r] + b[r];
    }
  }
};

template <bool kScaled, int R, int QN>
PARALLM_INLINE void ScoreHeadsTransposed(const float* const (&q)[R], const float* kt, int D, V key_scale, float scale,
                                         float* const (&out)[R]) {
  V s[R];
  TransposedScores<R, QN>{kt, q}.template Fold<0, 1>(s);
  if constexpr (QN * W < kMaxDecodedDim) {  // (at kMaxDecodedDim, D is that: no tail)
    for (int d = QN * W; d < D; ++d) {
      const V kd = Load(kt + d * W);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) s[r] = MulAdd(Splat(q[r][d]), kd, s[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    V x = s[r];
    if constexpr (kScaled) x = x * key_scale;
    Store(out[r], x * scale);
  }
}

// Rows of a tile's scores, R at a time with the R fitting the registers (each head's partial folds and the leaf's
// accumulators live together); QN: whole vectors in head_dim. Rows are (token, head) pairs walked in order.
template <bool kScaled, int QN>
PARALLM_INLINE void ScoreRowsTransposed(const TokensTask& m, int first_token, int64_t j0, const float* kt,
                                        V key_scale) {
  const GroupTask& t = m.last;
  constexpr int R = W == 16 ? 4 : 2;
  const int D = t.head_dim, G = t.group;
  int i = first_token, g = 0;
  int left = (m.n_tokens - first_token) * G;
  auto next = [&](const float*& q, float*& out) {
    q = m.q + i * m.q_stride + g * D;
    out = t.scores + (static_cast<int64_t>(i) * G + g) * t.row_stride + j0;
    if (++g == G) {
      g = 0;
      ++i;
    }
  };
  for (; left >= R; left -= R) {
    const float* q[R];
    float* out[R];
    for (int r = 0; r < R; ++r) next(q[r], out[r]);
    ScoreHeadsTransposed<kScaled, R, QN>(q, kt, D, key_scale, t.scale, out);
  }
  for (; left > 0; --left) {
    const float* q[1];
    float* out[1];
    next(q[0], out[0]);
    ScoreHeadsTransposed<kScaled, 1, QN>(q, kt, D, key_scale, t.scale, out);
  }
}

// One level of an in-register W x W transpose: rows a and b = a + s (bit s of a clear) trade the lanes where bit s of
// the lane differs from bit s of the row. After the levels s = W/2, W/4, ..., 1, row r holds column r.
constexpr int SwapLane(int s, int lane, bool second) {
  if (!second) return (lane & s) ? W + lane - s : lane;
  return (lane & s) ? W + lane : lane + s;
}

template <int S, size_t... L>
PARALLM_INLINE void SwapBlocks(V& a, V& b, std::index_sequence<L...>) {
  const V lo = a, hi = b;
  a = __builtin_shufflevector(lo, hi, SwapLane(S, L, false)...);
  b = __builtin_shufflevector(lo, hi, SwapLane(S, L, true)...);
}

// r[0..W) transposed in place: the levels s = S, S/2, ..., 1.
template <int S = W / 2>
PARALLM_INLINE void TransposeRows(V (&r)[W]) {
  if constexpr (S >= 1) {
#pragma GCC unroll 16
    for (int a = 0; a < W; ++a)
      if ((a & S) == 0) SwapBlocks<S>(r[a], r[a + S], std::make_index_sequence<W>());
    TransposeRows<S / 2>(r);
  }
}

// The tile's key rows k[i], decoded to f32 and transposed: kt[d * W + i] = dim d of row i (D <= kMaxDecodedDim).
// Whole vectors of dims go through registers, W rows at a time; the tail dims (head_dim not a multiple of W) one by
// one.
template <class T>
PARALLM_INLINE void TransposeKeyTile(const T* const (&k)[W], int D, float* kt) {
  const int vec_d = D / W * W;
  for (int d = 0; d < vec_d; d += W) {
    V r[W];
#pragma GCC unroll 16
    for (int i = 0; i < W; ++i) r[i] = LoadRow(k[i] + d);
    TransposeRows(r);
#pragma GCC unroll 16
    for (int i = 0; i < W; ++i) Store(kt + (d + i) * W, r[i]);
  }
  for (int i = 0; i < W; ++i)
    for (int d = vec_d; d < D; ++d) kt[d * W + i] = Elem(k[i], d);
}

// Consecutive tokens of one sequence for one KV head (TokensTask): the rows of every token's group are computed
// against each tile together, so a tile's key and value rows come from memory once for all of them rather than once
// per token. Every row (a token's query head) sees exactly AttendGroup's operations for its
// token alone: the same tiles (from position 0), its scores from ScoreHead (whose bits do not depend on the lane),
// SoftmaxRow over its own positions and padding, and AccumulateTile over its own tiles, the last of them partial
// as AttendGroup's is: the lanes past the token's end hold position j0's value row (and scale) and zero weights.
template <class T>
void AttendTokens(const TokensTask& m) {
  constexpr bool kScaled = std::is_same_v<T, int8_t>;
  const GroupTask& t = m.last;
  const T* keys = static_cast<const T*>(t.keys);
  const T* values = static_cast<const T*>(t.values);
  int64_t slots[W];
  const int D = t.head_dim, vec_d = D / W * W, G = t.group;
  const int64_t n_first = t.n_ctx - (m.n_tokens - 1);  // token i attends to positions [0, n_first + i)
  // Token i's head g: query m.q + i * q_stride + g * D, output likewise, scores at row i * G + g.
  auto scores = [&](int i, int g) { return t.scores + (static_cast<int64_t>(i) * G + g) * t.row_stride; };
  // Tokens [first_token(j0), n_tokens) see position j0; tokens from full_token(j0) on see all of [j0, j0 + W).
  auto first_token = [&](int64_t j0) { return static_cast<int>(std::clamp<int64_t>(j0 + 1 - n_first, 0, m.n_tokens)); };
  auto full_token = [&](int64_t j0) { return static_cast<int>(std::clamp<int64_t>(j0 + W - n_first, 0, m.n_tokens)); };

  // 1. Scores, W positions at a time, for every row that sees the tile (past a row's end: padding, zeroed in 2.).
  alignas(64) float decoded[std::is_same_v<T, float> ? 1 : W * kMaxDecodedDim];
  // Head dims of 4, 8 or 16 whole vectors (and a tail) up to kMaxDecodedDim: the tile transposed.
  const bool transposed = D <= kMaxDecodedDim && (vec_d == 4 * W || vec_d == 8 * W || vec_d == 16 * W);
  alignas(64) float kt[W * kMaxDecodedDim];
  for (int64_t j0 = 0; j0 < t.n_ctx; j0 += W) {
    const int n = static_cast<int>(std::min<int64_t>(W, t.n_ctx - j0));
    PrefetchTile(t, keys, kScaled ? t.key_scales : nullptr, j0 + kPrefetchTiles * W);
    TileSlots(t, j0, n, slots);
    const T* k[W];
    for (int i = 0; i < W; ++i) k[i] = keys + slots[i] * t.slot_stride;
    V key_scale{};
    if constexpr (kScaled) key_scale = TileScales(t.key_scales, t.scale_stride, slots);
    if (transposed) {
      TransposeKeyTile(k, D, kt);
      switch (vec_d / W) {
        case 4: ScoreRowsTransposed<kScaled, 4>(m, first_token(j0), j0, kt, key_scale); break;
        case 8: ScoreRowsTransposed<kScaled, 8>(m, first_token(j0), j0, kt, key_scale); break;
        default: ScoreRowsTransposed<kScaled, 16>(m, first_token(j0), j0, kt, key_scale); break;
      }
      continue;
    }
    WithKeyRows(k, D, decoded, [&](const auto& kr) {
      for (int i = first_token(j0); i < m.n_tokens; ++i) {
        const float* q = m.q + i * m.q_stride;
        float* row = scores(i, 0) + j0;
        for (int g = 0; g < G; ++g, q += D, row += t.row_stride)
          Store(row, ScoreHead<kScaled>(q, kr, D, key_scale, t.scale));
      }
    });
  }

  for (int tile = 0; tile < kPrefetchTiles; ++tile)
    PrefetchTile(t, values, kScaled ? t.value_scales : nullptr, tile * W);

  // 2. Softmax of each row over its own positions; its padding (to 16) zeroed as AttendGroup's is.
  for (int i = 0; i < m.n_tokens; ++i) {
    const int64_t n = n_first + i;
    for (int g = 0; g < G; ++g) SoftmaxRow(scores(i, g), n, (n + 15) / 16 * 16, t.softcap);
    for (int g = 0; g < G; ++g) std::fill_n(m.out + i * m.out_stride + g * D, D, 0.0f);
  }

  // 3. The weighted sums of the value rows, W positions at a time: W dims of the tile's W value rows are loaded into
  // registers once for every row that sees the tile.
  for (int64_t j0 = 0; j0 < t.n_ctx; j0 += W) {
    const int n = static_cast<int>(std::min<int64_t>(W, t.n_ctx - j0));
    PrefetchTile(t, values, kScaled ? t.value_scales : nullptr, j0 + kPrefetchTiles * W);
    TileSlots(t, j0, n, slots);
    const T* v[W];
    for (int i = 0; i < W; ++i) v[i] = values + slots[i] * t.slot_stride;
    // Tokens in [i0, i_full) end inside this tile, after used(i) of its positions.
    const int i0 = first_token(j0), i_full = full_token(j0);
    auto used = [&](int i) { return static_cast<int>(n_first + i - j0); };
    if constexpr (kScaled) {
      const V value_scale = TileScales(t.value_scales, t.scale_stride, slots);
      for (int i = i0; i < m.n_tokens; ++i) {
        V scale = value_scale;
        if (i < i_full)
          for (int l = used(i); l < W; ++l) scale[l] = value_scale[0];
        for (int g = 0; g < G; ++g) {
          float* p = scores(i, g) + j0;
          Store(p, Load(p) * scale);
        }
      }
    }
    for (int d = 0; d < vec_d; d += W) {
      V vd[W];
#pragma GCC unroll 16
      for (int l = 0; l < W; ++l) vd[l] = LoadRow(v[l] + d);
      for (int i = i_full; i < m.n_tokens; ++i) {
        const float* p = scores(i, 0) + j0;
        float* o = m.out + i * m.out_stride + d;
        for (int g = 0; g < G; ++g, p += t.row_stride, o += D) AccumulateTile(p, vd, o);
      }
      for (int i = i0; i < i_full; ++i) {
        V vr[W];
        const int u = used(i);
        for (int l = 0; l < W; ++l) vr[l] = l < u ? vd[l] : vd[0];
        const float* p = scores(i, 0) + j0;
        float* o = m.out + i * m.out_stride + d;
        for (int g = 0; g < G; ++g, p += t.row_stride, o += D) AccumulateTile(p, vr, o);
      }
    }
    for (int d = vec_d; d < D; ++d)
      for (int i = i0; i < m.n_tokens; ++i) {
        const T* vr[W];
        const int u = i < i_full ? used(i) : W;
        for (int l = 0; l < W; ++l) vr[l] = l < u ? v[l] : v[0];
        for (int g = 0; g < G; ++g) AccumulateTileDim(scores(i, g) + j0, vr, d, m.out + i * m.out_stride + g * D + d);
      }
  }
}

#undef PARALLM_INLINE
