// Weight-code unpackers shared by the x86 paths: one 32-column block of one weight row -> 32 code bytes
// in a __m256i, in column order, ready for an int8 dot product. AVX2 instructions only. Also what their packed
// copies share: which formats keep nibble codes, MLX's group in blocks, and the K-quants' parameter fields.
//
// Included by each x86 path's .cpp inside its `#pragma GCC target` region and anonymous namespace, so
// every path gets its own internal copy compiled for its own instruction set (no ODR sharing of code
// compiled for different ISAs). `kSignedQ8` selects Q8_0 as signed bytes (AVX2's maddubs sign trick)
// instead of unsigned q + 128 (vpdpbusd); likewise 8-bit MLX codes as signed q - 128.
//
// Requires: <immintrin.h>, <cstring>, tensor/quant.h, kernels/matmul_internal.h, util/check.h.

// Row pointer + block index -> codes. `row` is the start of the weight row's bytes.
struct UnpackQ8_0 {
  static constexpr int kOffset = 128;  // codes are q + 128 (unsigned)
  static inline __attribute__((always_inline)) __m256i Codes(const uint8_t* row, int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
    return _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

struct UnpackQ8_0Signed {
  static constexpr int kOffset = 0;  // codes are q (signed)
  static inline __attribute__((always_inline)) __m256i Codes(const uint8_t* row, int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
  }
};

struct UnpackQ4_0 {
  static constexpr int kOffset = 8;  // codes 0..15 stand for q - 8
  static inline __attribute__((always_inline)) __m256i Codes(const uint8_t* row, int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
  }
};

struct UnpackQ4_K {
  static constexpr int kOffset = 0;
  static inline __attribute__((always_inline)) __m256i Codes(const uint8_t* row, int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + b / 8;
    int j = static_cast<int>(b % 8);
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + (j / 2) * 32));
    if (j & 1) v = _mm256_srli_epi16(v, 4);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
  }
};

struct UnpackQ6_K {
  static constexpr int kOffset = 32;  // codes 0..63 stand for q - 32
  static inline __attribute__((always_inline)) __m256i Codes(const uint8_t* row, int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(row) + b / 8;
    int j = static_cast<int>(b % 8), half = j / 4, quarter = j % 4;
    __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->ql + half * 64 + (quarter & 1) * 32));
    __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh + half * 32));
    if (quarter & 2) lo = _mm256_srli_epi16(lo, 4);
    lo = _mm256_and_si256(lo, _mm256_set1_epi8(0x0F));
    hi = _mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * quarter));
    hi = _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x03)), 4);
    return _mm256_or_si256(lo, hi);
  }
};

// MLX, 8 bits: code i is byte i of the row's stream.
template <bool kSigned>
struct UnpackMlx8 {
  static constexpr int kOffset = kSigned ? -128 : 0;  // signed: codes q - 128
  static inline __attribute__((always_inline)) __m256i Codes(const uint8_t* row, int64_t b) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + b * 32));
    return kSigned ? _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80))) : v;
  }
};

// MLX, 4 bits: byte k holds code 2k (low nibble) and 2k+1 (high nibble).
struct UnpackMlx4 {
  static constexpr int kOffset = 0;
  static inline __attribute__((always_inline)) __m256i Codes(const uint8_t* row, int64_t b) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * 16));
    const __m128i m = _mm_set1_epi8(0x0F);
    __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
  }
};

// MLX, 2, 3, 5 or 6 bits: each run of 8 codes is exactly kBits bytes, with the same bit pattern in every
// run. One 128-bit lane holds one run's bytes; a byte shuffle puts the 16-bit window holding code i in word
// i, a multiply by 2^(7 - shift_i) moves the code's low bit to bit 7, and >> 7 + mask leaves the code.
template <int kBits>
struct UnpackMlxN {
  static constexpr int kOffset = 0;
  // Exactly the run's kBits bytes (never past the row), as whole-integer loads combined in a register:
  // a memcpy of 3, 5 or 6 bytes into a stack word would stall on store forwarding.
  static inline __attribute__((always_inline)) __m128i Run(const uint8_t* p) {
    uint64_t v;
    if constexpr (kBits == 2) {
      uint16_t a;
      std::memcpy(&a, p, 2);
      v = a;
    } else if constexpr (kBits == 3) {
      uint16_t a;
      std::memcpy(&a, p, 2);
      v = a | (static_cast<uint64_t>(p[2]) << 16);
    } else if constexpr (kBits == 5) {
      uint32_t a;
      std::memcpy(&a, p, 4);
      v = a | (static_cast<uint64_t>(p[4]) << 32);
    } else {
      uint32_t a;
      uint16_t c;
      std::memcpy(&a, p, 4);
      std::memcpy(&c, p + 4, 2);
      v = a | (static_cast<uint64_t>(c) << 32);
    }
    return _mm_cvtsi64_si128(static_cast<long long>(v));
  }
  static inline __attribute__((always_inline)) __m256i Codes(const uint8_t* row, int64_t b) {
    const uint8_t* p = row + b * 4 * kBits;
    alignas(32) static constexpr uint8_t kShuffle[16] = {
        (0 * kBits) / 8, (0 * kBits) / 8 + 1, (1 * kBits) / 8, (1 * kBits) / 8 + 1,
        (2 * kBits) / 8, (2 * kBits) / 8 + 1, (3 * kBits) / 8, (3 * kBits) / 8 + 1,
        (4 * kBits) / 8, (4 * kBits) / 8 + 1, (5 * kBits) / 8, (5 * kBits) / 8 + 1,
        (6 * kBits) / 8, (6 * kBits) / 8 + 1, (7 * kBits) / 8, (7 * kBits) / 8 + 1};
    alignas(32) static constexpr int16_t kMul[8] = {
        1 << (7 - (0 * kBits) % 8), 1 << (7 - (1 * kBits) % 8), 1 << (7 - (2 * kBits) % 8),
        1 << (7 - (3 * kBits) % 8), 1 << (7 - (4 * kBits) % 8), 1 << (7 - (5 * kBits) % 8),
        1 << (7 - (6 * kBits) % 8), 1 << (7 - (7 * kBits) % 8)};
    const __m256i shuffle = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kShuffle)));
    const __m256i mul = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kMul)));
    const __m256i mask = _mm256_set1_epi16((1 << kBits) - 1);
    // Runs 0 and 2 in a, 1 and 3 in b: packus interleaves 128-bit lanes back into run order 0, 1, 2, 3.
    __m256i a = _mm256_set_m128i(Run(p + 2 * kBits), Run(p));
    __m256i c = _mm256_set_m128i(Run(p + 3 * kBits), Run(p + kBits));
    a = _mm256_and_si256(_mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(a, shuffle), mul), 7), mask);
    c = _mm256_and_si256(_mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(c, shuffle), mul), 7), mask);
    return _mm256_packus_epi16(a, c);
  }
};

// Calls fn(Unpacker{}) with the unpacker for this weight format.
template <bool kSignedQ8, typename Fn>
void WithUnpacker(const MatrixView& w, QFormat fmt, Fn&& fn) {
  switch (fmt) {
    case QFormat::kQ8_0:
      if constexpr (kSignedQ8) {
        fn(UnpackQ8_0Signed{});
      } else {
        fn(UnpackQ8_0{});
      }
      return;
    case QFormat::kQ4_0:
      return fn(UnpackQ4_0{});
    case QFormat::kQ4_K:
      return fn(UnpackQ4_K{});
    case QFormat::kQ6_K:
      return fn(UnpackQ6_K{});
    case QFormat::kMlx:
      switch (w.mlx.bits) {
        case 2:
          return fn(UnpackMlxN<2>{});
        case 3:
          return fn(UnpackMlxN<3>{});
        case 4:
          return fn(UnpackMlx4{});
        case 5:
          return fn(UnpackMlxN<5>{});
        case 6:
          return fn(UnpackMlxN<6>{});
        default:
          return fn(UnpackMlx8<kSignedQ8>{});
      }
  }
}

// The code offset the unpacker for (w, fmt) uses; QuantizeActs folds it into corr.
template <bool kSignedQ8>
int CodeOffsetOf(const MatrixView& w, QFormat fmt) {
  int offset = 0;
  WithUnpacker<kSignedQ8>(w, fmt, [&](auto u) { offset = decltype(u)::kOffset; });
  return offset;
}

// Whether the packed copies keep w's codes nibble-packed: formats whose codes fit 4 bits.
inline bool Nibbles(const MatrixView& w, QFormat fmt) {
  return fmt == QFormat::kQ4_0 || fmt == QFormat::kQ4_K || (fmt == QFormat::kMlx && w.mlx.bits <= 4);
}

// An MLX matrix's group of columns in 32-column blocks, as a power of two (groups of 32, 64, 128: 0, 1, 2): the packed
// copies keep its scales and biases once per group.
inline int MlxGroupShift(const MatrixView& w) {
  int shift = 0;
  while ((int64_t{32} << shift) < w.mlx.group_size) ++shift;
  PARALLM_CHECK((int64_t{32} << shift) == w.mlx.group_size);
  return shift;
}

// The K-quants' parameters in the packed copies, for a row group of kR rows (rows[i]: row i, a ragged group repeating
// its last row as the panels do), per super-block of 8 blocks (kKQuantHeaderShift): a header of the kR rows' f16 d,
// then (Q4_K) their f16 dmin; per block, at blocks + b * pstride + code_bytes, kR values then kR more: Q4_K's
// sub-block scales then mins as bytes (ScaleMinK4), Q6_K's int8 scales of the rows' first 16 columns then of their
// last 16. The kernels form d * scale (and -(dmin * min)) from them with the f32 operations their BuildParams uses.
constexpr int kKQuantHeaderShift = 3;
template <int kR>
void PackKQuantParams(QFormat fmt, const uint8_t* const* rows, int64_t nb, int64_t pstride, int code_bytes,
                      uint8_t* headers, uint8_t* blocks) {
  const bool q4k = fmt == QFormat::kQ4_K;
  for (int64_t sb = 0; sb < nb / 8; ++sb) {
    uint16_t* h = reinterpret_cast<uint16_t*>(headers + sb * (q4k ? 4 : 2) * kR);
    for (int i = 0; i < kR; ++i) {
      const BlockQ4_K* b4 = q4k ? reinterpret_cast<const BlockQ4_K*>(rows[i]) + sb : nullptr;
      const BlockQ6_K* b6 = q4k ? nullptr : reinterpret_cast<const BlockQ6_K*>(rows[i]) + sb;
      h[i] = q4k ? b4->d : b6->d;
      if (q4k) h[kR + i] = b4->dmin;
      for (int j = 0; j < 8; ++j) {
        uint8_t* p = blocks + (sb * 8 + j) * pstride + code_bytes;
        int first, second;  // Q4_K: a sub-block's scale and min; Q6_K: its halves' scales
        if (q4k) {
          ScaleMinK4(j, b4->scales, &first, &second);
        } else {
          first = b6->scales[2 * j];
          second = b6->scales[2 * j + 1];
        }
        p[i] = static_cast<uint8_t>(first);
        p[kR + i] = static_cast<uint8_t>(second);
      }
    }
  }
}
