// Sampler: logit processing, then greedy or a seeded draw from the truncated distribution.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/target_clones.h"
#include "structured/matcher.h"
#include "util/check.h"

namespace parallm {

Status SamplingParams::Validate(int32_t vocab_size) const {
  if (max_tokens < 0) return Err("max_tokens must be >= 0, got {}", max_tokens);
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) return Err("temperature must be >= 0, got {}", temperature);
  if (top_k < 0) return Err("top_k must be >= 0, got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return Err("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return Err("min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    return Err("repetition_penalty must be > 0, got {}", repetition_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return Err("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return Err("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (logprobs > 20) return Err("logprobs must be at most 20, got {}", logprobs);
  if (n < 1 || n > 128) return Err("n must be between 1 and 128, got {}", n);
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= vocab_size) return Err("logit_bias token {} is outside the vocabulary", token);
    if (!(bias >= -100.0f && bias <= 100.0f)) return Err("logit_bias values must be in [-100, 100], got {}", bias);
  }
  if (stop.size() > 16) return Err("stop takes at most 16 strings, got {}", stop.size());
  for (const std::string& s : stop)
    if (s.size() > 1024) return Err("stop strings are at most 1024 bytes");
  for (int32_t t : stop_token_ids)
    if (t < 0 || t >= vocab_size) return Err("stop_token_ids entry {} is outside the vocabulary", t);
  if (grammar && grammar->vocab_size() != vocab_size)
    return Err("the structured-output grammar was compiled for a vocabulary of {} tokens, the model has {}",
               grammar->vocab_size(), vocab_size);
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

namespace {

// Log-softmax pieces of `logits`: the largest value and log(sum(exp)) (in double, index order).
float LogSumExp(std::span<const float> logits) {
  const float max_logit = logits[static_cast<size_t>(ArgMax(logits))];
  double total = 0;
  for (float l : logits) total += std::exp(static_cast<double>(l - max_logit));
  return static_cast<float>(std::log(total)) + max_logit;
}

}  // namespace

void ApplyTokenMask(std::span<float> logits, std::span<const uint32_t> allowed) {
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  float* l = logits.data();
  // Whole words: skipped when all allowed, filled when all refused, else a branch-free select per bit (the
  // compiler vectorizes it: a bit test against a constant vector of 1 << j, then a blend). A branch per bit was
  // the cost inside strings, where refused tokens are scattered.
  const size_t words = std::min(allowed.size(), n / 32);
  for (size_t w = 0; w < words; ++w) {
    const uint32_t bits = allowed[w];
    if (bits == ~0u) continue;
    float* p = l + w * 32;
    if (bits == 0) {
      for (size_t j = 0; j < 32; ++j) p[j] = kNever;
      continue;
    }
    for (uint32_t j = 0; j < 32; ++j) p[j] = (bits & (1u << j)) != 0 ? p[j] : kNever;
  }
  // A last partial word, and anything past the mask.
  for (size_t t = words * 32; t < n; ++t)
    if (t / 32 >= allowed.size() || (allowed[t / 32] >> (t & 31) & 1) == 0) l[t] = kNever;
}

SampleResult Sampler::Sample(std::span<float> logits, std::span<const int32_t> prompt,
                             std::span<const int32_t> output, std::span<const uint32_t> allowed) {
  const SamplingParams& p = params_;
  SampleResult result;
  // Logprobs are the model's own (before bias, penalties and temperature), as OpenAI and vLLM report them.
  const bool want_logprobs = p.logprobs >= 0;
  float raw_log_total = 0;
  if (want_logprobs) {
    raw_.assign(logits.begin(), logits.end());
    raw_log_total = LogSumExp(raw_);
  }
  if (!allowed.empty()) ApplyTokenMask(logits, allowed);
  for (const auto& [token, bias] : p.logit_bias) logits[static_cast<size_t>(token)] += bias;
  if (p.repetition_penalty != 1.0f) {
    // CTRL / HF: positive logits are divided, negative multiplied, once per distinct token seen.
    auto penalize = [&](int32_t t) {
      float& l = logits[static_cast<size_t>(t)];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    };
    counts_.clear();
    for (int32_t t : prompt) counts_[t] = 1;
    for (int32_t t : output) counts_[t] = 1;
    for (const auto& [t, c] : counts_) penalize(t);
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    counts_.clear();
    for (int32_t t : output) counts_[t]++;
    for (const auto& [t, c] : counts_)
      logits[static_cast<size_t>(t)] -= p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
  }
  if (p.temperature <= 0.0f) {
    result.token = ArgMax(logits);
  } else {
    for (float& l : logits) l /= p.temperature;
    result.token = Draw(logits);
  }
  if (want_logprobs) {
    result.logprob = raw_[static_cast<size_t>(result.token)] - raw_log_total;
    if (p.logprobs > 0) {
      // The k largest of the raw logits: one pass keeping a small sorted list (k <= 20).
      const size_t k = std::min(raw_.size(), static_cast<size_t>(p.logprobs));
      auto before = [&](int32_t a, int32_t b) {  // larger first; ties to the lower id
        const float la = raw_[static_cast<size_t>(a)], lb = raw_[static_cast<size_t>(b)];
        return la > lb || (la == lb && a < b);
      };
      std::vector<int32_t> top;
      for (int32_t i = 0; i < static_cast<int32_t>(raw_.size()); ++i) {
        if (top.size() == k && !before(i, top.back())) continue;
        top.insert(std::upper_bound(top.begin(), top.end(), i, before), i);
        if (top.size() > k) top.pop_back();
      }
      for (int32_t id : top) result.top.push_back({id, raw_[static_cast<size_t>(id)] - raw_log_total});
    }
  }
  return result;
}

int32_t Sampler::Draw(std::span<const float> logits) {
  const SamplingParams& p = params_;
  const size_t vocab = logits.size();
  const float max_logit = logits[static_cast<size_t>(ArgMax(logits))];
  // Weights relative to the best token (which has 1), and their sum, in index order.
  weights_.resize(vocab);
  double total = 0;
  for (size_t i = 0; i < vocab; ++i) total += weights_[i] = std::exp(logits[i] - max_logit);
  // No truncation: draw over the whole vocabulary in index order, no sort.
  if (p.top_k == 0 && p.top_p >= 1.0f && p.min_p <= 0.0f) {
    std::uniform_real_distribution<double> uniform(0.0, total);
    double r = uniform(rng_);
    for (size_t i = 0; i < vocab; ++i) {
      r -= weights_[i];
      if (r <= 0) return static_cast<int32_t>(i);
    }
    return static_cast<int32_t>(ArgMax(logits));  // rounding left r > 0: the last nonzero weight is as good
  }
  // Truncation needs the candidates in order, best first. Sorting all 150K is what costs; sort only those with
  // a weight >= `floor`, enough whenever top-k, top-p or min-p cuts inside them, else everything.
  auto by_weight = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  for (float floor : {1e-4f, 0.0f}) {
    candidates_.clear();
    for (size_t i = 0; i < vocab; ++i)
      if (weights_[i] >= floor) candidates_.emplace_back(weights_[i], static_cast<int32_t>(i));
    const bool all = candidates_.size() == vocab;
    size_t keep = candidates_.size();
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
      keep = static_cast<size_t>(p.top_k);
      std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep), candidates_.end(),
                        by_weight);
    } else {
      std::sort(candidates_.begin(), candidates_.end(), by_weight);
    }
    // Top-k over a subset is exact only when the subset holds k candidates (the rest weigh less).
    bool exact = all || (p.top_k > 0 && static_cast<size_t>(p.top_k) <= candidates_.size());
    candidates_.resize(keep);
    double kept_total = total;
    if (p.top_k > 0 && keep < vocab) {
      kept_total = 0;
      for (const auto& c : candidates_) kept_total += c.first;
    }
    if (p.top_p < 1.0f) {
      double cumulative = 0;
      size_t n = 0;
      while (n < candidates_.size()) {
        cumulative += candidates_[n].first / kept_total;
        ++n;
        if (cumulative >= p.top_p) {
          exact = true;  // the cut fell inside the sorted candidates
          break;
        }
      }
      candidates_.resize(n);
    }
    if (p.min_p > 0.0f) {
      if (p.min_p >= floor) exact = true;  // every token min-p keeps is among the candidates
      size_t n = 1;
      while (n < candidates_.size() && candidates_[n].first >= p.min_p) ++n;
      candidates_.resize(n);
    }
    if (!exact) continue;
    double sum = 0;
    for (const auto& c : candidates_) sum += c.first;
    std::uniform_real_distribution<double> uniform(0.0, sum);
    double r = uniform(rng_);
    for (const auto& c : candidates_) {
      r -= c.first;
      if (r <= 0) return c.second;
    }
    return candidates_.back().second;
  }
  return static_cast<int32_t>(ArgMax(logits));  // unreachable: the floor-0 pass is always exact
}

}  // namespace parallm
