// The 256-bit x86 MatMul kernels, compiled twice: as the AVX2 path (int8 dot via maddubs + madd) and as
// the AVX-VNNI path (vpdpbusd on ymm), selected by PARALLM_X86_VNNI (0 or 1) before inclusion. Included by
// cpu/matmul_avx2.cpp and cpu/matmul_avxvnni.cpp inside their `#pragma GCC target` region and anonymous
// namespace.
//
// Same design as the AVX-512 path (see matmul_avx512.cpp): one weight row per 32-bit lane, here 8 rows per
// group; per 32-column block a panel of 8 ymm (lane i = 4 codes of row i); the exact int32 block dot per
// lane, then the f32 tail of matmul_internal.h's formula lane-wise. The per-lane operations are the same
// as the scalar twin's and the AVX-512 path's, so all agree bit for bit on quantized weights.
//
// AVX2 without VNNI: maddubs multiplies unsigned by signed bytes and adds pairs into saturating int16.
// Codes up to 63 (4-6 bit formats) cannot saturate (2 * 63 * 127 < 32767); Q8_0 and 8-bit MLX use signed
// codes with the sign moved onto the activation (|w| * sign(x, w), at most 2 * 128 * 127), so they stay exact.

#ifndef PARALLM_X86_VNNI
#error "define PARALLM_X86_VNNI to 0 or 1 before including matmul_x86_256-inl.h"
#endif

#include "kernels/cpu/x86_unpack-inl.h"

constexpr int kRows = 8;            // rows per group: one per 32-bit lane of a ymm
constexpr int kChunkBlocks = 32;    // 32-column blocks per panel chunk
// Tokens per register tile: 6 int32 and 6 f32 accumulators, a weight vector and a broadcast in 16 ymm (AVX2's sign
// trick takes one more for |w|; 4 tokens measured 3% slower at 64 tokens there, kernels_bench Q8_0 and Q4_0).
constexpr int kTokTile = 6;
constexpr int kTokBlock = 256;      // tokens per panel pass (bounds the accumulators, keeps activations in L2)
constexpr int kCodeBytes = 8 * 32;  // a block's codes for 8 rows
constexpr bool kSignedQ8 = !PARALLM_X86_VNNI;

#define PARALLM_INLINE inline __attribute__((always_inline))

int ParamVectors(QFormat f) { return f == QFormat::kQ6_K || HasBias(f) ? 2 : 1; }
int64_t BlockStride(QFormat f) { return kCodeBytes + 32 * ParamVectors(f); }

// Signed codes on AVX2: Q8_0, and 8-bit MLX (codes - 128).
bool UsesSignedCodes(const MatrixView& w, QFormat f) {
  return kSignedQ8 && (f == QFormat::kQ8_0 || (f == QFormat::kMlx && w.mlx.bits == 8));
}

// 8 rows x 8 dwords -> out[j] lane i = row i dword j (two unpack stages, then 128-bit lane permutes).
template <typename U>
PARALLM_INLINE void PanelBlock(const uint8_t* const* rows, int64_t b, uint8_t* pb) {
  const __m256i r0 = U::Codes(rows[0], b), r1 = U::Codes(rows[1], b), r2 = U::Codes(rows[2], b),
                r3 = U::Codes(rows[3], b), r4 = U::Codes(rows[4], b), r5 = U::Codes(rows[5], b),
                r6 = U::Codes(rows[6], b), r7 = U::Codes(rows[7], b);
  const __m256i t0 = _mm256_unpacklo_epi32(r0, r1), t1 = _mm256_unpackhi_epi32(r0, r1);
  const __m256i t2 = _mm256_unpacklo_epi32(r2, r3), t3 = _mm256_unpackhi_epi32(r2, r3);
  const __m256i t4 = _mm256_unpacklo_epi32(r4, r5), t5 = _mm256_unpackhi_epi32(r4, r5);
  const __m256i t6 = _mm256_unpacklo_epi32(r6, r7), t7 = _mm256_unpackhi_epi32(r6, r7);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
  auto* p = reinterpret_cast<__m256i*>(pb);
  _mm256_store_si256(p + 0, _mm256_permute2x128_si256(u0, u4, 0x20));
  _mm256_store_si256(p + 1, _mm256_permute2x128_si256(u1, u5, 0x20));
  _mm256_store_si256(p + 2, _mm256_permute2x128_si256(u2, u6, 0x20));
  _mm256_store_si256(p + 3, _mm256_permute2x128_si256(u3, u7, 0x20));
  _mm256_store_si256(p + 4, _mm256_permute2x128_si256(u0, u4, 0x31));
  _mm256_store_si256(p + 5, _mm256_permute2x128_si256(u1, u5, 0x31));
  _mm256_store_si256(p + 6, _mm256_permute2x128_si256(u2, u6, 0x31));
  _mm256_store_si256(p + 7, _mm256_permute2x128_si256(u3, u7, 0x31));
}

// The low 16 bits of each 32-bit lane, packed into 8 x 16 bits.
PARALLM_INLINE __m128i Low16(__m256i v) {
  const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                        0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, pick), 0x08));
}

PARALLM_INLINE __m256 HalfToFloat(__m128i h, DType t) {
  return t == DType::kF16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

PARALLM_INLINE __m256i Gather(__m256i idx, const uint8_t* base) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(base), idx, 1);
}

// Per-block f32 parameters of 8 rows (lane i = row i) at params[(b - b0) * fstride + 8 * v + i]: the same
// values as BlockParamsRow, 8 rows at a time, from 4-byte gathers inside each row's blocks (see the
// AVX-512 path's BuildParams for the field layouts).
void BuildParams(const MatrixView& w, QFormat fmt, const uint8_t* const* rows, int64_t r0, int nrows, int64_t b0,
                 int64_t nbc, float* params, int64_t fstride) {
  alignas(32) int32_t offs[kRows];
  for (int i = 0; i < kRows; ++i) offs[i] = static_cast<int32_t>(rows[i] - rows[0]);
  const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(offs));
  switch (fmt) {
    case QFormat::kQ8_0:
    case QFormat::kQ4_0: {
      const int bb = fmt == QFormat::kQ8_0 ? static_cast<int>(sizeof(BlockQ8_0)) : static_cast<int>(sizeof(BlockQ4_0));
      for (int64_t b = 0; b < nbc; ++b)
        _mm256_store_ps(params + b * fstride, _mm256_cvtph_ps(Low16(Gather(idx, rows[0] + (b0 + b) * bb))));
      return;
    }
    case QFormat::kQ4_K: {
      const __m256i m6 = _mm256_set1_epi32(63), m4 = _mm256_set1_epi32(15), m2 = _mm256_set1_epi32(3);
      const __m256i sign = _mm256_set1_epi32(INT32_MIN);
      for (int64_t sb = b0 / 8; sb < (b0 + nbc) / 8; ++sb) {
        const uint8_t* base = rows[0] + sb * static_cast<int64_t>(sizeof(BlockQ4_K));
        const __m256i g0 = Gather(idx, base), qa = Gather(idx, base + 4), qb = Gather(idx, base + 8),
                      qc = Gather(idx, base + 12);
        const __m256 d = _mm256_cvtph_ps(Low16(g0)), dmin = _mm256_cvtph_ps(Low16(_mm256_srli_epi32(g0, 16)));
        for (int j = 0; j < 8; ++j) {
          __m256i sc, m;
          if (j < 4) {
            sc = _mm256_and_si256(_mm256_srli_epi32(qa, 8 * j), m6);
            m = _mm256_and_si256(_mm256_srli_epi32(qb, 8 * j), m6);
          } else {
            const int k = j - 4;
            sc = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(qc, 8 * k), m4),
                                 _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qa, 8 * k + 6), m2), 4));
            m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(qc, 8 * k + 4), m4),
                                _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(qb, 8 * k + 6), m2), 4));
          }
          float* pb = params + (sb * 8 + j - b0) * fstride;
          _mm256_store_ps(pb, _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc)));
          const __m256 min = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(m));
          _mm256_store_ps(pb + 8, _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(min), sign)));
        }
      }
      return;
    }
    case QFormat::kQ6_K: {
      for (int64_t sb = b0 / 8; sb < (b0 + nbc) / 8; ++sb) {
        const uint8_t* base = rows[0] + sb * static_cast<int64_t>(sizeof(BlockQ6_K));
        const __m256 d = _mm256_cvtph_ps(Low16(_mm256_srli_epi32(Gather(idx, base + 206), 16)));
        __m256i sc[4];
        for (int q = 0; q < 4; ++q) sc[q] = Gather(idx, base + 192 + 4 * q);
        for (int k = 0; k < 8; ++k) {
          const int pos = (2 * k) % 4;
          const __m256i s0 = _mm256_srai_epi32(_mm256_sll_epi32(sc[k / 2], _mm_cvtsi32_si128(24 - 8 * pos)), 24);
          const __m256i s1 = _mm256_srai_epi32(_mm256_sll_epi32(sc[k / 2], _mm_cvtsi32_si128(16 - 8 * pos)), 24);
          float* pb = params + (sb * 8 + k - b0) * fstride;
          _mm256_store_ps(pb, _mm256_mul_ps(d, _mm256_cvtepi32_ps(s0)));
          _mm256_store_ps(pb + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(s1)));
        }
      }
      return;
    }
    case QFormat::kMlx: {
      // As the AVX-512 path: per group, gather 8 rows' scale and bias; the array's very last 2-byte value
      // is loaded alone (a 4-byte gather of it would read past the end).
      const int64_t gs = w.mlx.group_size, groups = w.cols / gs;
      const int bpg = static_cast<int>(gs / 32);
      const int esize = static_cast<int>(Info(w.dtype).block_bytes);
      alignas(32) int32_t soffs[kRows];
      for (int i = 0; i < kRows; ++i) soffs[i] = static_cast<int32_t>(std::min(i, nrows - 1) * groups * esize);
      const __m256i sidx = _mm256_load_si256(reinterpret_cast<const __m256i*>(soffs));
      const int last_lane = r0 + nrows == w.rows ? nrows - 1 : -1;
      for (int64_t g = b0 / bpg; g < (b0 + nbc) / bpg; ++g) {
        const int64_t elem = r0 * groups + g;
        __m256 v[2];
        for (int k = 0; k < 2; ++k) {
          const uint8_t* base = (k == 0 ? w.scales : w.biases) + elem * esize;
          if (w.dtype == DType::kF32) {
            v[k] = _mm256_castsi256_ps(Gather(sidx, base));
            continue;
          }
          __m256i raw;
          if (last_lane >= 0 && g == groups - 1) {
            const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(last_lane), lane);  // lanes < last_lane
            raw = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int*>(base), sidx, m, 1);
            uint16_t h;
            std::memcpy(&h, base + soffs[last_lane], 2);
            raw = _mm256_blendv_epi8(_mm256_set1_epi32(h), raw, m);
          } else {
            raw = Gather(sidx, base);
          }
          v[k] = HalfToFloat(Low16(raw), w.dtype);
        }
        for (int j = 0; j < bpg; ++j) {
          float* pb = params + (g * bpg + j - b0) * fstride;
          _mm256_store_ps(pb, v[0]);
          _mm256_store_ps(pb + 8, v[1]);
        }
      }
      return;
    }
  }
}

// Panel for blocks [b0, b0 + nbc) of 8 rows (all valid pointers; a ragged group repeats its last row).
template <typename U>
void BuildPanel(const MatrixView& w, QFormat fmt, const uint8_t* const* rows, int64_t r0, int nrows, int64_t b0,
                int64_t nbc, uint8_t* panel) {
  const int64_t stride = BlockStride(fmt);
  for (int64_t b = 0; b < nbc; ++b) PanelBlock<U>(rows, b0 + b, panel + b * stride);
  BuildParams(w, fmt, rows, r0, nrows, b0, nbc, reinterpret_cast<float*>(panel + kCodeBytes), stride / 4);
}

PARALLM_INLINE __m256i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// acc + 4-term dots of (weights w, activations x) per 32-bit lane, exact.
template <bool kSigned>
PARALLM_INLINE __m256i Dot4(__m256i acc, __m256i w, __m256i wabs, __m256i x) {
#if PARALLM_X86_VNNI
  (void)wabs;
  return _mm256_dpbusd_avx_epi32(acc, w, x);
#else
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i p;
  if constexpr (kSigned) {
    p = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(x, w));
  } else {
    p = _mm256_maddubs_epi16(w, x);
  }
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
#endif
}

// How a block's f32 parameters are stored: as f32 (the panels built per call, MLX's f32 scales), as the f16 values
// they came from (the repacked copy: Q8_0 and Q4_0 scales; exact both ways), or the K-quants'
// fields (the repacked copy; a row group's headers, one per super-block of 8 blocks, precede its blocks): Q4_K's 8
// sub-block scales and 8 mins as bytes in the block, each super-block's 8 f16 d and 8 f16 dmin in a header
// (PackKQuantParams); Q6_K's two int8 scales of each row's 16-column halves in the block, 8 f16 d in a header. MLX's
// 16-bit scales and biases change once per group of 32, 64 or 128 columns: kept once per group, in a header of 8
// scales and 8 biases (kF16PerGroup, kBF16PerGroup).
enum class Params256 : int { kF32, kF16, kQ4K, kQ6K, kF16PerGroup, kBF16PerGroup };
constexpr bool PerGroup(Params256 k) { return k == Params256::kF16PerGroup || k == Params256::kBF16PerGroup; }
// Bytes of a block's parameters kept in the block itself.
inline int ParamBytes(Params256 k) {
  return k == Params256::kF32 ? 32 : k == Params256::kQ4K || k == Params256::kQ6K ? 8 : PerGroup(k) ? 0 : 16;
}
// Bytes of one header (a K-quant's super-block, an MLX group); 0: the kind keeps none.
constexpr int HeaderBytesOf(Params256 k) {
  return k == Params256::kQ4K || PerGroup(k) ? 4 * kRows : k == Params256::kQ6K ? 2 * kRows : 0;
}
// Bytes of a row group's headers, one per 2^shift blocks (HeaderShift).
inline int64_t HeaderBytes(Params256 k, int64_t nb, int shift) { return (nb >> shift) * HeaderBytesOf(k); }

// Bytes of a block's codes in the repacked copy: 6-bit codes (Q6_K) as a 4-bit and a 2-bit plane, 4-bit ones
// nibble-packed, the others as bytes.
constexpr int PackedCodeBytes(bool six, bool nib) {
  return six ? kCodeBytes * 3 / 4 : nib ? kCodeBytes / 2 : kCodeBytes;
}

// Register j of a repacked block's codes at pb (the panel's 32 bytes of 4 codes for each of 8 rows): kNib, vector
// j % 4 holds it in its low nibbles for j < 4, high ones after; kSix, those low 4 bits and its high 2 bits at bits
// 2 (j / 2) of vector j % 2 of the 2-bit plane.
template <bool kNib, bool kSix>
PARALLM_INLINE __m256i PackedCodes(const uint8_t* pb, int j) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 32 * (j & 3)));
  const __m256i lo = _mm256_and_si256(j < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
  if constexpr (!kSix) return lo;
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + kCodeBytes / 2 + 32 * (j & 1)));
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * (j >> 1)), _mm256_set1_epi8(0x03));
  return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
}

// Vector v (0: scale, 1: bias or second scale) of a block's parameters at p; `header`: its super-block's (the
// K-quants), from which Q4_K's scale = d * float(sc) and bias = -(dmin * float(m)), Q6_K's scale v = d * float(sc_v),
// as BuildParams computes them.
template <Params256 kPk>
PARALLM_INLINE __m256 LoadParams8(const uint8_t* p, int v, const uint8_t* header) {
  if constexpr (kPk == Params256::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + 8 * v);
  } else if constexpr (PerGroup(kPk)) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(header + 16 * v));
    return HalfToFloat(h, kPk == Params256::kF16PerGroup ? DType::kF16 : DType::kBF16);
  } else if constexpr (kPk == Params256::kQ6K) {
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(header)));
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * v));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
  } else if constexpr (kPk == Params256::kQ4K) {
    const __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(header + 16 * v)));
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * v));
    const __m256 f = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q)));
    return v == 0 ? f : _mm256_xor_ps(f, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN)));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v));
    return _mm256_cvtph_ps(h);
  }
}

// One register tile: 8 rows x T tokens over the chunk's nbc blocks. kSubs: int sums per block (2 for Q6_K); kBias:
// Q4_K / MLX bias term; kSigned: AVX2's sign trick. kNib: the codes nibble-packed (the repacked copy of a 4-bit
// format: 4 vectors per block, vector k holding register k in its low nibbles and register k + 4 in its high ones);
// kPk: how the parameters are stored. With kQ6K the codes are 6-bit: their low 4 bits nibble-packed as kNib's, their
// high 2 bits in 2 more vectors, vector j % 2 holding register j's at bits 2 (j / 2) of each byte. Neither changes
// an output's operations, only where its operands come from.
template <int T, int kSubs, bool kBias, bool kSigned, bool kNib = false, Params256 kPk = Params256::kF32>
void Tile(const uint8_t* panel, int64_t stride, int64_t nbc, const QuantizedActs& a, int64_t t0, int64_t b0,
          float* acc, const uint8_t* headers, int shift) {
  constexpr bool kSix = kPk == Params256::kQ6K;
  constexpr int kCB = PackedCodeBytes(kSix, kNib);
  __m256 f[T];
  const int8_t* xq[T];
  const float* dx[T];
  const float* ds[T];
  const int32_t* corr[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    f[t] = _mm256_load_ps(acc + 8 * t);
    xq[t] = a.q + (t0 + t) * a.cols + b0 * 32;
    dx[t] = a.d + (t0 + t) * a.nb + b0;
    ds[t] = a.ds + (t0 + t) * a.nb + b0;
    corr[t] = a.corr + ((t0 + t) * a.nb + b0) * kSubs;
  }
  for (int64_t b = 0; b < nbc; ++b) {
    const uint8_t* pb = panel + b * stride;
    const uint8_t* header = HeaderBytesOf(kPk) > 0 ? headers + ((b0 + b) >> shift) * HeaderBytesOf(kPk) : nullptr;
#pragma GCC unroll 2
    for (int s = 0; s < kSubs; ++s) {
      // AVX2 with 4-bit codes (at most 15): a block's 8 maddubs results sum exactly in int16 lanes (each pair at most
      // 2 * 15 * 127, eight of them 30,480 < 32,767; activations are at least -127), so one madd a block widens
      // them instead of one per 4 columns. The int32 block dot is the same number.
      constexpr bool kSum16 = !PARALLM_X86_VNNI && kNib && kSubs == 1;
      __m256i ia[T], i16[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        ia[t] = _mm256_set1_epi32(corr[t][b * kSubs + s]);
        i16[t] = _mm256_setzero_si256();
      }
#pragma GCC unroll 8
      for (int j = s * (8 / kSubs); j < (s + 1) * (8 / kSubs); ++j) {
        const __m256i wj = kNib || kSix ? PackedCodes<kNib, kSix>(pb, j)
                                        : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 32 * j));
        const __m256i wabs = kSigned ? _mm256_abs_epi8(wj) : wj;
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          if constexpr (kSum16) {
            i16[t] = _mm256_add_epi16(i16[t], _mm256_maddubs_epi16(wj, Bcast4(xq[t] + b * 32 + 4 * j)));
          } else {
            ia[t] = Dot4<kSigned>(ia[t], wj, wabs, Bcast4(xq[t] + b * 32 + 4 * j));
          }
        }
      }
      if constexpr (kSum16) {
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) ia[t] = _mm256_add_epi32(ia[t], _mm256_madd_epi16(i16[t], _mm256_set1_epi16(1)));
      }
      const __m256 scale = LoadParams8<kPk>(pb + kCB, s, header);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        f[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[t]), _mm256_mul_ps(scale, _mm256_set1_ps(dx[t][b])), f[t]);
    }
    if constexpr (kBias) {
      const __m256 bias = LoadParams8<kPk>(pb + kCB, 1, header);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) f[t] = _mm256_fmadd_ps(bias, _mm256_set1_ps(ds[t][b]), f[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm256_store_ps(acc + 8 * t, f[t]);
}

template <int kSubs, bool kBias, bool kSigned, bool kNib, Params256 kPk, int... Ts>
void RunTileImpl(int tt, std::integer_sequence<int, Ts...>, const uint8_t* panel, int64_t stride, int64_t nbc,
                 const QuantizedActs& a, int64_t t0, int64_t b0, float* acc, const uint8_t* headers, int shift) {
  using Fn = void (*)(const uint8_t*, int64_t, int64_t, const QuantizedActs&, int64_t, int64_t, float*,
                      const uint8_t*, int);
  static constexpr Fn kTiles[] = {&Tile<Ts + 1, kSubs, kBias, kSigned, kNib, kPk>...};
  kTiles[tt - 1](panel, stride, nbc, a, t0, b0, acc, headers, shift);
}

// Tile for tt (1..kTokTile) tokens; headers: the row group's, one per 2^shift blocks (the kinds that keep them).
template <int kSubs, bool kBias, bool kSigned, bool kNib = false, Params256 kPk = Params256::kF32>
void RunTile(int tt, const uint8_t* panel, int64_t stride, int64_t nbc, const QuantizedActs& a, int64_t t0,
             int64_t b0, float* acc, const uint8_t* headers = nullptr, int shift = 0) {
  RunTileImpl<kSubs, kBias, kSigned, kNib, kPk>(tt, std::make_integer_sequence<int, kTokTile>{}, panel, stride, nbc, a,
                                                t0, b0, acc, headers, shift);
}

// Prefetch of the next chunk's weight bytes, spread over the current chunk's token tiles.
struct Prefetcher {
  const uint8_t* rows[kRows];
  int nrows = 0;
  size_t begin = 0, lines = 0;

  void Plan(const MatrixView& w, int64_t r0, int64_t r_end, int64_t nb, int64_t b0, int64_t nbc) {
    nrows = static_cast<int>(std::min<int64_t>(kRows, r_end - r0));
    if (nrows <= 0) return;
    for (int i = 0; i < nrows; ++i) rows[i] = w.Row(r0 + i);
    begin = w.row_bytes * static_cast<size_t>(b0) / static_cast<size_t>(nb);
    size_t end = w.row_bytes * static_cast<size_t>(b0 + nbc) / static_cast<size_t>(nb);
    lines = (end - begin + 63) / 64 + 1;
  }
  void Issue(int64_t k, int64_t n) const {
    if (nrows <= 0) return;
    const size_t total = lines * static_cast<size_t>(nrows);
    const size_t from = total * static_cast<size_t>(k) / static_cast<size_t>(n);
    const size_t to = total * static_cast<size_t>(k + 1) / static_cast<size_t>(n);
    for (size_t i = from; i < to; ++i)
      _mm_prefetch(reinterpret_cast<const char*>(rows[i / lines] + begin + (i % lines) * 64), _MM_HINT_T0);
  }
};

size_t PanelBytes() { return kChunkBlocks * (kCodeBytes + 32 * 2); }
size_t ScratchBytes(int64_t n_tokens, int64_t /*cols*/) {
  return PanelBytes() + static_cast<size_t>(std::min<int64_t>(n_tokens, kTokBlock)) * 32 + 64;
}
int CodeOffset(const MatrixView& w, QFormat fmt) { return CodeOffsetOf<kSignedQ8>(w, fmt); }

// Writes the finished accumulators of rows [r0, r0 + nrows) for tokens [tb0, tb0 + nt).
void StoreRows(const QuantArgs& args, const float* acc, int64_t tb0, int64_t nt, int64_t r0, int nrows) {
    alignas(32) float out[8];
    for (int64_t t = 0; t < nt; ++t) {
      _mm256_store_ps(out, _mm256_load_ps(acc + t * 8));
      std::memcpy(args.y + (tb0 + t) * args.y_stride + r0, out, static_cast<size_t>(nrows) * 4);
    }
}

// Rows [row_begin, row_end) for all tokens. Loop nest: token block (kTokBlock) > row group (kRows) >
// column chunk (kChunkBlocks: build the panel, prefetch the next one) > token tile (kTokTile, registers).
// Each output's f32 accumulator lives in `acc` between chunks; its operations do not depend on the nest.
template <typename U>
void QuantRowsT(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const MatrixView& w = *args.w;
  const QuantizedActs& a = *args.acts;
  const QFormat fmt = args.fmt;
  const int64_t nb = a.nb, n_tokens = a.n_tokens, stride = BlockStride(fmt);
  const bool is_signed = UsesSignedCodes(w, fmt);
  uint8_t* panel = scratch;
  float* acc = reinterpret_cast<float*>(scratch + PanelBytes());
  auto tile = [&](int tt, int64_t nbc, int64_t t0, int64_t b0, float* ac) {
    if (fmt == QFormat::kQ6_K) {
      RunTile<2, false, false>(tt, panel, stride, nbc, a, t0, b0, ac);
    } else if (HasBias(fmt)) {
      if (is_signed) {
        RunTile<1, true, true>(tt, panel, stride, nbc, a, t0, b0, ac);
      } else {
        RunTile<1, true, false>(tt, panel, stride, nbc, a, t0, b0, ac);
      }
    } else if (is_signed) {
      RunTile<1, false, true>(tt, panel, stride, nbc, a, t0, b0, ac);
    } else {
      RunTile<1, false, false>(tt, panel, stride, nbc, a, t0, b0, ac);
    }
  };
  for (int64_t tb0 = 0; tb0 < n_tokens; tb0 += kTokBlock) {
    const int64_t nt = std::min<int64_t>(kTokBlock, n_tokens - tb0);
    const int64_t n_tiles = (nt + kTokTile - 1) / kTokTile;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
      const int nrows = static_cast<int>(std::min<int64_t>(kRows, row_end - r0));
      const uint8_t* rows[kRows];
      for (int i = 0; i < kRows; ++i) rows[i] = w.Row(r0 + std::min(i, nrows - 1));
      std::memset(acc, 0, static_cast<size_t>(nt) * 32);
      for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
        const int64_t nbc = std::min<int64_t>(kChunkBlocks, nb - b0);
        BuildPanel<U>(w, fmt, rows, r0, nrows, b0, nbc, panel);
        Prefetcher next;
        if (b0 + kChunkBlocks < nb) {
          next.Plan(w, r0, row_end, nb, b0 + kChunkBlocks, std::min<int64_t>(kChunkBlocks, nb - b0 - kChunkBlocks));
        } else if (r0 + kRows < row_end) {
          next.Plan(w, r0 + kRows, row_end, nb, 0, std::min<int64_t>(kChunkBlocks, nb));
        }
        for (int64_t k = 0; k < n_tiles; ++k) {
          next.Issue(k, n_tiles);
          const int64_t t0 = tb0 + k * kTokTile;
          tile(static_cast<int>(std::min<int64_t>(kTokTile, tb0 + nt - t0)), nbc, t0, b0, acc + (t0 - tb0) * 8);
        }
      }
      StoreRows(args, acc, tb0, nt, r0, nrows);
    }
  }
}

void QuantRows(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  WithUnpacker<kSignedQ8>(*args.w, args.fmt,
                    [&](auto u) { QuantRowsT<decltype(u)>(args, row_begin, row_end, scratch); });
}

// ---- Weights repacked at load ------------------------------------------------------------------------------
// The panels QuantRowsT builds per call, built once (as the AVX-512 path does): row group g at packed + g * GroupBytes,
// its headers (the K-quants) and then its blocks, pstride bytes each, so a task streams one contiguous run of bytes
// and a decode step no longer transposes every row block. Codes that fit 4 bits (Q4_0, Q4_K, MLX 2-4 bit) stay
// nibble-packed (PackedCodes), parameters that came from 16-bit values are stored as those (MLX's once per group),
// Q4_K's as its 6-bit fields and f16 super-block scales (Params256): a block of 8 rows takes 272 bytes in Q8_0 (the
// file 272), 144 in Q4_0 (144), 148 in Q4_K (144), 144 in MLX 4-bit in groups of 64 (144), 210 in Q6_K (210: the
// 6-bit codes as 4 + 2 bit planes). The codes and the parameters' values are BuildPanel's, so results are
// bit-identical to the on-the-fly path.
Params256 PackedParams(const MatrixView& w, QFormat fmt) {
  switch (fmt) {
    case QFormat::kQ8_0:
    case QFormat::kQ4_0:
      return Params256::kF16;
    case QFormat::kMlx:  // once per group (BuildParams starts chunks on group boundaries)
      return w.dtype == DType::kF16    ? Params256::kF16PerGroup
             : w.dtype == DType::kBF16 ? Params256::kBF16PerGroup
                                       : Params256::kF32;
    case QFormat::kQ4_K:
      return Params256::kQ4K;
    case QFormat::kQ6_K:
      return Params256::kQ6K;
    default:
      return Params256::kF32;
  }
}
int64_t PackedStride(const MatrixView& w, QFormat fmt) {
  return PackedCodeBytes(fmt == QFormat::kQ6_K, Nibbles(w, fmt)) + ParamBytes(PackedParams(w, fmt)) * ParamVectors(fmt);
}
// One header per 2^shift blocks: a K-quant's super-block, an MLX group (32, 64 or 128 columns: 1, 2 or 4 blocks).
int HeaderShift(const MatrixView& w, QFormat fmt) {
  const Params256 pk = PackedParams(w, fmt);
  if (pk == Params256::kQ4K || pk == Params256::kQ6K) return kKQuantHeaderShift;
  return PerGroup(pk) ? MlxGroupShift(w) : 0;
}
// Bytes of one row group: its headers, then its blocks.
int64_t GroupBytes(const MatrixView& w, QFormat fmt) {
  const int64_t nb = w.cols / 32;
  return HeaderBytes(PackedParams(w, fmt), nb, HeaderShift(w, fmt)) + nb * PackedStride(w, fmt);
}
size_t PackedBytes(const MatrixView& w, QFormat fmt) {
  if (w.cols % 32 != 0) return 0;
  return static_cast<size_t>((w.rows + kRows - 1) / kRows * GroupBytes(w, fmt));
}

// Writes vector v of a block's 8 f32 parameters f at p, as kind k stores them (exact: each came from such a value).
void StoreParams8(Params256 k, const float* f, uint8_t* p, int v) {
  if (k == Params256::kF32) {
    std::memcpy(p + 32 * v, f, 32);
    return;
  }
  uint16_t h[kRows];
  for (int i = 0; i < kRows; ++i) {
    if (k == Params256::kF16 || k == Params256::kF16PerGroup) {
      h[i] = _cvtss_sh(f[i], _MM_FROUND_TO_NEAREST_INT);
    } else {
      uint32_t u;
      std::memcpy(&u, &f[i], 4);
      h[i] = static_cast<uint16_t>(u >> 16);
    }
  }
  std::memcpy(p + 16 * v, h, sizeof(h));
}

template <typename U>
void PackT(const MatrixView& w, QFormat fmt, uint8_t* out) {
  const int64_t nb = w.cols / 32, groups = (w.rows + kRows - 1) / kRows;
  const int64_t stride = BlockStride(fmt), pstride = PackedStride(w, fmt);
  const bool nib = Nibbles(w, fmt);
  const bool six = fmt == QFormat::kQ6_K;
  const int code_bytes = PackedCodeBytes(six, nib);
  const Params256 pk = PackedParams(w, fmt);
  const int shift = HeaderShift(w, fmt);
  const int64_t header_bytes = HeaderBytes(pk, nb, shift), group_bytes = GroupBytes(w, fmt);
  std::unique_ptr<uint8_t[]> mem(new uint8_t[PanelBytes() + 32]);
  uint8_t* panel = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.get()) + 31) & ~uintptr_t{31});
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t r0 = g * kRows;
    const int nrows = static_cast<int>(std::min<int64_t>(kRows, w.rows - r0));
    const uint8_t* rows[kRows];
    for (int i = 0; i < kRows; ++i) rows[i] = w.Row(r0 + std::min(i, nrows - 1));
    uint8_t* headers = out + g * group_bytes;
    uint8_t* blocks = headers + header_bytes;
    if (pk == Params256::kQ4K || pk == Params256::kQ6K) {
      PackKQuantParams<kRows>(fmt, rows, nb, pstride, code_bytes, headers, blocks);
    }
    for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
      const int64_t nbc = std::min<int64_t>(kChunkBlocks, nb - b0);
      BuildPanel<U>(w, fmt, rows, r0, nrows, b0, nbc, panel);
      for (int64_t b = 0; b < nbc; ++b) {
        const uint8_t* src = panel + b * stride;
        uint8_t* dst = blocks + (b0 + b) * pstride;
        if (nib || six) {
          for (int k = 0; k < 4; ++k) {
            const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + 32 * k));
            const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + 32 * (k + 4)));
            const __m256i low = _mm256_and_si256(lo, m4), high = _mm256_slli_epi16(_mm256_and_si256(hi, m4), 4);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * k), _mm256_or_si256(low, high));
          }
          for (int m = 0; six && m < 2; ++m) {  // the high 2 bits: register 2q + m at bits 2q of vector m
            __m256i plane = _mm256_setzero_si256();
            for (int q = 0; q < 4; ++q) {
              const __m256i r = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + 32 * (2 * q + m)));
              const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(r, 4), _mm256_set1_epi8(0x03));
              plane = _mm256_or_si256(plane, _mm256_sll_epi16(hi, _mm_cvtsi32_si128(2 * q)));
            }
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kCodeBytes / 2 + 32 * m), plane);
          }
        } else {
          std::memcpy(dst, src, kCodeBytes);
        }
        if (pk == Params256::kQ4K || pk == Params256::kQ6K) continue;  // written by PackKQuantParams
        if (PerGroup(pk) && ((b0 + b) & ((int64_t{1} << shift) - 1)) != 0) continue;  // the group's first block did
        uint8_t* to = PerGroup(pk) ? headers + ((b0 + b) >> shift) * HeaderBytesOf(pk) : dst + code_bytes;
        const auto* params = reinterpret_cast<const float*>(src + kCodeBytes);
        for (int v = 0; v < ParamVectors(fmt); ++v) StoreParams8(pk, params + 8 * v, to, v);
      }
    }
  }
}

void Pack(const MatrixView& w, QFormat fmt, uint8_t* out) {
  WithUnpacker<kSignedQ8>(w, fmt, [&](auto u) { PackT<decltype(u)>(w, fmt, out); });
}

// Q6_K's codes take 9 operations a register to unpack from their planes: with several token tiles a chunk, the
// chunk is unpacked once into the on-the-fly path's panel (codes as bytes, the parameters' f32 values, BuildPanel's
// layout) and the tiles read that. kernels_bench Q6_K down at 64 tokens, one thread, AVX2: the planes read by every
// tile 4.02 ms against 3.28 with the panels built per call; unpacked once a chunk, 3.45 against 3.46 in a later run.
void ExpandQ6KChunk(const uint8_t* blocks, const uint8_t* headers, int64_t pstride, int64_t b0, int64_t nbc,
                    uint8_t* panel) {
  const int64_t stride = BlockStride(QFormat::kQ6_K);
  constexpr int kCB = PackedCodeBytes(true, false);
  for (int64_t b = 0; b < nbc; ++b) {
    const uint8_t* pb = blocks + b * pstride;
    uint8_t* out = panel + b * stride;
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j)
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32 * j), PackedCodes<false, true>(pb, j));
    const uint8_t* header = headers + (b0 + b) / 8 * HeaderBytesOf(Params256::kQ6K);
    for (int v = 0; v < 2; ++v) {
      const __m256 scale = LoadParams8<Params256::kQ6K>(pb + kCB, v, header);
      _mm256_store_ps(reinterpret_cast<float*>(out + kCodeBytes) + 8 * v, scale);
    }
  }
}

// QuantRowsT's loop nest over the packed panels (row_begin is a multiple of kRows). The next chunk's bytes follow the
// current one's (the next group's first chunk after a group's last): prefetched a tile's share at a time.
template <bool kBias, bool kSigned, bool kNib, Params256 kPk>
void QuantRowsPackedT(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const MatrixView& w = *args.w;
  const QuantizedActs& a = *args.acts;
  const int64_t nb = a.nb, n_tokens = a.n_tokens, pstride = PackedStride(w, args.fmt);
  const int shift = HeaderShift(w, args.fmt);
  const int64_t header_bytes = HeaderBytes(kPk, nb, shift), group_bytes = GroupBytes(w, args.fmt);
  float* acc = reinterpret_cast<float*>(scratch + PanelBytes());
  const uint8_t* task_end = w.packed + (row_end + kRows - 1) / kRows * group_bytes;
  for (int64_t tb0 = 0; tb0 < n_tokens; tb0 += kTokBlock) {
    const int64_t nt = std::min<int64_t>(kTokBlock, n_tokens - tb0);
    const int64_t n_tiles = (nt + kTokTile - 1) / kTokTile;
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows) {
      const int nrows = static_cast<int>(std::min<int64_t>(kRows, row_end - r0));
      const uint8_t* headers = w.packed + r0 / kRows * group_bytes;
      const uint8_t* blocks = headers + header_bytes;
      std::memset(acc, 0, static_cast<size_t>(nt) * 32);
      for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
        const int64_t nbc = std::min<int64_t>(kChunkBlocks, nb - b0);
        const uint8_t* panel = blocks + b0 * pstride;
        const uint8_t* next = panel + nbc * pstride;
        const bool expand = kPk == Params256::kQ6K && n_tiles >= 2;
        if (expand) ExpandQ6KChunk(panel, headers, pstride, b0, nbc, scratch);
        const int64_t lines = next < task_end ? std::min<int64_t>(kChunkBlocks * pstride, task_end - next) / 64 : 0;
        for (int64_t k = 0; k < n_tiles; ++k) {
          for (int64_t i = lines * k / n_tiles; i < lines * (k + 1) / n_tiles; ++i)
            _mm_prefetch(reinterpret_cast<const char*>(next + i * 64), _MM_HINT_T0);
          const int64_t t0 = tb0 + k * kTokTile;
          const int tt = static_cast<int>(std::min<int64_t>(kTokTile, tb0 + nt - t0));
          if (expand) {
            RunTile<2, false, false>(tt, scratch, BlockStride(QFormat::kQ6_K), nbc, a, t0, b0, acc + (t0 - tb0) * 8);
          } else {
            RunTile<kPk == Params256::kQ6K ? 2 : 1, kBias, kSigned, kNib, kPk>(tt, panel, pstride, nbc, a, t0, b0,
                                                                              acc + (t0 - tb0) * 8, headers, shift);
          }
        }
      }
      StoreRows(args, acc, tb0, nt, r0, nrows);
    }
  }
}

template <bool kBias, bool kSigned, bool kNib>
void QuantRowsPackedP(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  switch (PackedParams(*args.w, args.fmt)) {
    case Params256::kF16:
      return QuantRowsPackedT<kBias, kSigned, kNib, Params256::kF16>(args, row_begin, row_end, scratch);
    case Params256::kF16PerGroup:  // MLX only: a scale and a bias
      if constexpr (kBias) {
        return QuantRowsPackedT<true, kSigned, kNib, Params256::kF16PerGroup>(args, row_begin, row_end, scratch);
      } else {
        PARALLM_CHECK_MSG(false, "MLX parameters with another format's kernel");
      }
    case Params256::kBF16PerGroup:
      if constexpr (kBias) {
        return QuantRowsPackedT<true, kSigned, kNib, Params256::kBF16PerGroup>(args, row_begin, row_end, scratch);
      } else {
        PARALLM_CHECK_MSG(false, "MLX parameters with another format's kernel");
      }
    case Params256::kQ4K:  // Q4_K only: a bias, unsigned nibble codes
      if constexpr (kBias && !kSigned && kNib) {
        return QuantRowsPackedT<true, false, true, Params256::kQ4K>(args, row_begin, row_end, scratch);
      } else {
        PARALLM_CHECK_MSG(false, "Q4_K parameters with another format's kernel");
      }
    default:
      return QuantRowsPackedT<kBias, kSigned, kNib, Params256::kF32>(args, row_begin, row_end, scratch);
  }
}

void QuantRowsPacked(const QuantArgs& args, int64_t row_begin, int64_t row_end, uint8_t* scratch) {
  const MatrixView& w = *args.w;
  const bool bias = HasBias(args.fmt);
  if (args.fmt == QFormat::kQ6_K) {  // 6-bit unsigned codes, two scales a block
    return QuantRowsPackedT<false, false, false, Params256::kQ6K>(args, row_begin, row_end, scratch);
  }
  if (Nibbles(w, args.fmt)) {  // 4-bit codes are unsigned
    return bias ? QuantRowsPackedP<true, false, true>(args, row_begin, row_end, scratch)
                : QuantRowsPackedP<false, false, true>(args, row_begin, row_end, scratch);
  }
  if (UsesSignedCodes(w, args.fmt)) {
    return bias ? QuantRowsPackedP<true, true, false>(args, row_begin, row_end, scratch)
                : QuantRowsPackedP<false, true, false>(args, row_begin, row_end, scratch);
  }
  return bias ? QuantRowsPackedP<true, false, false>(args, row_begin, row_end, scratch)
              : QuantRowsPackedP<false, false, false>(args, row_begin, row_end, scratch);
}

// ---- activation quantization (bit-identical to QuantizeActs) -------------------------------------------
// 8 blocks at a time, as the AVX-512 quantizer does 16: each block's max and int sums are one lane of a transposed
// reduction, and one vector division serves the 8 scales (one block at a time, the horizontal steps and scalar
// divisions were most of the work: `kernels_bench --benchmark_filter=QuantizeActs/avx2` read 107-115 M blocks/s
// then, 199-236 M now).
//
// ReduceEach8: op's reduction of the 8 lanes of v[j] lands in lane 4 (j % 2) + j / 2 of the result (three rounds of
// pairwise shuffles). kLaneBlock8 is that map's inverse: callers put block kLaneBlock8[j] in v[j], and lane b then
// holds block b's.
constexpr int kLaneBlock8[8] = {0, 4, 1, 5, 2, 6, 3, 7};

template <class Op>
PARALLM_INLINE __m256 ReduceEach8(const __m256* v, Op op) {
  __m256 r[4], s[2];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j)
    r[j] = op(_mm256_permute2f128_ps(v[2 * j], v[2 * j + 1], 0x20), _mm256_permute2f128_ps(v[2 * j], v[2 * j + 1], 0x31));
#pragma GCC unroll 2
  for (int j = 0; j < 2; ++j)
    s[j] = op(_mm256_shuffle_ps(r[2 * j], r[2 * j + 1], 0x44), _mm256_shuffle_ps(r[2 * j], r[2 * j + 1], 0xEE));
  return op(_mm256_shuffle_ps(s[0], s[1], 0x88), _mm256_shuffle_ps(s[0], s[1], 0xDD));
}

PARALLM_INLINE __m256 Max8(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
PARALLM_INLINE __m256 AddEpi32x8(__m256 a, __m256 b) {
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b)));
}

// x * id rounded to the nearest int, at least -127 (QuantizeActs also clamps at 127, which x * id never passes:
// |x| <= amax, so x * id <= 127 (1 + 2^-22); a NaN or infinite product converts to INT_MIN, which the max takes to
// -127 as the clamp does).
PARALLM_INLINE __m256i QuantizeVec8(const float* x, __m256 id) {
  return _mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id)), _mm256_set1_epi32(-127));
}

// kHalves: Q6_K's activations, with a correction per half-block.
template <bool kHalves>
void QuantizeActs256T(const float* x, int64_t t0, int64_t t1, int code_offset, QuantizedActs* a) {
  const int64_t cols = a->cols, nb = a->nb;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // packs work per 128-bit lane
  for (int64_t t = t0; t < t1; ++t) {
    const float* xt = x + t * cols;
    int8_t* qt = a->q + t * cols;
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
      const int k = static_cast<int>(std::min<int64_t>(8, nb - b0));  // blocks in this group
      const float* xg = xt + b0 * 32;
      __m256 m[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const int b = kLaneBlock8[j];
        if (b >= k) {
          m[j] = _mm256_setzero_ps();
          continue;
        }
        const float* xb = xg + b * 32;
        m[j] = _mm256_max_ps(
            _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb), abs_mask), _mm256_and_ps(_mm256_loadu_ps(xb + 8), abs_mask)),
            _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb + 16), abs_mask),
                          _mm256_and_ps(_mm256_loadu_ps(xb + 24), abs_mask)));
      }
      const __m256 d = _mm256_div_ps(ReduceEach8(m, Max8), _mm256_set1_ps(127.0f));
      const __m256 nonzero = _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_UQ);
      alignas(32) float id[8];
      _mm256_store_ps(id, _mm256_and_ps(nonzero, _mm256_div_ps(_mm256_set1_ps(1.0f), d)));
      // Per block the sums of its two halves (sum0, sum1: Q6_K's corrections), or of the whole block (sum0).
      __m256 sum0[8], sum1[kHalves ? 8 : 1];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const int b = kLaneBlock8[j];
        if (b >= k) {
          sum0[j] = _mm256_setzero_ps();
          if constexpr (kHalves) sum1[j] = _mm256_setzero_ps();
          continue;
        }
        const float* xb = xg + b * 32;
        const __m256 vid = _mm256_set1_ps(id[b]);
        const __m256i q0 = QuantizeVec8(xb, vid), q1 = QuantizeVec8(xb + 8, vid);
        const __m256i q2 = QuantizeVec8(xb + 16, vid), q3 = QuantizeVec8(xb + 24, vid);
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qt + (b0 + b) * 32), _mm256_permutevar8x32_epi32(p, order));
        const __m256i h0 = _mm256_add_epi32(q0, q1), h1 = _mm256_add_epi32(q2, q3);
        if constexpr (kHalves) {
          sum0[j] = _mm256_castsi256_ps(h0);
          sum1[j] = _mm256_castsi256_ps(h1);
        } else {
          sum0[j] = _mm256_castsi256_ps(_mm256_add_epi32(h0, h1));
        }
      }
      const __m256i s0 = _mm256_castps_si256(ReduceEach8(sum0, AddEpi32x8));
      __m256i s1 = _mm256_setzero_si256();
      if constexpr (kHalves) s1 = _mm256_castps_si256(ReduceEach8(sum1, AddEpi32x8));
      const __m256i s = _mm256_add_epi32(s0, s1);
      const __m256i neg_offset = _mm256_set1_epi32(-code_offset);
      alignas(32) float d_out[8], ds_out[8];
      alignas(32) int32_t c0[8], c1[8];
      _mm256_store_ps(d_out, d);
      _mm256_store_ps(ds_out, _mm256_mul_ps(d, _mm256_cvtepi32_ps(s)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(c0), _mm256_mullo_epi32(neg_offset, kHalves ? s0 : s));
      _mm256_store_si256(reinterpret_cast<__m256i*>(c1), _mm256_mullo_epi32(neg_offset, s1));
      const int64_t o = t * nb + b0;
      std::memcpy(a->d + o, d_out, static_cast<size_t>(k) * 4);
      std::memcpy(a->ds + o, ds_out, static_cast<size_t>(k) * 4);
      if constexpr (kHalves) {
        for (int b = 0; b < k; ++b) {
          a->corr[(o + b) * 2] = c0[b];
          a->corr[(o + b) * 2 + 1] = c1[b];
        }
      } else {
        std::memcpy(a->corr + o, c0, static_cast<size_t>(k) * 4);
      }
    }
  }
}

void QuantizeActs256(const float* x, int64_t t0, int64_t t1, int code_offset, QuantizedActs* a) {
  if (a->subs == 2) {
    QuantizeActs256T<true>(x, t0, t1, code_offset, a);
  } else {
    QuantizeActs256T<false>(x, t0, t1, code_offset, a);
  }
}

// ---- f32 FMA path ---------------------------------------------------------------------------------------
// One output = one ymm accumulator over columns in steps of 8, the tail zero-padded through a small buffer,
// then a fixed horizontal sum.
template <DType kType>
PARALLM_INLINE __m256 LoadW8(const uint8_t* row, int64_t c) {
  if constexpr (kType == DType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + c));
    if constexpr (kType == DType::kF16) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

PARALLM_INLINE float HSum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

template <DType kType, int R, int T>
void FloatTile(const FloatArgs& a, int64_t r0, int64_t t0) {
  const MatrixView& w = *a.w;
  const int64_t cols = w.cols, full = cols / 8 * 8;
  const size_t esize = Info(kType).block_bytes;
  __m256 acc[R][T];
  const uint8_t* rows[R];
  const float* xs[T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) rows[r] = w.Row(r0 + r);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) xs[t] = a.x + (t0 + t) * cols;
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t c = 0; c < full; c += 8) {
    __m256 xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(xs[t] + c);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 wv = LoadW8<kType>(rows[r], c);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (full < cols) {
    const int64_t n = cols - full;
    alignas(32) uint8_t wtail[R][32] = {};
    alignas(32) float xtail[T][8] = {};
    for (int r = 0; r < R; ++r) std::memcpy(wtail[r], rows[r] + full * esize, static_cast<size_t>(n) * esize);
    for (int t = 0; t < T; ++t) std::memcpy(xtail[t], xs[t] + full, static_cast<size_t>(n) * 4);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = LoadW8<kType>(wtail[r], 0);
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, _mm256_load_ps(xtail[t]), acc[r][t]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) a.y[(t0 + t) * a.y_stride + r0 + r] = HSum(acc[r][t]);
}

struct FloatTiles {
  template <DType kType, int R, int T>
  static void Run(const FloatArgs& a, int64_t r0, int64_t t0) { FloatTile<kType, R, T>(a, r0, t0); }
};

// Tiles of 4 rows x 3 tokens: 12 accumulators + 3 activation registers + 1 weight register.
void FloatRows(const FloatArgs& a, int64_t row_begin, int64_t row_end) {
  FloatRowsByTiles<FloatTiles, 3>(a, row_begin, row_end);
}

const IsaKernels kKernels{kRows,      &CodeOffset,  &ScratchBytes, &QuantizeActs256, &QuantRows,
                          &FloatRows, &PackedBytes, &Pack,         &QuantRowsPacked,  0};
