// Two vectors of 16 f32 as one row of an AMX-BF16 B operand, the layout both bf16 tile kernels build their right
// operands in (a weight panel's column pair, a key pair of attention's values).
//
// Included by matmul_amx_bf16.cpp and attention_amx_bf16.cpp inside their `#pragma GCC target` regions (AVX-512 BF16)
// and anonymous namespaces. Requires: <immintrin.h>.

// lo and hi (16 f32 each: column c and c + 1 of 16 rows) as one tile row: lane r holds row r's pair, lo in the low
// half. bf16 by VCVTNE2PS2BF16 (nearest even; denormals flushed), as ToBf16 does, then interleaved.
inline __m512i Bf16Pair(__m512 lo, __m512 hi) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                       5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}
