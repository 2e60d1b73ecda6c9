// Sampler: greedy ties, seeded reproducibility, truncation (top-k, top-p, min-p), penalties, logit bias,
// logprobs, and parameter validation.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/sampler.h"

namespace parallm {
namespace {

TEST(Sampler, GreedyPicksTheLowestIdOnTies) {
  Sampler s(SamplingParams{});
  std::vector<float> logits = {1, 3, 3, 2};
  EXPECT_EQ(s.Sample(logits, {}, {}).token, 1);
}

TEST(Sampler, SameSeedSameDraws) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  Sampler a(p), b(p);
  std::vector<int32_t> draws_a, draws_b;
  for (int i = 0; i < 50; ++i) {
    std::vector<float> l1 = {0.1f, 0.2f, 0.3f, 0.4f, 0.0f}, l2 = l1;
    draws_a.push_back(a.Sample(l1, {}, {}).token);
    draws_b.push_back(b.Sample(l2, {}, {}).token);
  }
  EXPECT_EQ(draws_a, draws_b);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s(p);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> logits = {0, 1, 5, 2};
    EXPECT_EQ(s.Sample(logits, {}, {}).token, 2);
  }
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;  // token 0 alone has ~0.87 of the mass
  Sampler s(p);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> logits = {2, 0, 0, -1};
    EXPECT_EQ(s.Sample(logits, {}, {}).token, 0);
  }
  SamplingParams m;
  m.temperature = 1.0f;
  m.min_p = 0.5f;  // tokens below half the best's probability are dropped: only 0 and 1 remain
  Sampler t(m);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> logits = {1.0f, 0.5f, -3, -3};
    EXPECT_LE(t.Sample(logits, {}, {}).token, 1);
  }
}

TEST(Sampler, PenaltiesAndBias) {
  SamplingParams p;
  p.presence_penalty = 2.0f;
  p.logit_bias = {{3, 10.0f}};
  Sampler s(p);
  std::vector<float> logits = {5, 4.5f, 0, -20};
  std::vector<int32_t> output = {0};
  // Token 0 loses 2 for presence (5 -> 3), token 1 wins; token 3 gains 10 (-20 -> -10), still behind.
  EXPECT_EQ(s.Sample(logits, {}, output).token, 1);
  SamplingParams r;
  r.repetition_penalty = 2.0f;
  Sampler rs(r);
  std::vector<float> l2 = {4, 3, 0};
  std::vector<int32_t> prompt = {0};
  EXPECT_EQ(rs.Sample(l2, prompt, {}).token, 1);  // 4 / 2 = 2 < 3
}

TEST(Sampler, Logprobs) {
  SamplingParams p;
  p.logprobs = 2;
  Sampler s(p);
  std::vector<float> logits = {0, std::log(3.0f), 0};
  SampleResult r = s.Sample(logits, {}, {});
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.logprob, std::log(0.6f), 1e-5);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_EQ(r.top[1].token, 0);
  EXPECT_NEAR(r.top[1].logprob, std::log(0.2f), 1e-5);
}

TEST(SamplingParams, ValidateNamesTheField) {
  SamplingParams p;
  p.top_p = 0;
  EXPECT_NE(p.Validate(10).message().find("top_p"), std::string::npos);
  p = SamplingParams{};
  p.temperature = -0.5f;
  EXPECT_NE(p.Validate(10).message().find("temperature"), std::string::npos);
  p = SamplingParams{};
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(p.Validate(10).message().find("logit_bias"), std::string::npos);
  p = SamplingParams{};
  p.max_tokens = -1;
  EXPECT_FALSE(p.Validate(10).ok());
  EXPECT_TRUE(SamplingParams{}.Validate(10).ok());
}

}  // namespace
}  // namespace parallm
