// The Mamba-2 kernels (kernels/ssm.h) against their scalar twins on ragged shapes (state sizes that are not multiples
// of the 8 partial sums, odd channel counts, 1 and 2 groups, conv widths 1 to 4), against a hand-computed step (the
// chunked form of kernels/ssm_chunked.h too), and the property the engine relies on: a sequence run in chunks
// (prefill chunks, then one token at a time) gives the same bits as the same sequence run whole, state and outputs
// alike.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ssm.h"
#include "kernels/ssm_chunked.h"

#include "uniform.h"

namespace parallm {
namespace {

TEST(SsmConv1d, MatchesTheScalarTwinAndCarriesItsWindow) {
  std::mt19937 rng(11);
  for (int kernel : {1, 2, 4}) {
    for (int channels : {1, 7, 33, 96}) {
      const int64_t n = 13, stride = channels + 5;  // rows further apart than their width, as in the in-projection
      auto x = Uniform(rng, static_cast<size_t>(n * stride), -2, 2);
      auto w = Uniform(rng, static_cast<size_t>(channels * kernel), -1, 1);
      auto bias = Uniform(rng, static_cast<size_t>(channels), -0.5f, 0.5f);
      auto state0 = Uniform(rng, static_cast<size_t>((kernel - 1) * channels), -1, 1);
      std::vector<float> s_ref = state0, s_fast = state0, s_chunked = state0;
      std::vector<float> want(static_cast<size_t>(n * channels)), got(want.size()), chunked(want.size());
      ref::SsmConv1d(x.data(), stride, n, channels, kernel, w.data(), bias.data(), s_ref.data(), want.data(), channels);
      SsmConv1d(x.data(), stride, n, channels, kernel, w.data(), bias.data(), s_fast.data(), got.data(), channels);
      for (int64_t at : {0, 5, 6, 12}) {  // chunks of 5, 1, 6, 1 tokens
        const int64_t len = (at == 0 ? 5 : at == 5 ? 1 : at == 6 ? 6 : 1);
        SsmConv1d(x.data() + at * stride, stride, len, channels, kernel, w.data(), bias.data(), s_chunked.data(),
                  chunked.data() + at * channels, channels);
      }
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-5f * (1 + std::abs(want[i]))) << "kernel " << kernel << " ch " << channels;
        ASSERT_EQ(chunked[i], got[i]) << "kernel " << kernel << " ch " << channels << " i " << i;
      }
      for (size_t i = 0; i < s_ref.size(); ++i) {
        ASSERT_EQ(s_fast[i], s_ref[i]);  // the window holds inputs: copied, not computed
        ASSERT_EQ(s_chunked[i], s_ref[i]);
      }
    }
  }
}

TEST(SsmConv1d, HandComputed) {
  // Two channels, kernel 3, window [1, 2] then input 3 (channel 0) and [0, 0] then 1 (channel 1), no bias.
  const float w[] = {1, 10, 100, 2, 3, 4};  // channel 0: taps 1, 10, 100; channel 1: 2, 3, 4
  float state[] = {1, 0, 2, 0};             // [kernel - 1 = 2, channels = 2], oldest first
  const float x[] = {3, 1};
  float out[2];
  SsmConv1d(x, 2, 1, 2, 3, w, nullptr, state, out, 2);
  const float v0 = 1 * 1 + 10 * 2 + 100 * 3, v1 = 4 * 1;
  EXPECT_FLOAT_EQ(out[0], v0 / (1 + std::exp(-v0)));
  EXPECT_FLOAT_EQ(out[1], v1 / (1 + std::exp(-v1)));
  EXPECT_EQ(state[0], 2);  // window slid: [2, 3] and [0, 1]
  EXPECT_EQ(state[2], 3);
  EXPECT_EQ(state[3], 1);
}

TEST(SsmScan, MatchesTheScalarTwinAndChunkingDoesNotChangeABit) {
  std::mt19937 rng(5);
  for (int groups : {1, 2}) {
    for (int state : {1, 7, 16, 19}) {
      SsmScanShape sh{4, 3, state, groups, 0.01f};
      const int64_t I = sh.heads * sh.head_dim, G = groups * state, stride = I + 2 * G + 3, dt_stride = sh.heads + 2;
      const int64_t n = 11;
      auto xbc = Uniform(rng, static_cast<size_t>(n * stride), -2, 2);
      auto dt = Uniform(rng, static_cast<size_t>(n * dt_stride), -6, 2);  // softplus from ~0.0025 (clamped) to ~2.1
      auto dt_bias = Uniform(rng, static_cast<size_t>(sh.heads), -1, 0.5f);
      auto A = Uniform(rng, static_cast<size_t>(sh.heads), -8, -0.5f);
      auto D = Uniform(rng, static_cast<size_t>(sh.heads), 0.5f, 1.5f);
      auto s0 = Uniform(rng, static_cast<size_t>(I * state), -1, 1);
      std::vector<float> s_ref = s0, s_fast = s0, s_chunked = s0;
      std::vector<float> want(static_cast<size_t>(n * I)), got(want.size()), chunked(want.size());
      const float *x = xbc.data(), *B = x + I, *C = B + G;
      ref::SsmScan(sh, 0, sh.heads, x, B, C, stride, dt.data(), dt_stride, n, dt_bias.data(), A.data(), D.data(),
                   s_ref.data(), want.data(), I);
      SsmScan(sh, 0, sh.heads, x, B, C, stride, dt.data(), dt_stride, n, dt_bias.data(), A.data(), D.data(),
              s_fast.data(), got.data(), I);
      // Chunks of 4, 4, 1, 1, 1 tokens, one head at a time (as the mixer's tasks split it).
      for (int64_t at = 0; at < n;) {
        const int64_t len = at < 8 ? 4 : 1;
        for (int h = 0; h < sh.heads; ++h)
          SsmScan(sh, h, h + 1, x + at * stride, B + at * stride, C + at * stride, stride, dt.data() + at * dt_stride,
                  dt_stride, len, dt_bias.data(), A.data(), D.data(), s_chunked.data(), chunked.data() + at * I, I);
        at += len;
      }
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 2e-5f * (1 + std::abs(want[i]))) << "groups " << groups << " state " << state;
        ASSERT_EQ(chunked[i], got[i]) << "groups " << groups << " state " << state << " i " << i;
      }
      for (size_t i = 0; i < s_ref.size(); ++i) {
        ASSERT_NEAR(s_fast[i], s_ref[i], 2e-5f * (1 + std::abs(s_ref[i])));
        ASSERT_EQ(s_chunked[i], s_fast[i]);
      }
    }
  }
}

TEST(SsmScan, HandComputedOneStepInBothForms) {
  // One head, head_dim 1, state 2: dt = softplus(0) = ln 2; S = S0 * exp(dt A) + dt x B; y = S . C + D x. The
  // chunked form with a chunk of 1 token (its decay mask L empty) reduces to the same step.
  SsmScanShape sh{1, 1, 2, 1, 0.0f};
  const float xbc[] = {2.0f, 1.0f, -1.0f, 0.5f, 3.0f};  // x, B[2], C[2]
  const float dt_raw = 0.0f, dt_bias = 0.0f, A = -1.0f, D = 0.25f;
  const double dt = std::log(2.0), dA = std::exp(-dt);
  const double s0 = 1 * dA + dt * 2 * 1, s1 = 2 * dA + dt * 2 * -1;
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "SsmChunkedScan" : "SsmScan");
    float s[] = {1.0f, 2.0f};
    float y;
    if (chunked)
      SsmChunkedScan(sh, 0, 1, 1, xbc, xbc + 1, xbc + 3, 5, &dt_raw, 1, 1, &dt_bias, &A, &D, s, &y, 1);
    else
      SsmScan(sh, 0, 1, xbc, xbc + 1, xbc + 3, 5, &dt_raw, 1, 1, &dt_bias, &A, &D, s, &y, 1);
    EXPECT_NEAR(s[0], s0, 1e-6);
    EXPECT_NEAR(s[1], s1, 1e-6);
    EXPECT_NEAR(y, s0 * 0.5 + s1 * 3 + 0.25 * 2, 1e-5);
  }
}

}  // namespace
}  // namespace parallm
