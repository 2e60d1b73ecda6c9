// Conversions between f32 and the 16-bit float formats (IEEE half, bfloat16), round-to-nearest-even.
#pragma once

#include <cstdint>
#include <cstring>

namespace parallm {

inline float F32FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t BitsFromF32(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

inline float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return F32FromBits(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return F32FromBits(sign);
    // Subnormal half: value = mant * 2^-24.
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return F32FromBits(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t F32ToF16(float f) {
  uint32_t x = BitsFromF32(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): round abs * 2^24 to an integer, nearest-even.
    float v = F32FromBits(abs) * 16777216.0f;
    uint32_t m = static_cast<uint32_t>(v);
    float frac = v - static_cast<float>(m);
    if (frac > 0.5f || (frac == 0.5f && (m & 1))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = abs & 0x7fffff;
  uint32_t exp = (abs >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // may carry into the exponent, which is correct
  return static_cast<uint16_t>(sign | h);
}

inline float BF16ToF32(uint16_t b) { return F32FromBits(static_cast<uint32_t>(b) << 16); }

inline uint16_t F32ToBF16(float f) {
  uint32_t x = BitsFromF32(f);
  if ((x & 0x7fffffff) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace parallm
