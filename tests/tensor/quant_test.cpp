// GGML block formats: hand-built blocks with known decodes (layouts as ggml-quants.c defines them), and
// quantize -> dequantize round trips within each format's error bound.
#include "tensor/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/fp16.h"

namespace parallm {
namespace {

std::vector<float> Gaussian(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> RoundTrip(DType t, const std::vector<float>& x) {
  int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> buf(RowBytes(t, n));
  QuantizeRow(t, x.data(), buf.data(), n);
  std::vector<float> y(x.size());
  DequantizeRow(t, buf.data(), y.data(), n);
  return y;
}

TEST(QuantTest, WritableTypes) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K})
    EXPECT_TRUE(IsWritableType(t)) << Name(t);
  for (DType t : {DType::kF64, DType::kI8, DType::kU32, DType::kI32}) EXPECT_FALSE(IsWritableType(t)) << Name(t);
}

TEST(QuantTest, Q8_0KnownBlock) {
  BlockQ8_0 b;
  b.d = F32ToF16(0.5f);
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i * 8 - 127 + (i == 31 ? 6 : 0));
  float y[32];
  DequantizeRow(DType::kQ8_0, &b, y, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.5f * b.qs[i]) << i;
  // Quantizing values that are exact multiples of amax/127 reproduces them.
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16) * 0.25f;  // amax 4 -> d = 4/127
  BlockQ8_0 q;
  QuantizeRow(DType::kQ8_0, x, &q, 32);
  EXPECT_EQ(q.d, F32ToF16(4.0f / 127.0f));
  EXPECT_EQ(q.qs[0], -127);
  EXPECT_EQ(q.qs[16], 0);
  EXPECT_EQ(q.qs[24], static_cast<int8_t>(std::lround(2.0f / (4.0f / 127.0f))));
}

TEST(QuantTest, Q4_0LayoutLowNibblesAreFirstHalf) {
  BlockQ4_0 b;
  b.d = F32ToF16(2.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  DequantizeRow(DType::kQ4_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 2.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 2.0f) << j;
  }
  // ggml's rule: the value of largest magnitude maps to code 0, d = max / -8.
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16);  // max magnitude -16 -> d = 2
  BlockQ4_0 q;
  QuantizeRow(DType::kQ4_0, x, &q, 32);
  EXPECT_EQ(F16ToF32(q.d), 2.0f);
  EXPECT_EQ(q.qs[0] & 15, 0);             // x[0] = -16 -> code 0
  EXPECT_EQ(q.qs[0] >> 4, 8);             // x[16] = 0 -> code 8
  EXPECT_EQ(q.qs[15] >> 4, 15);           // x[31] = 15 -> 15.5 + 8 clamps to 15
  EXPECT_EQ(q.qs[4] & 15, 2);             // x[4] = -12 -> -6 + 8.5 -> 2
}

TEST(QuantTest, Q4_KKnownBlock) {
  BlockQ4_K b;
  std::memset(&b, 0, sizeof(b));
  b.d = F32ToF16(0.5f);
  b.dmin = F32ToF16(0.25f);
  // Sub-blocks 0-3: scale j+1, min 10+j in the low 6 bits of bytes j and j+4.
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(j + 1);
    b.scales[j + 4] = static_cast<uint8_t>(10 + j);
  }
  // Sub-block 4: scale 53 (0b110101), min 42 (0b101010): low nibbles in byte 8, top bits in bytes 0 and 4.
  b.scales[8] = 0xA5;
  b.scales[0] |= 0xC0;
  b.scales[4] |= 0x80;
  // Sub-blocks 5-7: scale 1, min 0.
  for (int j = 5; j < 8; ++j) b.scales[j + 4] = 0x01;
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  std::vector<float> y(256);
  DequantizeRow(DType::kQ4_K, &b, y.data(), 256);
  const int sc[8] = {1, 2, 3, 4, 53, 1, 1, 1}, mn[8] = {10, 11, 12, 13, 42, 0, 0, 0};
  for (int v = 0; v < 256; ++v) {
    int j = v / 32, chunk = v / 64, l = v % 32;
    uint8_t byte = b.qs[chunk * 32 + l];
    int q = (j % 2 == 0) ? (byte & 15) : (byte >> 4);
    EXPECT_EQ(y[v], 0.5f * sc[j] * q - 0.25f * mn[j]) << v;
  }
  EXPECT_EQ(y[0], 0.5f * 1 * 0 - 0.25f * 10);
  EXPECT_EQ(y[32], 0.5f * 2 * 15 - 0.25f * 11);
  EXPECT_EQ(y[128 + 1], 0.5f * 53 * 1 - 0.25f * 42);
}

TEST(QuantTest, Q6_KKnownBlock) {
  BlockQ6_K b;
  std::memset(&b, 0, sizeof(b));
  b.d = F32ToF16(0.125f);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j - 8);
  // Every code 0 (value -32 * scale) except: value 70 = second 64..95 quarter of the first half, l = 6:
  // low 4 bits from ql[6] high nibble, high 2 bits from qh[6] bits 4-5 -> 0xA | (3 << 4) = 58.
  b.ql[6] = 0xA0;
  b.qh[6] = 0x30;
  // Value 128 + 32 + 1 = 161: ql[64 + 33] low nibble, qh[32 + 1] bits 2-3 -> 0x5 | (2 << 4) = 37.
  b.ql[64 + 33] = 0x05;
  b.qh[32 + 1] = 0x08;
  std::vector<float> y(256);
  DequantizeRow(DType::kQ6_K, &b, y.data(), 256);
  for (int v = 0; v < 256; ++v) {
    int code = v == 70 ? 58 : v == 161 ? 37 : 0;
    EXPECT_EQ(y[v], 0.125f * static_cast<float>(v / 16 - 8) * static_cast<float>(code - 32)) << v;
  }
}

TEST(QuantTest, FloatRoundTrips) {
  std::vector<float> x = {0.0f, 1.0f, -2.5f, 65504.0f, 1e-3f, 3.14159265f, -0.0f, 1e30f};
  x.resize(32, 0.75f);
  EXPECT_EQ(RoundTrip(DType::kF32, x), x);
  std::vector<float> h = RoundTrip(DType::kF16, x), bf = RoundTrip(DType::kBF16, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], F16ToF32(F32ToF16(x[i])));
    EXPECT_EQ(bf[i], BF16ToF32(F32ToBF16(x[i])));
  }
  EXPECT_EQ(h[1], 1.0f);
  EXPECT_EQ(h[2], -2.5f);
  EXPECT_TRUE(std::isinf(h[7]));
  EXPECT_NEAR(bf[5], 3.14159265f, 3.14159265f / 128);
}

TEST(QuantTest, Q8_0RoundTripWithinHalfStep) {
  auto x = Gaussian(32 * 64, 1);
  auto y = RoundTrip(DType::kQ8_0, x);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    // Half a step, plus the f16 rounding of d (2^-11 relative) times the largest code.
    float bound = 0.5f * amax / 127 + amax * 1.0f / 2048 + 1e-7f;
    for (int i = 0; i < 32; ++i) ASSERT_LE(std::fabs(x[b * 32 + i] - y[b * 32 + i]), bound) << b << " " << i;
  }
}

TEST(QuantTest, Q4_0RoundTripWithinOneStep) {
  auto x = Gaussian(32 * 64, 2);
  auto y = RoundTrip(DType::kQ4_0, x);
  double se = 0;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    // Steps of amax / 8; codes round to nearest except the top one, clamped 15 instead of 16 (one step).
    float bound = amax / 8 * 1.01f + 1e-6f;  // + f16 rounding of d, 8 codes * 2^-11
    for (int i = 0; i < 32; ++i) {
      float e = std::fabs(x[b * 32 + i] - y[b * 32 + i]);
      ASSERT_LE(e, bound) << b << " " << i;
      se += e * e;
    }
  }
  EXPECT_LT(std::sqrt(se / x.size()), 0.11);  // ~ step / sqrt(12) for unit Gaussian data
}

TEST(QuantTest, Q4_KRoundTripWithinHalfSubBlockStep) {
  auto x = Gaussian(256 * 16, 3);
  x[5] = 7.0f;  // an outlier sub-block
  for (int i = 512; i < 544; ++i) x[i] = 3.0f + 0.01f * i;  // an all-positive sub-block (min clamps to 0)
  auto y = RoundTrip(DType::kQ4_K, x);
  double se = 0;
  for (size_t sb = 0; sb < x.size() / 256; ++sb) {
    float step[8], max_step = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float* xb = &x[sb * 256 + j * 32];
      float lo = 0, hi = xb[0];
      for (int l = 0; l < 32; ++l) lo = std::min(lo, xb[l]), hi = std::max(hi, xb[l]);
      step[j] = (hi - lo) / 15;
      max_step = std::max(max_step, step[j]);
      max_min = std::max(max_min, -lo);
    }
    for (int j = 0; j < 8; ++j) {
      // Half the 6-bit-rounded sub-block step (at most step + d) plus half the 6-bit min granularity.
      float bound = 0.5f * (step[j] + max_step / 63) + 0.5f * max_min / 63 + 1e-3f * max_step;
      for (int l = 0; l < 32; ++l) {
        size_t i = sb * 256 + j * 32 + l;
        float e = std::fabs(x[i] - y[i]);
        ASSERT_LE(e, bound) << sb << " " << j << " " << l;
        se += e * e;
      }
    }
  }
  EXPECT_LT(std::sqrt(se / x.size()), 0.12);
}

TEST(QuantTest, Q6_KRoundTripWithinBound) {
  auto x = Gaussian(256 * 16, 4);
  x[17] = -9.0f;
  auto y = RoundTrip(DType::kQ6_K, x);
  double se = 0;
  for (size_t sb = 0; sb < x.size() / 256; ++sb) {
    float scale[16], max_scale = 0;
    for (int j = 0; j < 16; ++j) {
      float amax = 0;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[sb * 256 + j * 16 + l]));
      scale[j] = amax / 32;
      max_scale = std::max(max_scale, scale[j]);
    }
    float d = max_scale / 127;
    for (int j = 0; j < 16; ++j) {
      // One step of the int8-rounded scale: a value of the opposite sign to the extreme one and almost its
      // magnitude lands on +32 and clamps to 31; the extreme code itself can clamp by 32 * (d / 2).
      float bound = (scale[j] + d) + 16.5f * d;
      for (int l = 0; l < 16; ++l) {
        size_t i = sb * 256 + j * 16 + l;
        float e = std::fabs(x[i] - y[i]);
        ASSERT_LE(e, bound) << sb << " " << j << " " << l;
        se += e * e;
      }
    }
  }
  EXPECT_LT(std::sqrt(se / x.size()), 0.03);
}

TEST(QuantTest, ZerosStayZero) {
  std::vector<float> z(256, 0.0f);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    auto y = RoundTrip(t, z);
    for (float v : y) ASSERT_EQ(v, 0.0f) << Name(t);
  }
}

}  // namespace
}  // namespace parallm
