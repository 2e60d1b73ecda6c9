// The paged-attention kernel for one KV head and its group of query heads, written once for a vector of W floats
// (GCC vector extensions) and compiled once per instruction set: attention.cpp includes it inside a
// `#pragma GCC target` region and a namespace of its own, with PARALLM_ATTN_LANES defined as W (16: AVX-512,
// 8: AVX2 + FMA, 4: baseline SSE2). The order of every floating-point operation depends on W alone.
//
// Why this shape: in decode the keys and values are the only large data (1 KiB per position and layer on the 0.5B
// shape) and the 7 query heads of a group read the same rows, so each row is loaded once per token and used by the
// whole group while it is in L1. Scores come out W positions at a time: acc[i] holds position i's dot product
// spread over W lanes, and one transpose-and-add (TransposeSum) folds the W of them into one vector, W - 1 adds per
// W positions instead of a log2(W)-level horizontal reduction per position.

#ifndef PARALLM_ATTN_LANES
#error "define PARALLM_ATTN_LANES to 16, 8 or 4 before including attention_simd-inl.h"
#endif

constexpr int W = PARALLM_ATTN_LANES;
typedef float V __attribute__((vector_size(W * sizeof(float))));

#define PARALLM_INLINE inline __attribute__((always_inline))

PARALLM_INLINE V Load(const float* p) {  // unaligned
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

PARALLM_INLINE void Store(float* p, V v) { std::memcpy(p, &v, sizeof v); }

// The intrinsics let a splat of a loaded float become a broadcast memory operand; a lane-by-lane loop gets
// vectorized into one load and a shuffle per lane instead.
PARALLM_INLINE V Splat(float x) {
#if PARALLM_ATTN_LANES == 16
  return _mm512_set1_ps(x);
#elif PARALLM_ATTN_LANES == 8
  return _mm256_set1_ps(x);
#elif defined(__x86_64__)
  return _mm_set1_ps(x);
#else
  V v;
  for (int i = 0; i < W; ++i) v[i] = x;
  return v;
#endif
}

// a * b + c, fused (one rounding) where the instruction set has FMA: the file is built with -ffp-contract=off, so
// this is the only place products and sums fuse.
PARALLM_INLINE V MulAdd(V a, V b, V c) {
#if PARALLM_ATTN_LANES == 16
  return _mm512_fmadd_ps(a, b, c);
#elif PARALLM_ATTN_LANES == 8
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}

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

// Row pointers of positions [j0, j0 + W) through the block table: one division per tile, then a step along the
// table (a division per row costs as much as the dot products of a row). A partial last tile (n < W) repeats
// position j0 in its missing lanes, so every load stays within the sequence's own blocks; those lanes' scores are
// never used and their weights are zero.
PARALLM_INLINE void TileRows(const GroupTask& t, const float* base, int64_t j0, int n, const float* (&rows)[W]) {
  int64_t block = j0 / t.block_size;
  int64_t offset = j0 % t.block_size;
  for (int i = 0; i < W; ++i) {
    if (i >= n) {
      rows[i] = rows[0];
      continue;
    }
    rows[i] = base + (static_cast<int64_t>(t.block_table[block]) * t.block_size + offset) * t.slot_stride;
    if (++offset == t.block_size) {
      offset = 0;
      ++block;
    }
  }
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

void AttendGroup(const GroupTask& t) {
  const int D = t.head_dim, vec_d = D / W * W;  // dims [vec_d, D) (head_dim not a multiple of W) go lane by lane
  // Positions [t.begin, t.n_ctx) are attended to; a score row's column c is position t.begin + c.
  const int64_t n_ctx = t.n_ctx - t.begin;

  // 1. Scores, W positions at a time; each key row comes from memory for the first head, from L1 for the others.
  for (int64_t j0 = 0; j0 < n_ctx; j0 += W) {
    const int n = static_cast<int>(std::min<int64_t>(W, n_ctx - j0));
    const float* k[W];
    TileRows(t, t.keys, t.begin + j0, n, k);
    for (int g = 0; g < t.group; ++g) {
      const float* qg = t.q + static_cast<int64_t>(g) * D;
      V acc[W] = {};
      for (int d = 0; d < vec_d; d += W) {
        const V qd = Load(qg + d);
#pragma GCC unroll 16
        for (int i = 0; i < W; ++i) acc[i] = MulAdd(qd, Load(k[i] + d), acc[i]);
      }
      V s = TransposeSum(acc);
      for (int d = vec_d; d < D; ++d) {
        V kd;
        for (int i = 0; i < W; ++i) kd[i] = k[i][d];
        s = MulAdd(Splat(qg[d]), kd, s);
      }
      // A partial tile's extra lanes land in the row's padding (row_stride is a multiple of 16 >= W).
      Store(t.scores + g * t.row_stride + j0, s * t.scale);
    }
  }

  // 2. Softmax of each head's row (after soft-capping, when asked): max, exp and sum in a fixed lane order, then
  // normalized in place; the padding after n_ctx becomes zero weights for step 3's partial tile.
  for (int g = 0; g < t.group; ++g) {
    float* row = t.scores + g * t.row_stride;
    if (t.softcap > 0)
      for (int64_t j = 0; j < n_ctx; ++j) row[j] = t.softcap * std::tanh(row[j] / t.softcap);
    const float inv = 1.0f / ExpShiftSum(row, n_ctx, MaxOf(row, n_ctx));
    for (int64_t j = 0; j < n_ctx; ++j) row[j] *= inv;
    std::fill(row + n_ctx, row + t.row_stride, 0.0f);
  }

  // 3. out[g] = sum over positions of p[g][j] * v[j], W positions at a time: W dims of the tile's W value rows are
  // loaded into registers once and used by every head of the group; each head's sums run in a fixed order.
  for (int g = 0; g < t.group; ++g) std::fill_n(t.out + static_cast<int64_t>(g) * D, D, 0.0f);
  for (int64_t j0 = 0; j0 < n_ctx; j0 += W) {
    const int n = static_cast<int>(std::min<int64_t>(W, n_ctx - j0));
    const float* v[W];
    TileRows(t, t.values, t.begin + j0, n, v);
    for (int d = 0; d < vec_d; d += W) {
      V vd[W];
#pragma GCC unroll 16
      for (int i = 0; i < W; ++i) vd[i] = Load(v[i] + d);
      for (int g = 0; g < t.group; ++g) {
        const float* p = t.scores + g * t.row_stride + j0;
        float* o = t.out + static_cast<int64_t>(g) * D + d;
        // Two chains (even and odd positions) halve the wait on FMA latency.
        V even = Load(o), odd = Splat(0.0f);
#pragma GCC unroll 16
        for (int i = 0; i < W; i += 2) {
          even = MulAdd(Splat(p[i]), vd[i], even);
          odd = MulAdd(Splat(p[i + 1]), vd[i + 1], odd);
        }
        Store(o, even + odd);
      }
    }
    for (int d = vec_d; d < D; ++d)
      for (int g = 0; g < t.group; ++g) {
        const float* p = t.scores + g * t.row_stride + j0;
        float acc = t.out[static_cast<int64_t>(g) * D + d];
        for (int i = 0; i < W; ++i) acc += p[i] * v[i][d];
        t.out[static_cast<int64_t>(g) * D + d] = acc;
      }
  }
}

#undef PARALLM_INLINE
