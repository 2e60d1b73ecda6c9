// Sampler: greedy ties, seeded reproducibility, truncation (top-k, top-p, min-p), penalties, logit bias,
// logprobs, and parameter validation.
#include <cmath>
#include <limits>
#include <random>
#include <set>

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

// ArgMax's lane-wise search against a plain scan: ties go to the first index, NaNs are skipped unless first; and
// ScanMax continued over two parts of a row gives the same.
TEST(Sampler, ArgMaxEqualsAPlainScan) {
  auto plain = [](std::span<const float> v) {
    int32_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
    return best;
  };
  std::mt19937 rng(5);
  for (size_t n : {1u, 2u, 15u, 16u, 17u, 33u, 1000u, 151936u}) {
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<float> v(n);
      std::uniform_int_distribution<int> small(-3, 3);  // many ties
      for (float& x : v) x = trial < 3 ? static_cast<float>(small(rng)) : std::normal_distribution<float>()(rng);
      if (trial == 4 && n > 3) v[n / 2] = std::nanf("");
      if (trial == 5) v[0] = std::nanf("");
      EXPECT_EQ(ArgMax(v), plain(v)) << "n " << n << " trial " << trial;
      // ScanMax over parts, as MatMulArgMax's chunks run it: from row 0's value, the parts in order.
      for (size_t cut : {size_t{1}, n / 3, n / 2 + 5}) {
        if (cut == 0 || cut >= n) continue;
        float best = v[0];
        int64_t at = 0;
        ScanMax(v.data(), static_cast<int64_t>(cut), 0, &best, &at);
        ScanMax(v.data() + cut, static_cast<int64_t>(n - cut), static_cast<int64_t>(cut), &best, &at);
        EXPECT_EQ(at, plain(v)) << "n " << n << " trial " << trial << " cut " << cut;
      }
    }
  }
}

// The draw matches the truncated distribution: frequencies over 20,000 draws on a small vocabulary.
// The word-at-a-time mask equals the plain per-token rule (allowed: unchanged; refused or past the mask: -inf) on
// words that are all allowed, all refused and mixed, with logits not a multiple of 32 long and masks short.
TEST(Sampler, ApplyTokenMaskEqualsAPerTokenRule) {
  std::mt19937 rng(3);
  for (size_t n : {size_t{1}, size_t{31}, size_t{32}, size_t{100}, size_t{1000}}) {
    for (size_t words : {(n + 31) / 32, n / 32}) {
      std::vector<uint32_t> mask(words);
      for (size_t w = 0; w < words; ++w) {
        const uint32_t kind = rng() % 3;
        mask[w] = kind == 0 ? 0u : kind == 1 ? ~0u : static_cast<uint32_t>(rng());
      }
      std::vector<float> logits(n);
      for (size_t t = 0; t < n; ++t) logits[t] = static_cast<float>(t % 13) - 6.0f;
      std::vector<float> expected = logits;
      for (size_t t = 0; t < n; ++t)
        if (t / 32 >= words || (mask[t / 32] >> (t % 32) & 1) == 0) expected[t] = -std::numeric_limits<float>::infinity();
      ApplyTokenMask(logits, mask);
      EXPECT_EQ(logits, expected) << n << " logits, " << words << " words";
    }
  }
}

TEST(Sampler, DrawsFollowTheTruncatedDistribution) {
  const std::vector<double> probs = {0.5, 0.25, 0.15, 0.07, 0.03};
  struct Case {
    const char* name;
    int top_k;
    float top_p, min_p;
    std::vector<double> want;  // renormalized over the kept tokens
  };
  const std::vector<Case> cases = {
      {"none", 0, 1.0f, 0.0f, {0.5, 0.25, 0.15, 0.07, 0.03}},
      {"top_k 2", 2, 1.0f, 0.0f, {0.5 / 0.75, 0.25 / 0.75, 0, 0, 0}},
      {"top_p 0.8", 0, 0.8f, 0.0f, {0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0, 0}},
      {"min_p 0.2", 0, 1.0f, 0.2f, {0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0, 0}},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.seed = 7;
    Sampler s(p);
    std::vector<int> counts(probs.size());
    const int draws = 20000;
    for (int i = 0; i < draws; ++i) {
      std::vector<float> logits;
      for (double q : probs) logits.push_back(static_cast<float>(std::log(q)));
      ++counts[static_cast<size_t>(s.Sample(logits, {}, {}).token)];
    }
    for (size_t t = 0; t < probs.size(); ++t)
      EXPECT_NEAR(counts[t] / static_cast<double>(draws), c.want[t], 0.015) << c.name << " token " << t;
  }
}

// On a real-sized vocabulary the sorted-subset shortcut keeps exactly the nucleus a full sort gives.
TEST(Sampler, TopPOnALargeVocabularyStaysInTheNucleus) {
  std::mt19937 rng(11);
  for (float sharpness : {0.5f, 3.0f, 8.0f}) {  // flat (a random model) to peaked (a trained one)
    std::vector<float> logits(151936);
    for (float& l : logits) l = sharpness * std::normal_distribution<float>()(rng);
    // The nucleus by brute force.
    std::vector<int32_t> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
             (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
    });
    const float max_logit = logits[static_cast<size_t>(order[0])];
    double total = 0;
    for (float l : logits) total += std::exp(static_cast<double>(l - max_logit));
    std::set<int32_t> nucleus;
    double cumulative = 0;
    for (int32_t id : order) {
      nucleus.insert(id);
      cumulative += std::exp(static_cast<double>(logits[static_cast<size_t>(id)] - max_logit)) / total;
      if (cumulative >= 0.9) break;
    }
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_p = 0.9f;
    p.seed = 3;
    Sampler s(p);
    for (int i = 0; i < 50; ++i) {
      std::vector<float> row = logits;
      const int32_t t = s.Sample(row, {}, {}).token;
      EXPECT_TRUE(nucleus.contains(t)) << "sharpness " << sharpness << " token " << t;
    }
  }
}

// Logprobs are the model's: temperature and bias change the draw, not the reported numbers.
TEST(Sampler, LogprobsAreTheModelsBeforeProcessing) {
  SamplingParams p;
  p.logprobs = 1;
  p.temperature = 0.5f;
  p.logit_bias[0] = 5.0f;
  p.seed = 1;
  Sampler s(p);
  std::vector<float> logits = {0, std::log(3.0f), 0};
  SampleResult r = s.Sample(logits, {}, {});
  EXPECT_EQ(r.token, 0);  // the bias makes token 0 near certain
  EXPECT_NEAR(r.logprob, std::log(0.2f), 1e-5);
  ASSERT_EQ(r.top.size(), 1u);
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_NEAR(r.top[0].logprob, std::log(0.6f), 1e-5);
}

}  // namespace
}  // namespace parallm
