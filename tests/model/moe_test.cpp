// Expert routing and grouping (model/moe.h): exact expert choices, weights, tie-breaking and the grouped order
// of assignments, on hand-made router logits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/moe.h"

namespace parallm {
namespace {

TEST(MoeRouting, TopKByProbabilityAndGroupedByExpert) {
  // 3 tokens, 4 experts, top-2.
  const std::vector<float> logits = {
      0.0f, 2.0f, 1.0f, -1.0f,  // token 0: experts 1, 2
      3.0f, 0.0f, 0.0f, 2.5f,   // token 1: experts 0, 3
      0.5f, 0.1f, 4.0f, 0.0f,   // token 2: experts 2, 0
  };
  ExpertRouting r;
  RouteTokens(logits.data(), 3, 4, 2, /*renormalize=*/false, &r);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{1, 2, 0, 3, 2, 0}));
  // Weights are the softmax over all four experts (not renormalised).
  const double z0 = std::exp(0.0) + std::exp(2.0) + std::exp(1.0) + std::exp(-1.0);
  EXPECT_NEAR(r.weight[0], std::exp(2.0) / z0, 1e-6);
  EXPECT_NEAR(r.weight[1], std::exp(1.0) / z0, 1e-6);
  // Grouped: expert 0 <- tokens 1, 2; expert 1 <- token 0; expert 2 <- tokens 0, 2; expert 3 <- token 1.
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 2, 3, 5, 6}));
  EXPECT_EQ(r.token, (std::vector<int32_t>{1, 2, 0, 0, 2, 1}));
  // Assignment (t, j) -> grouped position: (0,0)=expert 1 -> 2, (0,1)=expert 2 -> 3, (1,0)=expert 0 -> 0,
  // (1,1)=expert 3 -> 5, (2,0)=expert 2 -> 4, (2,1)=expert 0 -> 1.
  EXPECT_EQ(r.position, (std::vector<int32_t>{2, 3, 0, 5, 4, 1}));
}

TEST(MoeRouting, RenormalisedWeightsSumToOne) {
  const std::vector<float> logits = {0.3f, -0.2f, 1.7f, 0.9f, -2.0f, 0.0f};
  ExpertRouting r;
  RouteTokens(logits.data(), 1, 6, 3, /*renormalize=*/true, &r);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{2, 3, 0}));
  // Softmax over the top-3 logits (Mixtral's formulation) equals softmax, top-3, renormalise.
  const double z = std::exp(1.7) + std::exp(0.9) + std::exp(0.3);
  EXPECT_NEAR(r.weight[0], std::exp(1.7) / z, 1e-6);
  EXPECT_NEAR(r.weight[1], std::exp(0.9) / z, 1e-6);
  EXPECT_NEAR(r.weight[2], std::exp(0.3) / z, 1e-6);
}

TEST(MoeRouting, TiesGoToTheLowestExpertId) {
  // Token 0: all equal -> experts 0, 1. Token 1: experts 1 and 3 tie for first, 2 and 0 for third.
  const std::vector<float> logits = {0.5f, 0.5f, 0.5f, 0.5f, -1.0f, 2.0f, -1.0f, 2.0f};
  ExpertRouting r;
  RouteTokens(logits.data(), 2, 4, 3, /*renormalize=*/true, &r);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{0, 1, 2, 1, 3, 0}));
  EXPECT_FLOAT_EQ(r.weight[0], 1.0f / 3);
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 2, 4, 5, 6}));
  EXPECT_EQ(r.token, (std::vector<int32_t>{0, 1, 0, 1, 0, 1}));
}

// Near-ties (logits one float step apart, and values that round to the same probability) route a token the same
// way whatever the other tokens of the batch: each token's choice reads its own logits only.
TEST(MoeRouting, NearTiesRouteTheSameAloneAndInABatch) {
  const int E = 64, k = 8, T = 40;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> logits(static_cast<size_t>(T * E));
  for (float& z : logits) z = u(rng);
  for (int t = 0; t < T; ++t)  // pairs one ulp apart and exact duplicates around the k-th place
    for (int e = 0; e + 1 < E; e += 2) {
      float& a = logits[static_cast<size_t>(t * E + e)];
      float& b = logits[static_cast<size_t>(t * E + e + 1)];
      b = (e / 2) % 2 == 0 ? std::nextafter(a, 2.0f) : a;
    }
  ExpertRouting batch, pooled;
  RouteTokens(logits.data(), T, E, k, true, &batch);
  ThreadPool pool(2);
  RouteTokens(logits.data(), T, E, k, true, &pooled, &pool);  // routed in token ranges over two threads
  EXPECT_EQ(pooled.expert, batch.expert);
  EXPECT_EQ(pooled.weight, batch.weight);
  EXPECT_EQ(pooled.token, batch.token);
  EXPECT_EQ(pooled.position, batch.position);
  for (int t = 0; t < T; ++t) {
    ExpertRouting alone;
    RouteTokens(logits.data() + t * E, 1, E, k, true, &alone);
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(alone.expert[static_cast<size_t>(j)], batch.expert[static_cast<size_t>(t * k + j)]);
      EXPECT_EQ(alone.weight[static_cast<size_t>(j)], batch.weight[static_cast<size_t>(t * k + j)]);
    }
    // Exact duplicates: the lower id ranks first.
    for (int j = 0; j + 1 < k; ++j) {
      const int32_t a = batch.expert[static_cast<size_t>(t * k + j)], b = batch.expert[static_cast<size_t>(t * k + j + 1)];
      if (logits[static_cast<size_t>(t * E + a)] == logits[static_cast<size_t>(t * E + b)]) {
        EXPECT_LT(a, b);
      }
    }
  }
  // Every assignment appears once in the grouped order, each expert's tokens ascending.
  for (int e = 0; e < E; ++e)
    for (int32_t p = batch.offsets[static_cast<size_t>(e)] + 1; p < batch.offsets[static_cast<size_t>(e) + 1]; ++p)
      EXPECT_LT(batch.token[static_cast<size_t>(p) - 1], batch.token[static_cast<size_t>(p)]);
  for (int64_t a = 0; a < T * k; ++a) {
    const int32_t p = batch.position[static_cast<size_t>(a)];
    EXPECT_EQ(batch.token[static_cast<size_t>(p)], a / k);
    EXPECT_GE(p, batch.offsets[static_cast<size_t>(batch.expert[static_cast<size_t>(a)])]);
    EXPECT_LT(p, batch.offsets[static_cast<size_t>(batch.expert[static_cast<size_t>(a)]) + 1]);
  }
}

}  // namespace
}  // namespace parallm
