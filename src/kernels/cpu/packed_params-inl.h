// How the AVX-512 packed layout (and the AMX path reading it) stores a block's f32 parameters (scale, bias):
// 16 lanes of f32, or of the 16-bit value they were converted from (f16 or bf16, exact both ways), which cuts
// a 4-bit block's bytes by a sixth and an 8-bit one's by a twentieth; decode streams every byte once per step.
// Q4_K keeps its own encoding (kQ4K): the 6-bit sub-block scale and min of each row as bytes in the block, and each
// super-block's f16 d and dmin once in a header per 8 blocks; the kernel forms d * scale and -(dmin * min) with the
// same f32 operations BuildParams uses, so the values are the same bits, from 296 bytes a block instead of 384.
// MLX's 16-bit scales and biases change once per group of 64 (or 32, 128) columns, not per 32-column block: stored
// once per group in the same kind of header (kF16PerGroup, kBF16PerGroup), a 4-bit block in groups of 64 is 288 bytes
// instead of 320 (the experts of an MLX mixture stream 10% fewer bytes a step).
// Q6_K (kQ6K) keeps its 6-bit codes as a 4-bit and a 2-bit plane (PackedCodes512), each row's two int8 half-block
// scales in the block and the super-block's f16 d in a 32-byte header: 416 bytes a block and 32 a super-block, the
// file's 210 per 256 weights (f32 products and byte codes were 640 a block).
//
// With 16-bit parameters a block's bytes may not be a multiple of 64 (Q8_0: 512 + 32), so packed blocks are
// not all 64-byte aligned: the kernels load them unaligned (the same bytes are streamed either way).
//
// PackedRows reads a packed row group's blocks (codes and parameters) the way the AMX kernels do.
//
// Included by matmul_avx512.cpp, matmul_amx.cpp and matmul_amx_bf16.cpp inside their `#pragma GCC target` regions and
// anonymous namespaces. Requires: <immintrin.h>, kernels/matmul_internal.h.

enum class ParamKind : int {
  kF32 = 0, kF16 = 1, kBF16 = 2, kQ4K = 3, kF16PerGroup = 4, kBF16PerGroup = 5, kQ6K = 6
};

// Whether the kind keeps (some of) its parameters in headers shared by several blocks.
constexpr bool HasHeaders(ParamKind k) {
  return k == ParamKind::kQ4K || k == ParamKind::kQ6K || k == ParamKind::kF16PerGroup || k == ParamKind::kBF16PerGroup;
}
// Per vector of 16 lanes, in the block (kQ4K, kQ6K: 16 bytes of 6-bit or int8 values; the per-group kinds: none, all in
// headers).
inline int ParamBytes(ParamKind k) {
  return k == ParamKind::kF32 ? 64 : k == ParamKind::kQ4K || k == ParamKind::kQ6K ? 16 : HasHeaders(k) ? 0 : 32;
}

// Headers: one per 2^shift blocks (the K-quants: 8, a super-block; the per-group kinds: an MLX group): 16 lanes of
// f16 d then 16 of f16 dmin (kQ4K), 16 lanes of f16 d (kQ6K), or 16 lanes of the 16-bit scale then 16 of the bias. A
// row group's headers come first, then its blocks: group g at packed + g * (header_bytes + nb * stride).
constexpr int HeaderBytesOf(ParamKind k) { return k == ParamKind::kQ6K ? 32 : HasHeaders(k) ? 64 : 0; }
inline int64_t GroupHeaderBytes(ParamKind k, int64_t nb, int shift) { return (nb >> shift) * HeaderBytesOf(k); }
// The packed row group g (`header_bytes`: GroupHeaderBytes): its headers and its first block.
struct PackedGroup {
  const uint8_t* headers;
  const uint8_t* blocks;
};
inline PackedGroup PackedGroupAt(const uint8_t* packed, int64_t g, int64_t nb, int64_t stride, int64_t header_bytes) {
  const uint8_t* base = packed + g * (header_bytes + nb * stride);
  return PackedGroup{base, base + header_bytes};
}
// The header of block b (b counted from a block whose header starts one; null headers for the other kinds).
inline const uint8_t* HeaderOf(ParamKind k, const uint8_t* headers, int64_t b, int shift) {
  return headers == nullptr ? nullptr : headers + (b >> shift) * HeaderBytesOf(k);
}

// Writes vector v (0: scale, 1: bias or second scale) of a block's parameters at p (the per-group kinds: at their
// header); LoadParams reads it back. The 16-bit kinds are exact because each value came from one: f16 by
// conversion, bf16 as the f32's top half.
inline void StoreParams(ParamKind k, __m512 f, uint8_t* p, int v) {
  if (k == ParamKind::kF32) {
    _mm512_storeu_ps(reinterpret_cast<float*>(p) + 16 * v, f);
  } else if (k == ParamKind::kF16 || k == ParamKind::kF16PerGroup) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 32 * v), _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 32 * v),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(f), 16)));
  }
}

// Vector v (0: scale, 1: bias or second scale) of a block's parameters at p; `header` is the block's header
// (HeaderOf; the kinds with headers only). kQ4K: scale = d * float(sc), bias = -(dmin * float(m)), kQ6K: scale v =
// d * float(sc_v), as BuildParams computes them; the per-group kinds: the 16-bit values in the header.
template <ParamKind kKind>
inline __attribute__((always_inline)) __m512 LoadParams(const uint8_t* p, int v, const uint8_t* header = nullptr) {
  if constexpr (kKind == ParamKind::kF16PerGroup) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(header + 32 * v)));
  } else if constexpr (kKind == ParamKind::kBF16PerGroup) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(header + 32 * v));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else if constexpr (kKind == ParamKind::kQ4K) {
    const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(header + 32 * v)));
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v))));
    const __m512 f = _mm512_mul_ps(dv, q);
    if (v == 0) return f;
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(f), _mm512_set1_epi32(INT32_MIN)));
  } else if constexpr (kKind == ParamKind::kQ6K) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(header)));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v));
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
  } else if constexpr (kKind == ParamKind::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p) + 16 * v);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * v));
    if constexpr (kKind == ParamKind::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// Bytes of a packed block's codes: 6-bit codes (Q6_K) as a 4-bit and a 2-bit plane, 4-bit ones nibble-packed, the
// others as bytes.
constexpr int PackedCodeBytes(bool six, bool nib) { return six ? 384 : nib ? 256 : 512; }

// Register j (codes 4j..4j+3 of each of 16 rows, a dword per row) of a packed block's codes at pb. kNib or kSix:
// vector j % 4 holds register j in its low nibbles for j < 4, in its high ones after; kSix: the 2-bit plane after
// those 256 bytes holds the codes' high 2 bits, register j's at bits 2 (j / 2) of vector j % 2.
template <bool kNib, bool kSix>
inline __attribute__((always_inline)) __m512i PackedCodes(const uint8_t* pb, int j) {
  if constexpr (!kNib && !kSix) return _mm512_loadu_si512(pb + 64 * j);
  const __m512i v = _mm512_loadu_si512(pb + 64 * (j & 3));
  const __m512i nib = j < 4 ? v : _mm512_srli_epi16(v, 4);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  if constexpr (!kSix) return _mm512_and_si512(nib, m4);
  const __m512i h = _mm512_loadu_si512(pb + 256 + 64 * (j & 1));
  const int at = 2 * (j >> 1);  // the high bits' place in h: moved to bits 4-5
  const __m512i hi = _mm512_and_si512(at <= 4 ? _mm512_slli_epi16(h, 4 - at) : _mm512_srli_epi16(h, at - 4),
                                      _mm512_set1_epi8(0x30));
  return _mm512_ternarylogic_epi32(nib, hi, m4, 0xEC);  // (nib & m4) | hi
}

// All 8 code registers of a block packed as Q6_K's planes (PackedCodes<false, true> for j = 0..7), each vector loaded
// once.
inline __attribute__((always_inline)) void UnpackSixBitCodes(const uint8_t* pb, __m512i reg[8]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30);
  const __m512i h0 = _mm512_loadu_si512(pb + 256), h1 = _mm512_loadu_si512(pb + 320);
  const __m512i hi[8] = {_mm512_slli_epi16(h0, 4), _mm512_slli_epi16(h1, 4), _mm512_slli_epi16(h0, 2),
                         _mm512_slli_epi16(h1, 2), h0, h1, _mm512_srli_epi16(h0, 2), _mm512_srli_epi16(h1, 2)};
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_loadu_si512(pb + 64 * k);
    reg[k] = _mm512_ternarylogic_epi32(v, _mm512_and_si512(hi[k], m2), m4, 0xEC);
    reg[k + 4] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), _mm512_and_si512(hi[k + 4], m2), m4, 0xEC);
  }
}

// The instance of kernel K (a class template over <bias, signed codes, parameter kind> with a static Run) for a format
// with one scale per block: the biased formats (Q4_K, MLX) read unsigned codes with any kind of parameters, the ones
// with a code offset (Q4_0, Q8_0) signed codes and f16 scales. Null for any other combination.
template <template <bool, bool, ParamKind> class K>
auto PickKernel(bool bias, bool offset, ParamKind pk) -> decltype(&K<true, false, ParamKind::kF32>::Run) {
  if (bias) {
    switch (pk) {
      case ParamKind::kQ4K: return &K<true, false, ParamKind::kQ4K>::Run;
      case ParamKind::kF16PerGroup: return &K<true, false, ParamKind::kF16PerGroup>::Run;
      case ParamKind::kBF16PerGroup: return &K<true, false, ParamKind::kBF16PerGroup>::Run;
      case ParamKind::kF16: return &K<true, false, ParamKind::kF16>::Run;
      case ParamKind::kBF16: return &K<true, false, ParamKind::kBF16>::Run;
      case ParamKind::kF32: return &K<true, false, ParamKind::kF32>::Run;
      case ParamKind::kQ6K: return nullptr;  // Q6_K has two scales a block and no bias
    }
    return nullptr;
  }
  return offset && pk == ParamKind::kF16 ? &K<false, true, ParamKind::kF16>::Run : nullptr;
}

// A packed row group of matrix w (the AVX-512 layout, which both AMX kernels read): block b at base + b * stride, its
// codes first (PackedCodeBytes: bytes, nibbles or Q6_K's planes) as code + offset, then its parameters; its header
// (the kinds with headers) from `headers`.
struct PackedRows {
  const uint8_t* base = nullptr;
  const uint8_t* headers = nullptr;
  int header_shift = 0;
  int64_t stride = 0;
  int64_t header_bytes = 0;  // per row group
  int code_bytes = 512;
  int offset = 0;
  ParamKind kind = ParamKind::kF32;

  PackedRows() = default;
  PackedRows(const MatrixView& w, QFormat fmt)
      : header_shift(Avx512PackedHeaderShift(w, fmt)),
        stride(Avx512PackedStride(w, fmt)),
        header_bytes(Avx512PackedHeaderBytes(w, fmt)),
        code_bytes(PackedCodeBytes(fmt == QFormat::kQ6_K, Avx512PackedNibbles(w, fmt))),
        offset(Avx512Kernels()->code_offset(w, fmt)),
        kind(static_cast<ParamKind>(Avx512PackedParamKind(w, fmt))) {}

  // Points at row group g (rows 16g..16g + 15) of the packed copy `packed` with nb blocks a row.
  void At(const uint8_t* packed, int64_t g, int64_t nb) {
    const PackedGroup pg = PackedGroupAt(packed, g, nb, stride, header_bytes);
    base = pg.blocks;
    headers = HasHeaders(kind) ? pg.headers : nullptr;
  }
  const uint8_t* Params(int64_t b) const { return base + b * stride + code_bytes; }
  const uint8_t* Header(int64_t b) const { return HeaderOf(kind, headers, b, header_shift); }
  // Block b's 8 code registers (PackedCodes) with the offset taken off (Q8_0's, Q4_0's and Q6_K's codes then signed
  // bytes).
  inline __attribute__((always_inline)) void LoadCodes(int64_t b, __m512i reg[8]) const {
    const uint8_t* p = base + b * stride;
    const __m512i off = _mm512_set1_epi8(static_cast<char>(offset));
    if (code_bytes == 384) {
      UnpackSixBitCodes(p, reg);
    } else {
      for (int k = 0; k < 8; ++k) {
        reg[k] = code_bytes == 512 ? PackedCodes<false, false>(p, k) : PackedCodes<true, false>(p, k);
      }
    }
    for (int k = 0; k < 8; ++k) reg[k] = _mm512_sub_epi8(reg[k], off);
  }
};
