// How the AVX-512 packed layout (and the AMX path reading it) stores a block's f32 parameters (scale, bias):
// 16 lanes of f32, or of the 16-bit value they were converted from (f16 or bf16, exact both ways), which cuts
// a 4-bit block's bytes by a sixth and an 8-bit one's by a twentieth; decode streams every byte once per step.
//
// With 16-bit parameters a block's bytes may not be a multiple of 64 (Q8_0: 512 + 32), so packed blocks are
// not all 64-byte aligned: the kernels load them unaligned (the same bytes are streamed either way).
//
// Included by matmul_avx512.cpp and matmul_amx.cpp inside their `#pragma GCC target` regions and anonymous
// namespaces. Requires: <immintrin.h>.

enum class ParamKind : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

inline int ParamBytes(ParamKind k) { return k == ParamKind::kF32 ? 64 : 32; }  // per vector of 16 lanes

// Writes vector v (0: scale, 1: bias or second scale) of a block's parameters at p; LoadParams reads it back.
// The 16-bit kinds are exact because each value came from one: f16 by conversion, bf16 as the f32's top half.
inline void StoreParams(ParamKind k, __m512 f, uint8_t* p, int v) {
  if (k == ParamKind::kF32) {
    _mm512_storeu_ps(reinterpret_cast<float*>(p) + 16 * v, f);
  } else if (k == ParamKind::kF16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 32 * v), _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 32 * v),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(f), 16)));
  }
}

// Vector v (0: scale, 1: bias or second scale) of a block's parameters at p.
template <ParamKind kKind>
inline __attribute__((always_inline)) __m512 LoadParams(const uint8_t* p, int v) {
  if constexpr (kKind == ParamKind::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p) + 16 * v);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * v));
    if constexpr (kKind == ParamKind::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}
