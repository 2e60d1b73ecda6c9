// Elementwise kernels against their scalar twins: the polynomial exp stays within a few ulp of std::exp over
// the range activations take, SiluMul and GeluTanhMul match their twins on ragged lengths, in place too, the
// vectorized add, relu^2 and RMSNorm match plain arithmetic, and SoftCap bends large values only; RoPE rotates each pair by
// its position's angles.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/fast_exp.h"
#include "kernels/ops.h"

namespace parallm {
namespace {

TEST(FastExp, WithinAFewUlpOfStdExp) {
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const float want = std::exp(x);
    EXPECT_NEAR(ExpClamped(x), want, 4e-7f * want) << x;
  }
  EXPECT_EQ(ExpClamped(0.0f), 1.0f);
  EXPECT_GT(ExpClamped(-1000.0f), 0.0f);  // clamped, not underflowed
  EXPECT_TRUE(std::isfinite(ExpClamped(1000.0f)));
}

// The vectorized weighted sum (a mixture-of-experts combine) equals its twin bit for bit on ragged lengths and row
// counts, with rows that alias each other and weights of both signs.
TEST(WeightedRowSum, MatchesTheScalarTwinOnRaggedLengths) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t n : {1, 15, 16, 17, 100, 1024}) {
    for (int n_rows : {1, 2, 8, 9}) {
      std::vector<std::vector<float>> data(static_cast<size_t>(n_rows), std::vector<float>(static_cast<size_t>(n)));
      std::vector<const float*> rows;
      std::vector<float> w;
      for (auto& d : data) {
        for (float& v : d) v = dist(rng);
        rows.push_back(d.data());
        w.push_back(dist(rng));
      }
      if (n_rows > 2) rows[2] = rows[0];  // the same row twice
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
      ref::WeightedRowSum(rows.data(), w.data(), n_rows, n, want.data());
      WeightedRowSum(rows.data(), w.data(), n_rows, n, got.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(std::memcmp(&want[i], &got[i], 4), 0) << "n " << n << " rows " << n_rows << " at " << i;
    }
  }
}

// The vectorized add equals a plain add bit for bit on ragged lengths (blocks of 16 and the tail).
TEST(AddInPlace, EqualsAPlainAddOnRaggedLengths) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t n : {1, 15, 16, 17, 33, 896, 1000}) {
    std::vector<float> x(static_cast<size_t>(n)), y(x.size());
    for (float& v : x) v = dist(rng);
    for (float& v : y) v = dist(rng);
    std::vector<float> got = x;
    AddInPlace(got.data(), y.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = x[i] + y[i];
      ASSERT_EQ(std::memcmp(&want, &got[i], 4), 0) << "n " << n << " at " << i;
    }
  }
}

// relu(x)^2 equals the plain expression bit for bit on ragged lengths, out of place and in place (negative values, zeros
// and NaN give 0).
TEST(ReluSquared, EqualsThePlainExpressionInPlaceToo) {
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t n : {1, 15, 16, 17, 100, 4864}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    x[0] = 0.0f;
    if (n > 2) x[2] = std::nanf("");
    std::vector<float> got(x.size()), in_place = x;
    ReluSquared(x.data(), n, got.data());
    ReluSquared(in_place.data(), n, in_place.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = x[i] > 0.0f ? x[i] * x[i] : 0.0f;
      ASSERT_EQ(std::memcmp(&want, &got[i], 4), 0) << "n " << n << " at " << i;
      ASSERT_EQ(std::memcmp(&want, &in_place[i], 4), 0) << "n " << n << " at " << i;
    }
  }
}

// RMSNorm: each row is x * (1 / sqrt(mean(x^2) + eps)) * w to float rounding, the same bits in place and out of
// place, and the same whether a row is normalized alone or among others (dims around the 16-value blocks).
TEST(RmsNorm, MatchesTheFormulaInPlaceAndRowByRow) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int64_t dim : {7, 16, 33, 64, 896}) {
    constexpr int64_t kRows = 3;
    std::vector<float> x(static_cast<size_t>(kRows * dim)), w(static_cast<size_t>(dim));
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = 1.0f + 0.1f * dist(rng);
    std::vector<float> y(x.size()), in_place = x, alone(static_cast<size_t>(dim));
    RmsNorm(x.data(), w.data(), 1e-6f, kRows, dim, y.data());
    RmsNorm(in_place.data(), w.data(), 1e-6f, kRows, dim, in_place.data());
    ASSERT_EQ(std::memcmp(y.data(), in_place.data(), y.size() * 4), 0) << "dim " << dim;
    for (int64_t r = 0; r < kRows; ++r) {
      RmsNorm(x.data() + r * dim, w.data(), 1e-6f, 1, dim, alone.data());
      ASSERT_EQ(std::memcmp(alone.data(), y.data() + r * dim, alone.size() * 4), 0) << "dim " << dim << " row " << r;
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
      const double scale = 1.0 / std::sqrt(ss / static_cast<double>(dim) + 1e-6);
      for (int64_t i = 0; i < dim; ++i) {
        const double want = x[r * dim + i] * scale * w[i];
        ASSERT_NEAR(y[r * dim + i], want, 4e-7 * std::fabs(want) + 1e-30) << "dim " << dim << " at " << i;
      }
    }
  }
}

TEST(SiluMul, MatchesTheScalarTwinOnRaggedLengths) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> value(-30.0f, 30.0f);
  for (int64_t n : {1, 7, 15, 16, 17, 33, 100, 4864, 4867}) {
    std::vector<float> gate(static_cast<size_t>(n)), up(static_cast<size_t>(n));
    for (auto& g : gate) g = value(rng);
    for (auto& u : up) u = value(rng);
    gate[0] = -100.0f;  // std::exp(100) overflows: silu is -0 there, about -6e-37 here
    std::vector<float> want(gate.size()), got(gate.size()), in_place = gate;
    ref::SiluMul(gate.data(), up.data(), n, want.data());
    SiluMul(gate.data(), up.data(), n, got.data());
    SiluMul(in_place.data(), up.data(), n, in_place.data());
    for (size_t i = 0; i < gate.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-6f * std::abs(want[i]) + 1e-30f) << "n " << n << " i " << i;
      EXPECT_EQ(in_place[i], got[i]) << "n " << n << " i " << i;
    }
  }
}

// Every value is computed the same way wherever it sits: a vectorized block and the scalar tail agree.
TEST(SiluMul, BlockAndTailGiveTheSameBits) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> value(-20.0f, 20.0f);
  std::vector<float> gate(37), up(37);
  for (auto& g : gate) g = value(rng);
  for (auto& u : up) u = value(rng);
  std::vector<float> all(37);
  SiluMul(gate.data(), up.data(), 37, all.data());
  for (int64_t i = 0; i < 37; ++i) {
    float one = 0;
    SiluMul(gate.data() + i, up.data() + i, 1, &one);
    EXPECT_EQ(one, all[static_cast<size_t>(i)]) << i;
  }
}

TEST(GeluTanhMul, MatchesTheTextbookTwinOnRaggedLengths) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-8.0f, 8.0f), scale(-3.0f, 3.0f);
  for (int64_t n : {1, 7, 16, 17, 33, 2304, 2307}) {
    std::vector<float> gate(static_cast<size_t>(n)), up(static_cast<size_t>(n));
    for (auto& g : gate) g = value(rng);
    for (auto& u : up) u = scale(rng);
    std::vector<float> want(gate.size()), got(gate.size()), in_place = gate;
    ref::GeluTanhMul(gate.data(), up.data(), n, want.data());
    GeluTanhMul(gate.data(), up.data(), n, got.data());
    GeluTanhMul(in_place.data(), up.data(), n, in_place.data());
    for (size_t i = 0; i < gate.size(); ++i) {
      // The cubic's rounding moves exp's argument by ~1e-7 relative; at g = -8 the argument is ~50.
      EXPECT_NEAR(got[i], want[i], 3e-5f * std::abs(want[i]) + 1e-30f) << "n " << n << " i " << i;
      EXPECT_EQ(in_place[i], got[i]) << "n " << n << " i " << i;
    }
  }
}

// Known values of PyTorch's gelu(x, approximate="tanh"), and GELU is not SiLU (the trap Gemma's MLP sets).
TEST(GeluTanhMul, KnownValues) {
  const float gate[] = {1.0f, -1.0f, 2.5f, 0.0f, -3.0f};
  const float want[] = {0.8411920f, -0.1588080f, 2.4849157f, 0.0f, -0.0036374f};
  const float up[] = {1, 1, 1, 1, 1};
  float got[5], silu[5];
  GeluTanhMul(gate, up, 5, got);
  SiluMul(gate, up, 5, silu);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(got[i], want[i], 2e-6f) << gate[i];
  EXPECT_GT(std::abs(silu[0] - got[0]), 0.1f);
}

TEST(SoftCap, BendsLargeValuesOnly) {
  float x[] = {0.01f, -0.02f, 100.0f, -100.0f, 30.0f};
  SoftCap(x, 5, 30.0f);
  EXPECT_NEAR(x[0], 0.01f, 1e-7f);
  EXPECT_NEAR(x[1], -0.02f, 1e-7f);
  EXPECT_NEAR(x[2], 30.0f * std::tanh(100.0f / 30.0f), 1e-5f);
  EXPECT_LT(x[2], 30.0f);
  EXPECT_GT(x[3], -30.0f);
  EXPECT_NEAR(x[4], 30.0f * std::tanh(1.0f), 1e-5f);
}

// RoPE: RopeCosSin's angles are cos and sin of position * inv_freq in double, and ApplyRope rotates each pair of every
// q and k head by them (both pair layouts, partial rotary dims, halves that are not a multiple of a vector), leaving
// the dims past rotary_dim alone; against the rotation in double, to a few f32 roundings.
TEST(Rope, RotatesEveryPairByTheAnglesOfItsPosition) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  struct Case {
    int head_dim, rotary_dim;
  };
  for (const Case c : {Case{64, 64}, Case{128, 128}, Case{96, 40}, Case{80, 80}, Case{96, 96}}) {
    for (RopeStyle style : {RopeStyle::kHalf, RopeStyle::kInterleaved}) {
      const int half = c.rotary_dim / 2, n_q = 3, n_k = 2;
      std::vector<float> inv_freq(static_cast<size_t>(half));
      RopeInvFreqs(c.rotary_dim, 10000.0f, nullptr, inv_freq.data());
      const int64_t position = 70001;
      std::vector<float> cs(static_cast<size_t>(c.rotary_dim));
      RopeCosSin(c.rotary_dim, position, inv_freq.data(), cs.data());
      for (int i = 0; i < half; ++i) {
        const double angle = static_cast<double>(position) * inv_freq[static_cast<size_t>(i)];
        ASSERT_EQ(cs[static_cast<size_t>(i)], static_cast<float>(std::cos(angle)));
        ASSERT_EQ(cs[static_cast<size_t>(half + i)], static_cast<float>(std::sin(angle)));
      }
      std::vector<float> q(static_cast<size_t>(n_q * c.head_dim)), k(static_cast<size_t>(n_k * c.head_dim));
      for (float& v : q) v = dist(rng);
      for (float& v : k) v = dist(rng);
      const std::vector<float> q0 = q, k0 = k;
      ApplyRope(q.data(), n_q, k.data(), n_k, c.head_dim, c.rotary_dim, cs.data(), style);
      auto check = [&](const std::vector<float>& before, const std::vector<float>& after, int n_heads) {
        for (int h = 0; h < n_heads; ++h) {
          const float* x = before.data() + h * c.head_dim;
          const float* y = after.data() + h * c.head_dim;
          for (int i = 0; i < half; ++i) {
            const int a = style == RopeStyle::kHalf ? i : 2 * i, b = style == RopeStyle::kHalf ? i + half : 2 * i + 1;
            const double cd = cs[static_cast<size_t>(i)], sd = cs[static_cast<size_t>(half + i)];
            const double tol = 4e-7 * (std::fabs(x[a]) + std::fabs(x[b]));
            EXPECT_NEAR(y[a], x[a] * cd - x[b] * sd, tol) << c.head_dim << " head " << h << " pair " << i;
            EXPECT_NEAR(y[b], x[a] * sd + x[b] * cd, tol) << c.head_dim << " head " << h << " pair " << i;
          }
          for (int d = c.rotary_dim; d < c.head_dim; ++d) EXPECT_EQ(y[d], x[d]);
        }
      };
      check(q0, q, n_q);
      check(k0, k, n_k);
      // Head by head, alone, the same bits: the pairs' blocks and tail do not depend on the head count.
      for (int h = 0; h < n_q; ++h) {
        std::vector<float> one(q0.begin() + h * c.head_dim, q0.begin() + (h + 1) * c.head_dim);
        ApplyRope(one.data(), 1, nullptr, 0, c.head_dim, c.rotary_dim, cs.data(), style);
        ASSERT_EQ(std::memcmp(one.data(), q.data() + h * c.head_dim, one.size() * 4), 0) << c.head_dim << " head " << h;
      }
    }
  }
}

}  // namespace
}  // namespace parallm
