// The chunked SSD scan (kernels/ssm_chunked.h) against its scalar twin and against the token-by-token scan (the same
// function up to rounding), on shapes with edges in every blocked product (chunks of 1 to 8 tokens, head_dim and
// state not multiples of the 4x16 register block, 1 and 2 groups), and the property the mixer relies on: a chunk's
// bits do not depend on how many chunks or which heads are computed in the same call.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ssm.h"
#include "kernels/ssm_chunked.h"

#include "uniform.h"

namespace parallm {
namespace {

TEST(SsmChunkedScan, MatchesItsTwinAndTheScanAndIsBitStableAcrossCallShapes) {
  std::mt19937 rng(23);
  for (int groups : {1, 2}) {
    for (int head_dim : {3, 17}) {
      for (int state : {7, 19}) {
        for (int chunk : {1, 4, 8}) {
          SsmScanShape sh{4, head_dim, state, groups, 0.01f};
          const int64_t I = sh.heads * sh.head_dim, G = groups * state, stride = I + 2 * G + 3;
          const int64_t dt_stride = sh.heads + 2, n = 3 * chunk;
          auto xbc = Uniform(rng, static_cast<size_t>(n * stride), -2, 2);
          auto dt = Uniform(rng, static_cast<size_t>(n * dt_stride), -6, 1);
          auto dt_bias = Uniform(rng, static_cast<size_t>(sh.heads), -1, 0.5f);
          auto A = Uniform(rng, static_cast<size_t>(sh.heads), -4, -0.5f);
          auto D = Uniform(rng, static_cast<size_t>(sh.heads), 0.5f, 1.5f);
          auto s0 = Uniform(rng, static_cast<size_t>(I * state), -1, 1);
          const float *x = xbc.data(), *B = x + I, *C = B + G;
          std::vector<float> s_ref = s0, s_fast = s0, s_scan = s0, s_split = s0;
          std::vector<float> want(static_cast<size_t>(n * I)), got(want.size()), scan(want.size()), split(want.size());
          ref::SsmChunkedScan(sh, 0, sh.heads, chunk, x, B, C, stride, dt.data(), dt_stride, n, dt_bias.data(),
                              A.data(), D.data(), s_ref.data(), want.data(), I);
          SsmChunkedScan(sh, 0, sh.heads, chunk, x, B, C, stride, dt.data(), dt_stride, n, dt_bias.data(), A.data(),
                         D.data(), s_fast.data(), got.data(), I);
          SsmScan(sh, 0, sh.heads, x, B, C, stride, dt.data(), dt_stride, n, dt_bias.data(), A.data(), D.data(),
                  s_scan.data(), scan.data(), I);
          // One chunk per call, one head per call.
          for (int64_t at = 0; at < n; at += chunk)
            for (int h = 0; h < sh.heads; ++h)
              SsmChunkedScan(sh, h, h + 1, chunk, x + at * stride, B + at * stride, C + at * stride, stride,
                             dt.data() + at * dt_stride, dt_stride, chunk, dt_bias.data(), A.data(), D.data(),
                             s_split.data(), split.data() + at * I, I);
          const std::string where = "groups " + std::to_string(groups) + " head_dim " + std::to_string(head_dim) +
                                    " state " + std::to_string(state) + " chunk " + std::to_string(chunk);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], 2e-5f * (1 + std::abs(want[i]))) << where << " y " << i;
            ASSERT_NEAR(got[i], scan[i], 1e-4f * (1 + std::abs(scan[i]))) << where << " y " << i;
            ASSERT_EQ(split[i], got[i]) << where << " y " << i;
          }
          for (size_t i = 0; i < s_ref.size(); ++i) {
            ASSERT_NEAR(s_fast[i], s_ref[i], 2e-5f * (1 + std::abs(s_ref[i]))) << where << " state " << i;
            ASSERT_NEAR(s_fast[i], s_scan[i], 1e-4f * (1 + std::abs(s_scan[i]))) << where << " state " << i;
            ASSERT_EQ(s_split[i], s_fast[i]) << where << " state " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace parallm
