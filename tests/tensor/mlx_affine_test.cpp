// MLX affine quantization: the packing against MLX's own byte-group formulas (its dequantize kernels),
// the quantize rule on a hand-computed group, and round trips for every bits / group / scale type.
#include "tensor/mlx_affine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/fp16.h"

namespace parallm {
namespace {

// Code i of a row as MLX's dequantizers read it: for 2/4/8 bits, 32/bits codes per little-endian uint32
// (code k of a word in bits [k*bits, ...)); for 3/5 bits 8 codes per 3/5 bytes and for 6 bits 4 codes per
// 3 bytes, written out byte by byte as in mlx/backend/*/quantized (affine_dequantize).
uint32_t MlxReference(const uint32_t* words, int bits, int64_t i) {
  const auto* b = reinterpret_cast<const uint8_t*>(words);
  if (bits == 2 || bits == 4 || bits == 8) {
    int per_word = 32 / bits;
    return (words[i / per_word] >> (bits * (i % per_word))) & ((1u << bits) - 1);
  }
  if (bits == 3) {
    const uint8_t* w = b + (i / 8) * 3;
    switch (i % 8) {
      case 0: return w[0] & 0x7;
      case 1: return (w[0] & 0x38) >> 3;
      case 2: return ((w[0] & 0xc0) >> 6) + ((w[1] & 0x1) << 2);
      case 3: return (w[1] & 0xe) >> 1;
      case 4: return (w[1] & 0x70) >> 4;
      case 5: return ((w[1] & 0x80) >> 7) + ((w[2] & 0x3) << 1);
      case 6: return (w[2] & 0x1c) >> 2;
      default: return (w[2] & 0xe0) >> 5;
    }
  }
  if (bits == 5) {
    const uint8_t* w = b + (i / 8) * 5;
    switch (i % 8) {
      case 0: return w[0] & 0x1f;
      case 1: return ((w[0] & 0xe0) >> 5) + ((w[1] & 0x3) << 3);
      case 2: return (w[1] & 0x7c) >> 2;
      case 3: return ((w[1] & 0x80) >> 7) + ((w[2] & 0xf) << 1);
      case 4: return ((w[2] & 0xf0) >> 4) + ((w[3] & 0x1) << 4);
      case 5: return (w[3] & 0x3e) >> 1;
      case 6: return ((w[3] & 0xc0) >> 6) + ((w[4] & 0x7) << 2);
      default: return (w[4] & 0xf8) >> 3;
    }
  }
  const uint8_t* w = b + (i / 4) * 3;  // 6 bits
  switch (i % 4) {
    case 0: return w[0] & 0x3f;
    case 1: return ((w[0] >> 6) & 0x03) + ((w[1] & 0x0f) << 2);
    case 2: return ((w[1] >> 4) & 0x0f) + ((w[2] & 0x03) << 4);
    default: return (w[2] >> 2) & 0x3f;
  }
}

TEST(MlxAffineTest, Supported) {
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int g : {32, 64, 128}) EXPECT_TRUE(IsSupportedMlxAffine({bits, g}));
  EXPECT_FALSE(IsSupportedMlxAffine({1, 64}));
  EXPECT_FALSE(IsSupportedMlxAffine({7, 64}));
  EXPECT_FALSE(IsSupportedMlxAffine({4, 16}));
  EXPECT_FALSE(IsSupportedMlxAffine({4, 256}));
}

TEST(MlxAffineTest, CodeLayoutMatchesMlxByteGroups) {
  std::mt19937 rng(7);
  std::vector<uint32_t> words(3 * 5 * 8);  // 480 bytes: whole packs of every width
  for (auto& w : words) w = rng();
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    int64_t n = static_cast<int64_t>(words.size()) * 32 / bits;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(MlxCode(words.data(), bits, i), MlxReference(words.data(), bits, i)) << bits << " " << i;
  }
}

TEST(MlxAffineTest, PackingWritesMlxLayout) {
  // Codes chosen directly: quantize values that sit exactly on the grid of a known scale and bias.
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    const int n = 128, levels = 1 << bits;
    std::vector<float> x(n);
    // Each group of 32 spans codes 0 .. levels-1 (min -> code 0) so scale = 1/4, bias = min = -levels/8.
    for (int i = 0; i < n; ++i) x[i] = static_cast<float>((i * 7) % levels) * 0.25f - levels / 8.0f;
    for (int g = 0; g < n / 32; ++g) {
      x[g * 32] = -levels / 8.0f;
      x[g * 32 + 1] = (levels - 1) * 0.25f - levels / 8.0f;
    }
    std::vector<uint32_t> codes(n * bits / 32);
    std::vector<float> scales(n / 32), biases(n / 32);
    MlxQuantizeRow({bits, 32}, x.data(), n, DType::kF32, codes.data(), scales.data(), biases.data());
    std::vector<float> y(n);
    MlxDequantizeRow({bits, 32}, codes.data(), scales.data(), biases.data(), DType::kF32, y.data(), n);
    for (int i = 0; i < n; ++i) {
      // Decode with the reference byte layout too: both must give back the grid values.
      float v = scales[i / 32] * static_cast<float>(MlxReference(codes.data(), bits, i)) + biases[i / 32];
      ASSERT_NEAR(v, x[i], 1e-5f) << bits << " " << i;
      ASSERT_NEAR(y[i], x[i], 1e-5f) << bits << " " << i;
    }
  }
}

TEST(MlxAffineTest, QuantizeRuleOnKnownGroup) {
  // min -1, max 0.5, 4 bits: |min| > |max| so the min is the exact edge: scale = 1.5 / 15 = 0.1,
  // q0 = round(-1 / 0.1) = -10, scale = -1 / -10, bias = -1.
  std::vector<float> x(32, 0.0f);
  x[0] = -1.0f;
  x[1] = 0.5f;
  x[2] = 0.26f;  // (0.26 + 1) / 0.1 = 12.6 -> 13
  std::vector<uint32_t> codes(4);
  float scale, bias;
  MlxQuantizeRow({4, 32}, x.data(), 32, DType::kF32, codes.data(), &scale, &bias);
  EXPECT_FLOAT_EQ(scale, -1.0f / -10.0f);
  EXPECT_EQ(bias, -1.0f);
  EXPECT_EQ(MlxCode(codes.data(), 4, 0), 0u);
  EXPECT_EQ(MlxCode(codes.data(), 4, 1), 15u);
  EXPECT_EQ(MlxCode(codes.data(), 4, 2), 13u);
  EXPECT_EQ(MlxCode(codes.data(), 4, 3), 10u);  // zero is on the grid

  // max of larger magnitude: negative scale, bias = max; codes count down from it.
  std::vector<float> z(32, 0.0f);
  z[0] = 2.0f;
  z[1] = -1.0f;
  MlxQuantizeRow({4, 32}, z.data(), 32, DType::kF32, codes.data(), &scale, &bias);
  EXPECT_LT(scale, 0.0f);
  EXPECT_EQ(bias, 2.0f);
  EXPECT_EQ(MlxCode(codes.data(), 4, 0), 0u);

  // A constant-zero group: scale 1e-7 (negated), bias 0, codes 0.
  std::vector<float> zero(32, 0.0f);
  MlxQuantizeRow({4, 32}, zero.data(), 32, DType::kF32, codes.data(), &scale, &bias);
  EXPECT_EQ(bias, 0.0f);
  EXPECT_FLOAT_EQ(scale, -1e-7f);
}

TEST(MlxAffineTest, RoundTripWithinOneStep) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t cols = 256;
  std::vector<float> x(cols);
  for (float& v : x) v = dist(rng);
  for (DType st : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int bits : {2, 3, 4, 5, 6, 8}) {
      for (int g : {32, 64, 128}) {
        MlxAffineParams p{bits, g};
        size_t sb = Info(st).block_bytes;
        std::vector<uint32_t> codes(cols * bits / 32 + 1, 0xdeadbeef);  // + a guard word
        std::vector<uint8_t> scales(cols / g * sb), biases(cols / g * sb);
        MlxQuantizeRow(p, x.data(), cols, st, codes.data(), scales.data(), biases.data());
        EXPECT_EQ(codes.back(), 0xdeadbeef);
        std::vector<float> y(cols);
        MlxDequantizeRow(p, codes.data(), scales.data(), biases.data(), st, y.data(), cols);
        for (int64_t grp = 0; grp < cols / g; ++grp) {
          float lo = x[grp * g], hi = x[grp * g];
          for (int i = 0; i < g; ++i) lo = std::min(lo, x[grp * g + i]), hi = std::max(hi, x[grp * g + i]);
          float step = (hi - lo) / ((1 << bits) - 1);
          // Making the edge exact rescales the step by q0 / (edge / step), |q0| >= levels / 2, so the far end
          // can fall short of the range by up to one step and clamp: one step, plus the scale type's rounding
          // of scale (times the largest code) and bias.
          float rel = st == DType::kF32 ? 1e-6f : st == DType::kF16 ? 1.0f / 2048 : 1.0f / 256;
          float bound = step * 1.0001f + rel * (step * ((1 << bits) - 1) + std::max(std::fabs(lo), std::fabs(hi))) + 1e-6f;
          for (int i = 0; i < g; ++i)
            ASSERT_LE(std::fabs(y[grp * g + i] - x[grp * g + i]), bound)
                << Name(st) << " bits " << bits << " g " << g << " i " << grp * g + i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace parallm
